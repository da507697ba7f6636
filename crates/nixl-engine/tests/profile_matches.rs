//! `--ucx-profile nixl` predicts NIXL: the UCX engine with the profile and the NIXL engine, on the
//! same local pair, report the same data-path class per memory type and direction (put_bw ↔
//! WRITE, get_bw ↔ READ).
//!
//! Both run against the same UCX release — the one bundled in the NIXL wheel (the UCX engine's
//! loader accepts the wheel's renamed libraries) — because the class depends on the UCX version
//! as much as on the settings: a UCX engine on another UCX predicts that UCX, not NIXL's.

use crate::common;

use common::{child_main, report_of, run_child, start_server, tool};
use icb_core::{Direction, MemoryPair, PairReport, TestKind, TransportClass};
use icb_engine::{ConnectOptions, ServeOptions, UcxOptions, UcxProfile};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

#[test]
#[ignore = "helper process: the other tests of this file run it as their child"]
fn child_entry() {
    child_main();
}

const SIZES: [u64; 2] = [16 << 10, 1 << 20];

/// The UCX libraries bundled in the NIXL wheel that scripts/setup unpacked.
fn nixl_bundled_ucx() -> PathBuf {
    let nixl =
        std::env::var_os("IC_BENCH_NIXL_LIB").expect("IC_BENCH_NIXL_LIB (from .cargo/config.toml; run scripts/setup)");
    let site = PathBuf::from(nixl).parent().map(PathBuf::from).unwrap_or_default();
    std::fs::read_dir(&site)
        .expect("the wheel's site directory")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .find(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("nixl_cu") && n.ends_with(".libs"))
        })
        .expect("the wheel's bundled libraries (nixl_cu*.libs)")
}

fn ucx_engine_pair(ucx: UcxOptions) -> PairReport {
    let (tx, rx) = std::sync::mpsc::channel();
    let serve_ucx = ucx.clone();
    let server = std::thread::spawn(move || {
        icb_engine::serve(ServeOptions {
            cancel: None,
            guard: Default::default(),
            listen: "127.0.0.1:0".into(),
            once: true,
            idle_timeout: Some(Duration::from_secs(60)),
            ucx: serve_ucx,
            tool: tool(),
            on_listening: Some(Box::new(move |l| {
                let _ = tx.send(l.address.to_string());
            })),
        })
    });
    let addr = rx
        .recv_timeout(Duration::from_secs(60))
        .expect("UCX engine server listening");
    let mut settings = common::settings(&SIZES, &[MemoryPair::HOST_HOST]);
    settings.tests = vec![TestKind::PutBw, TestKind::GetBw];
    let report = icb_engine::connect(ConnectOptions {
        cancel: None,
        token: None,
        server: addr,
        settings,
        connect_timeout: Duration::from_secs(20),
        locality: None,
        expect_flags: Default::default(),
        expect_config: None,
        expectation: None,
        ucx,
        tool: tool(),
        placement_mode: "manual".into(),
        on_case: None,
    })
    .expect("UCX engine pair");
    server.join().expect("server thread").expect("UCX engine server");
    report
}

fn classes(report: &PairReport, nixl: bool) -> BTreeMap<(Direction, String, u64), TransportClass> {
    report
        .cases
        .iter()
        .filter(|c| c.blocks.unwrap_or(1) == 1)
        .filter_map(|c| {
            let dir = match (nixl, c.test) {
                (true, _) => c.run_by.direction?,
                (false, TestKind::PutBw) => Direction::Write,
                (false, TestKind::GetBw) => Direction::Read,
                _ => return None,
            };
            Some((
                (dir, c.memory.to_string(), c.size),
                c.transport.as_ref()?.data_path.class,
            ))
        })
        .collect()
}

#[test]
fn ucx_engine_with_the_nixl_profile_matches_the_nixl_engine() {
    let ucx = UcxOptions {
        library_dir: Some(nixl_bundled_ucx()),
        ..Default::default()
    }
    .with_profile(UcxProfile::Nixl);
    let ucx_report = ucx_engine_pair(ucx);
    let predicted = classes(&ucx_report, false);

    let env = vec![
        ("ICB_NIXL_TEST_BATCHES", "1".to_string()),
        ("ICB_NIXL_TEST_SIZES", SIZES.map(|s| s.to_string()).join(",")),
    ];
    let (server, addr) = start_server(concat!(module_path!(), "::child_entry"), &env);
    let mut client_env = env.clone();
    client_env.push(("ICB_NIXL_TEST_SERVER", addr));
    let (code, out, err) = run_child(
        common::child(concat!(module_path!(), "::child_entry"), "connect", &client_env),
        Duration::from_secs(300),
    );
    let nixl_report = report_of(&out).unwrap_or_else(|| panic!("no report (exit {code:?}):\n{out}\n{err}"));
    assert_eq!(
        server.finish(Duration::from_secs(30)),
        Some(0),
        "the server leaves cleanly after its client"
    );
    let actual = classes(&nixl_report, true);

    assert_eq!(
        ucx_report.client.ucx_version, nixl_report.client.ucx_version,
        "same UCX on both engines"
    );
    assert_eq!(actual.len(), 4, "{actual:?}");
    println!("UCX engine (profile nixl): {predicted:?}\nNIXL engine: {actual:?}");
    assert_eq!(predicted, actual);
}
