//! No orphans (issue 10): when `ic-bench pair --local` is SIGKILLed — no handler, no drop runs —
//! both sides die with it within a second in every isolation mode (the parent death signal reaches
//! the real program through the `setpriv`/`ip netns exec`/`nsenter`/`unshare` chain), and the
//! namespaces it left are removed by `ic-bench gc --local` or by the next local run.

mod pair_local_support;

use icb_isolate::{DEFAULT_PREFIX, Leftovers, leftovers_of, privileged_tests_enabled};
use pair_local_support::{SMALL, ic_bench, serial};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// Pids of `owner`'s run whose command line has the word `word` (`serve`, `connect`).
fn side_pids(owner: u32, word: &str) -> Vec<u32> {
    leftovers_of(DEFAULT_PREFIX, owner)
        .processes
        .into_iter()
        .filter(|p| {
            std::fs::read(format!("/proc/{p}/cmdline"))
                .is_ok_and(|c| c.split(|b| *b == 0).any(|a| a == word.as_bytes()))
        })
        .collect()
}

/// Starts a long pair in `isolation` and returns it once both sides run.
fn start_long_pair(isolation: &str) -> std::process::Child {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ic-bench"))
        .args(["pair", "--local", "--isolation", isolation])
        .args(["--tests", "tag_bw", "--sizes", "8,1MiB", "--memory", "host-host"])
        .args(["--min-time", "5", "--max-time", "10"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        assert!(
            Instant::now() < deadline,
            "{isolation}: the pair never got both sides running"
        );
        assert!(child.try_wait().unwrap().is_none(), "{isolation}: ic-bench ended early");
        let owner = child.id();
        if !side_pids(owner, "serve").is_empty() && !side_pids(owner, "connect").is_empty() {
            return child;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// SIGKILLs the pair and returns how long its processes took to disappear (bounded at 5 s).
fn kill_and_time_orphans(mut child: std::process::Child) -> Duration {
    let owner = child.id();
    child.kill().unwrap();
    child.wait().unwrap();
    let killed = Instant::now();
    while !leftovers_of(DEFAULT_PREFIX, owner).processes.is_empty() && killed.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(5));
    }
    killed.elapsed()
}

#[test]
fn a_sigkilled_pair_leaves_no_process_and_its_namespaces_are_collected() {
    let _one = serial();
    for isolation in ["none", "pod", "host-ipc", "node"] {
        if isolation != "none" && !privileged_tests_enabled("a_sigkilled_pair_leaves_no_process (namespaced modes)") {
            break;
        }
        let child = start_long_pair(isolation);
        let owner = child.id();
        let took = kill_and_time_orphans(child);
        let left = leftovers_of(DEFAULT_PREFIX, owner);
        assert_eq!(left.processes, Vec::<u32>::new(), "{isolation}: orphans survived");
        assert!(
            took < Duration::from_secs(1),
            "{isolation}: orphans took {took:?} to die"
        );
        eprintln!("{isolation}: both sides gone {took:?} after SIGKILL of ic-bench");
        if isolation == "none" {
            assert!(left.namespaces.is_empty());
            continue;
        }
        assert!(
            !left.namespaces.is_empty(),
            "{isolation}: a SIGKILL leaves the namespaces"
        );
        if isolation == "host-ipc" {
            // The next local run removes them at its start.
            let mut args = vec!["pair", "--local", "--isolation", "pod"];
            args.extend(SMALL);
            let next = ic_bench(&args, &[]);
            assert!(next.code == 0 || next.code == 1, "{}", next.stderr);
            next.assert_nothing_left();
        } else {
            let gc = Command::new(env!("CARGO_BIN_EXE_ic-bench"))
                .args(["gc", "--local"])
                .output()
                .unwrap();
            let stdout = String::from_utf8_lossy(&gc.stdout);
            assert_eq!(
                gc.status.code(),
                Some(0),
                "{stdout}{}",
                String::from_utf8_lossy(&gc.stderr)
            );
            for ns in &left.namespaces {
                assert!(
                    stdout.contains(&format!("deleted network namespace {ns}")),
                    "{isolation}: {ns} not reported: {stdout}"
                );
            }
        }
        assert_eq!(leftovers_of(DEFAULT_PREFIX, owner), Leftovers::default(), "{isolation}");
    }
}
