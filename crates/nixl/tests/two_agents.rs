//! Two NIXL agents in one child process move DRAM bytes with READ and WRITE through the real
//! NIXL C API and its UCX backend (the NIXL that scripts/setup installs). The NIXL work runs in a
//! re-executed child of this test binary, which leaves through `nixl::exit_process` — the way
//! every process that used NIXL must (see there) — so the harness process never loads NIXL.

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
    let nixl = Nixl::load(None).map_err(|e| e.to_string())?;
    let mut target = nixl.agent("target").map_err(|e| e.to_string())?;
    let mut initiator = nixl.agent("initiator").map_err(|e| e.to_string())?;
    let params = target.create_ucx_backend(&[]).map_err(|e| e.to_string())?;
    initiator.create_ucx_backend(&[]).map_err(|e| e.to_string())?;
    const BLOCK: usize = 64 << 10;
    const N: usize = 8;
    let mut remote = vec![0u8; BLOCK * N];
    let mut local = vec![0u8; BLOCK * N];
    for (i, b) in remote.iter_mut().enumerate() {
        *b = (i % 251) as u8;
    }
    let _rt = target
        .register(MemKind::Dram, remote.as_mut_ptr() as usize, remote.len(), 0)
        .map_err(|e| e.to_string())?;
    let _rl = initiator
        .register(MemKind::Dram, local.as_mut_ptr() as usize, local.len(), 0)
        .map_err(|e| e.to_string())?;
    let md = target.local_metadata().map_err(|e| e.to_string())?;
    let name = initiator.load_remote_metadata(&md).map_err(|e| e.to_string())?;
    let descs = |base: usize| -> Vec<Descriptor> {
        (0..N)
            .map(|i| Descriptor {
                addr: (base + i * BLOCK) as u64,
                len: BLOCK,
                dev_id: 0,
            })
            .collect()
    };
    let mut out = format!("md={} name={name} params={}", md.len(), params.len());
    for op in [XferOp::Read, XferOp::Write] {
        if op == XferOp::Write {
            remote.iter_mut().for_each(|b| *b = 0);
        }
        let mut t = initiator
            .transfer(
                op,
                MemKind::Dram,
                &descs(local.as_ptr() as usize),
                MemKind::Dram,
                &descs(remote.as_ptr() as usize),
                &name,
            )
            .map_err(|e| e.to_string())?;
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut done = t.post().map_err(|e| e.to_string())?;
        while !done {
            target.progress().map_err(|e| e.to_string())?;
            done = t.poll().map_err(|e| e.to_string())?;
            if Instant::now() > deadline {
                return Err(format!("{op:?} did not complete within 30 s"));
            }
        }
        let ok = local == remote && local.iter().enumerate().all(|(i, b)| *b == (i % 251) as u8);
        out.push_str(&format!(" {op:?}={ok}"));
    }
    let size_of_logs = || -> u64 {
        std::fs::read_dir(&log_dir)
            .map(|d| d.filter_map(|e| e.ok()?.metadata().ok()).map(|m| m.len()).sum())
            .unwrap_or(0)
    };
    nixl::flush_c_stdio();
    let before = size_of_logs();
    initiator.invalidate_remote(&name).map_err(|e| e.to_string())?;
    nixl::flush_c_stdio();
    out.push_str(&format!(" log_before_invalidate={before} after={}", size_of_logs()));
    drop(_rl);
    drop(initiator);
    nixl::flush_c_stdio();
    out.push_str(&format!(" after_initiator_drop={}", size_of_logs()));
    Ok(out)
}

#[test]
fn child_entry() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return;
    }
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
        .args(["--exact", "child_entry", "--nocapture", "--test-threads=1"])
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
