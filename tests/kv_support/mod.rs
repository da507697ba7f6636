//! Shared by the KV test binaries, local (`pair_kv`: `mod kv_support;`) and on the emulated
//! cluster (through `pair_kube_support`): what every rank of the per-rank model must show
//! whatever its placement. A directory without a main.rs is not a test target of its own.
#![allow(dead_code)]

use icb_core::KvOutcome;
use icb_core::model::KvRank;

/// Each side's ranks are exactly 0..n: `a` prefill ranks and `b` decode ranks.
pub fn assert_ranks_numbered(kv: &KvOutcome, (a, b): (u32, u32)) {
    for (side, n) in [("prefill", a), ("decode", b)] {
        let mut ranks: Vec<u32> = kv.ranks.iter().filter(|r| r.side == side).map(|r| r.rank).collect();
        ranks.sort_unstable();
        assert_eq!(ranks, (0..n).collect::<Vec<_>>(), "{side} ranks: {:?}", kv.ranks);
    }
}

/// A rank's own counts are the sums over its peers (those naming it on its side): how many, the
/// bytes, and on a decode rank the blocks it verified, one per descriptor received.
pub fn assert_rank_sums_its_peers(kv: &KvOutcome, r: &KvRank) {
    let mine: Vec<_> = kv
        .peers
        .iter()
        .filter(|p| {
            if r.side == "decode" {
                p.decode_rank == r.rank
            } else {
                p.prefill_rank == r.rank
            }
        })
        .collect();
    assert_eq!(r.peers as usize, mine.len(), "{r:?}");
    assert_eq!(r.bytes, mine.iter().map(|p| p.bytes).sum::<u64>(), "{r:?}");
    if r.side == "decode" {
        assert_eq!(
            r.blocks_verified,
            mine.iter().map(|p| p.descriptors).sum::<u64>(),
            "{r:?}"
        );
    }
}

/// `IC_BENCH_LOG` under which `pair --kv-shape` logs each repetition it has measured (the
/// warnings otherwise, kube-rs quiet): what [`interrupt_after_first_repetition`] waits for.
pub const REPETITIONS_LOGGED: &str = "warn,kube_client=off,kube_runtime=off,icb_kv_transfer=info";

/// What a `pair --kv-shape` process interrupted mid-repetitions did.
#[derive(Debug)]
pub struct Interrupted {
    pub code: Option<i32>,
    pub stderr: String,
}

/// Waits until `child` (`pair --kv-shape …` with stderr piped and `IC_BENCH_LOG` set to
/// [`REPETITIONS_LOGGED`]) has measured its first repetition, then as [`interrupt_when`].
pub fn interrupt_after_first_repetition(
    child: std::process::Child,
    signal: nix::sys::signal::Signal,
    start: std::time::Duration,
) -> Interrupted {
    interrupt_when(child, signal, start, |_, seen| {
        seen.iter().any(|l| l.contains("measured KV repetition 1"))
    })
}

/// Polls `ready` (with the child's pid and its stderr lines so far) every 20 ms until it holds,
/// sends `child` `signal`, and waits for it to end: within `start` for `ready`, 60 s after the
/// signal; past either, or should it end before, the child is killed and the test fails.
pub fn interrupt_when(
    mut child: std::process::Child,
    signal: nix::sys::signal::Signal,
    start: std::time::Duration,
    mut ready: impl FnMut(u32, &[String]) -> bool,
) -> Interrupted {
    use std::io::BufRead;
    use std::time::{Duration, Instant};
    let stderr = child.stderr.take().expect("stderr piped");
    let (tx, lines) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let mut seen = Vec::new();
    let deadline = Instant::now() + start;
    loop {
        seen.extend(lines.try_iter());
        if ready(child.id(), &seen) {
            break;
        }
        if child.try_wait().expect("try_wait").is_some() {
            fail(&mut child, "it ended before the signal", &seen);
        }
        if Instant::now() > deadline {
            fail(&mut child, &format!("not ready within {start:?}"), &seen);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(child.id() as i32), signal).expect("signal ic-bench");
    let signalled = Instant::now();
    let status = loop {
        if let Some(s) = child.try_wait().expect("try_wait") {
            break s;
        }
        if signalled.elapsed() > Duration::from_secs(60) {
            fail(&mut child, &format!("no exit within 60 s of {signal}"), &seen);
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    // The rest of its stderr; bounded, should a leaked process hold the pipe open.
    while let Ok(line) = lines.recv_timeout(Duration::from_secs(10)) {
        seen.push(line);
    }
    Interrupted {
        code: status.code(),
        stderr: seen.join("\n"),
    }
}

/// Kills `child` and fails the test with `why` and what it wrote to stderr.
fn fail(child: &mut std::process::Child, why: &str, seen: &[String]) -> ! {
    let _ = child.kill();
    let _ = child.wait();
    panic!("{why}; stderr:\n{}", seen.join("\n"));
}
