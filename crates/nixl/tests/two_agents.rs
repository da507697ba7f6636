//! Two NIXL agents in one child process move DRAM bytes with READ and WRITE through the real
//! NIXL C API and its UCX backend (the NIXL that scripts/setup installs). The NIXL work runs in a
//! re-executed child of this test binary, which leaves through `nixl::exit_process` — the way
//! every process that used NIXL must (see there) — so the harness process never loads NIXL.

use icb_memory::{Buffer, MemoryKind};
use nixl::{Descriptor, MemKind, Nixl, XferOp};
use std::process::Command;
use std::time::{Duration, Instant};

const CHILD_ENV: &str = "ICB_NIXL_TEST_CHILD";

fn run_child() -> Result<String, String> {
    let log_dir = std::env::var("ICB_NIXL_TEST_LOG").map_err(|e| e.to_string())?;
    nixl::set_env_before_start(&[
        ("UCX_PROTO_INFO".into(), "used".into()),
        ("UCX_LOG_FILE".into(), format!("{log_dir}/ucx.%p.log")),
    ]);
    let e = |e: nixl::NixlError| e.to_string();
    let nixl = Nixl::load(None).map_err(e)?;
    let mut target = nixl.agent("target").map_err(e)?;
    let mut initiator = nixl.agent("initiator").map_err(e)?;
    let params = target.create_ucx_backend(&[]).map_err(e)?;
    initiator.create_ucx_backend(&[]).map_err(e)?;
    const BLOCK: usize = 64 << 10;
    const N: usize = 8;
    const SEED: u64 = 0x5eed;
    let host = |seed: u64| -> Result<Buffer, String> {
        let mut b = Buffer::new(MemoryKind::Host, BLOCK * N, 0).map_err(|e| e.to_string())?;
        b.fill(seed).map_err(|e| e.to_string())?;
        Ok(b)
    };
    let remote = target.register(host(SEED)?).map_err(e)?;
    let local = initiator.register(host(!SEED)?).map_err(e)?;
    let md = target.local_metadata().map_err(e)?;
    let name = initiator.load_remote_metadata(&md).map_err(e)?;
    let descs = |base: u64| -> Vec<Descriptor> {
        (0..N as u64)
            .map(|i| Descriptor {
                addr: base + i * BLOCK as u64,
                len: BLOCK,
                dev_id: 0,
            })
            .collect()
    };
    let mut out = format!("md={} name={name} params={}", md.len(), params.len());
    // A block outside the registered memory is refused before NIXL sees it.
    let outside = initiator.transfer(
        XferOp::Read,
        &local,
        &descs(local.addr() + 1),
        MemKind::Dram,
        &descs(remote.addr()),
        &name,
    );
    out.push_str(&format!(" outside_refused={}", outside.is_err()));
    for (op, source, destination) in [(XferOp::Read, &remote, &local), (XferOp::Write, &local, &remote)] {
        // The destination starts with the complement pattern; the source holds SEED's pattern.
        destination.with_memory(|b| b.fill(!SEED)).map_err(|e| e.to_string())?;
        source.with_memory(|b| b.fill(SEED)).map_err(|e| e.to_string())?;
        let mut t = initiator
            .transfer(
                op,
                &local,
                &descs(local.addr()),
                MemKind::Dram,
                &descs(remote.addr()),
                &name,
            )
            .map_err(e)?;
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut done = t.post().map_err(e)?;
        while !done {
            target.progress().map_err(e)?;
            done = t.poll().map_err(e)?;
            if Instant::now() > deadline {
                return Err(format!("{op:?} did not complete within 30 s"));
            }
        }
        drop(t);
        let ok = destination.with_memory(|b| b.verify(BLOCK * N, SEED)).is_ok();
        out.push_str(&format!(" {op:?}={ok}"));
    }
    initiator.invalidate_remote(&name).map_err(e)?;
    // The target's metadata went to the initiator: its dropped registration's memory stays
    // with the agent (a peer may still reach it), freed only after the agent is destroyed.
    drop(remote);
    out.push_str(&format!(" kept_after_export={}", target.kept_buffers()));
    drop(local);
    out.push_str(&format!(" kept_without_export={}", initiator.kept_buffers()));
    Ok(out)
}

#[test]
#[ignore = "helper process: run by read_and_write_between_two_agents_verify_bytes"]
fn child_entry() {
    assert!(
        std::env::var_os(CHILD_ENV).is_some(),
        "run only as the parent test's child"
    );
    let code = match run_child() {
        Ok(s) => {
            println!("RESULT {s}");
            0
        }
        Err(e) => {
            println!("ERROR {e}");
            1
        }
    };
    nixl::exit_process(code);
}

#[test]
fn read_and_write_between_two_agents_verify_bytes() {
    let logs = tempfile::tempdir().unwrap();
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "child_entry", "--ignored", "--nocapture", "--test-threads=1"])
        .env(CHILD_ENV, "1")
        .env("ICB_NIXL_TEST_LOG", logs.path())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "child failed: {:?}\n{stdout}\n{stderr}",
        out.status
    );
    let line = stdout
        .lines()
        .find_map(|l| l.split_once("RESULT ").map(|(_, r)| r))
        .unwrap_or_else(|| panic!("{stdout}"));
    assert!(line.contains("Read=true") && line.contains("Write=true"), "{line}");
    assert!(line.contains("outside_refused=true"), "{line}");
    assert!(line.contains("kept_after_export=1"), "{line}");
    assert!(line.contains("kept_without_export=0"), "{line}");
    let logs: Vec<_> = std::fs::read_dir(logs.path()).unwrap().collect();
    assert!(!logs.is_empty(), "UCX wrote no log file");
    for l in logs {
        let p = l.unwrap().path();
        std::fs::copy(
            &p,
            format!("/tmp/nixl-smoke-{}", p.file_name().unwrap().to_string_lossy()),
        )
        .ok();
    }
    println!("{line}");
}
