//! `ic-bench serve --rails` on one bare-metal host and `connect HOST:PORT --rails` on another,
//! emulated as two nodes with 3 rail NICs each (root: namespaces, veths, a bridge per rail; CI
//! runs as root). Each process runs as a process of its node (the node's network, IPC, PID and
//! mount namespaces; its sysfs shows the node's own NICs and counters), with the node's recorded rail-map tree as its
//! rail map (`IC_BENCH_RAIL_TREE`, as on the emulated cluster). Real UCX over TCP on the rails.

mod pair_local_support;
mod rails_support;

use icb_core::{PairReport, VerdictStatus};
use icb_isolate::{Fabric, FabricOptions, RunTag};
use icb_rails::agent::{AgentErrorKind, MAX_REQUEST, Response};
use icb_rails::info::RAIL_TREE_ENV;
use pair_local_support::privileged;
use rails_support::{
    RAIL_CASE, TWO_TIMED_CASES, assert_counted_on_its_own_nic, assert_partial_rails_report,
    interrupt_once_every_rail_measured,
};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::os::unix::process::ExitStatusExt;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_ic-bench");

fn fabric() -> Fabric {
    let tag = RunTag::new(icb_isolate::DEFAULT_PREFIX).unwrap();
    let opts = FabricOptions {
        rails: 3,
        ..Default::default()
    };
    Fabric::create_with(tag, &["a", "b"], opts).unwrap()
}

/// `ic-bench ARGS` on `node`, as a process of that host: the node's network, IPC, PID and mount
/// namespaces (its /sys shows its own NICs), with its rail map.
fn on_node(fabric: &Fabric, node: &str, args: &[&str]) -> Command {
    let argv = icb_isolate::PodSpec::new(BIN)
        .node(fabric.node(node).unwrap())
        .host_ipc(true)
        .host_pid(true)
        .args(args)
        .command_line()
        .unwrap();
    let mut cmd = Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .env(RAIL_TREE_ENV, fabric.rail_tree(node).unwrap())
        // Both hosts hold the same token: the ranks listen beyond loopback (issue 22).
        .env("IC_BENCH_TOKEN", "rails-hosts-token-0123456789")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// The `ic-bench` process under `pid` (the namespace tools in front of it fork).
fn ic_bench_under(pid: u32) -> u32 {
    let mut todo = vec![pid];
    while let Some(p) = todo.pop() {
        let exe = std::fs::read_link(format!("/proc/{p}/exe")).unwrap_or_default();
        if exe.to_string_lossy().ends_with("ic-bench") {
            return p;
        }
        let children = std::fs::read_to_string(format!("/proc/{p}/task/{p}/children")).unwrap_or_default();
        todo.extend(children.split_whitespace().filter_map(|c| c.parse::<u32>().ok()));
    }
    panic!("no ic-bench under {pid}");
}

/// Starts serve --rails auto on node a; returns it and its agent's address.
fn start_serve(fabric: &Fabric) -> (Child, String) {
    let listen = format!("{}:0", fabric.node_ip("a").unwrap());
    let mut serve = on_node(fabric, "a", &["serve", "--rails", "auto", "--listen", &listen])
        .stderr(Stdio::inherit())
        .spawn()
        .unwrap();
    let out = serve.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(out).read_line(&mut line);
        let _ = tx.send(line);
    });
    let line = rx.recv_timeout(Duration::from_secs(90)).expect("serve --rails listens");
    let v: serde_json::Value = serde_json::from_str(&line).expect("a listening line");
    (serve, v["address"].as_str().unwrap().to_string())
}

/// connect --rails auto on node b against `agent`: (exit code, report, stderr).
fn connect(fabric: &Fabric, agent: &str, extra: &[&str]) -> (i32, Option<PairReport>, String) {
    let mut args = vec!["connect", agent, "--rails", "auto"];
    args.extend(RAIL_CASE);
    args.extend(extra);
    let child = on_node(fabric, "b", &args).spawn().unwrap();
    let out = pair_local_support::wait_with_output(child, Duration::from_secs(300));
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    let stderr = String::from_utf8_lossy(&out.stderr).to_string();
    (
        out.status.code().unwrap_or(-1),
        serde_json::from_str(stdout.trim()).ok(),
        stderr,
    )
}

/// The `ic-bench` processes in node a's network namespace (serve and its ranks).
fn ic_bench_on_a(fabric: &Fabric) -> Vec<String> {
    let out = Command::new("ip")
        .args(["netns", "pids", fabric.netns("a").unwrap()])
        .output()
        .unwrap();
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .filter(|p| {
            let exe = std::fs::read_link(format!("/proc/{p}/exe")).unwrap_or_default();
            exe.to_string_lossy().ends_with("ic-bench")
        })
        .map(|p| {
            let cmd = std::fs::read_to_string(format!("/proc/{p}/cmdline")).unwrap_or_default();
            format!("{p} {}", cmd.replace('\0', " "))
        })
        .collect()
}

/// One raw client of the agent, from node b: sends `bytes`, returns the answer within 10 s.
fn raw_client(fabric: &Fabric, agent: &str, bytes: Vec<u8>) -> (Response, Duration) {
    let agent = agent.to_string();
    icb_isolate::run_in_netns(fabric.netns("b").unwrap(), move || {
        let started = Instant::now();
        let mut s = TcpStream::connect(&agent).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let _ = s.write_all(&bytes);
        let mut back = Vec::new();
        let _ = s.read_to_end(&mut back);
        let r: Response = serde_json::from_slice(back.trim_ascii()).expect("a typed refusal");
        (r, started.elapsed())
    })
    .unwrap()
}

#[test]
fn three_rails_pass_across_two_hosts_hostile_clients_are_refused_and_sigint_stops_every_rank() {
    let Some(_one) =
        privileged("three_rails_pass_across_two_hosts_hostile_clients_are_refused_and_sigint_stops_every_rank")
    else {
        return;
    };
    let fabric = fabric();
    let (mut serve, agent) = start_serve(&fabric);
    let running = ic_bench_on_a(&fabric);
    assert_eq!(running.len(), 4, "serve and 3 ranks: {running:?}");

    // A hostile client is refused, typed, within the agent's deadline; serve keeps serving.
    let refused = |bytes: Vec<u8>, kind: AgentErrorKind| {
        let (r, took) = raw_client(&fabric, &agent, bytes);
        assert_eq!(r.error.expect("refused").kind, kind);
        assert!(took < Duration::from_secs(8), "{took:?}");
    };
    refused(b"garbage\n".to_vec(), AgentErrorKind::BadRequest);
    refused(vec![b'{'; MAX_REQUEST * 8], AgentErrorKind::TooLong);
    refused(
        b"{\"schema\":\"ic-bench.rails-agent/v1\",\"get\":\"exec\"}\n".to_vec(),
        AgentErrorKind::UnknownRequest,
    );
    refused(Vec::new(), AgentErrorKind::Deadline);

    let (code, report, stderr) = connect(&fabric, &agent, &["--rail-margin", "60%"]);
    assert_eq!(code, 0, "stderr:\n{stderr}");
    let report = report.expect("a report");
    let rails = report.rails.expect("a rails section");
    assert_eq!(rails.rails.len(), 3);
    for row in &rails.rails {
        assert_counted_on_its_own_nic(row);
        for end in [&row.prefill, &row.decode] {
            assert_eq!(end.counter_device, format!("rail{}", row.index));
            assert_eq!(end.ucx_net_devices, format!("rail{}", row.index));
        }
        // The hosts' sysfs has no RDMA port (the emulated NICs are netdevs there): the health
        // counters of both sides, the decode side's through the agent, are "not read", not ok.
        let health = row.health.as_ref().expect("health read on both hosts");
        assert_eq!(health.cell(), "not read", "{health:?}");
        let note = health.decode.note.as_deref().unwrap_or_default();
        assert!(note.contains(&format!("no port mlx5_{}:1", row.index)), "{note}");
    }
    assert!(
        report.placement.mode.starts_with("bare metal"),
        "{}",
        report.placement.mode
    );

    // Ctrl-C to connect once every rail measured its first case: the partial report of the
    // rails' cases in --output-file, exit 130; serve keeps serving.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("report.json");
    let file_arg = file.display().to_string();
    let mut args = vec![
        "connect",
        &agent,
        "--rails",
        "auto",
        "-o",
        "json",
        "--output-file",
        &file_arg,
    ];
    args.extend(TWO_TIMED_CASES);
    interrupt_once_every_rail_measured(on_node(&fabric, "b", &args), 3, dir.path(), ic_bench_under);
    assert_partial_rails_report(&file, 3);
    assert!(serve.try_wait().unwrap().is_none(), "serve still serves");

    // A rank that dies: the agent no longer vouches for the rails, typed.
    let serve_pid = ic_bench_under(serve.id());
    let rank: i32 = ic_bench_on_a(&fabric)
        .iter()
        .filter_map(|p| p.split_whitespace().next()?.parse().ok())
        .find(|p| *p != serve_pid as i32)
        .expect("a rank");
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(rank), nix::sys::signal::Signal::SIGKILL).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let rails = b"{\"schema\":\"ic-bench.rails-agent/v1\",\"get\":\"rails\"}\n".to_vec();
    refused(rails, AgentErrorKind::RankExited);

    // Ctrl-C: every rank goes with serve, which exits 130.
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(serve_pid as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(s) = serve.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "serve did not exit on SIGINT");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(status.code(), Some(130), "{status:?} (signal {:?})", status.signal());
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(ic_bench_on_a(&fabric), Vec::<String>::new(), "ranks left behind");
    fabric.teardown().unwrap();
}

#[test]
fn a_slow_rail_between_two_hosts_is_named() {
    let Some(_one) = privileged("a_slow_rail_between_two_hosts_is_named") else {
        return;
    };
    let fabric = fabric();
    fabric.limit_rail("a", 1, "200mbit").unwrap();
    let (mut serve, agent) = start_serve(&fabric);
    let (code, report, stderr) = connect(&fabric, &agent, &[]);
    let _ = serve.kill();
    let _ = serve.wait();
    assert_eq!(code, 1, "stderr:\n{stderr}");
    let report = report.expect("a report");
    let rails = report.rails.expect("a rails section");
    assert_eq!(rails.rails[1].status, VerdictStatus::Fail, "{:?}", rails.rails[1]);
    assert!(rails.rails[1].alone.is_some(), "the slow rail ran alone too");
    for i in [0, 2] {
        assert_ne!(rails.rails[i].status, VerdictStatus::Fail, "{:?}", rails.rails[i]);
    }
    assert!(
        report.verdict.reason.starts_with("rail 1: "),
        "{}",
        report.verdict.reason
    );
    fabric.teardown().unwrap();
}

#[test]
fn bad_rails_flags_are_one_line_and_exit_2() {
    let cases: [&[&str]; 5] = [
        &["serve", "--rails", "gpu0"],
        &["serve", "--rails", "auto", "--once"],
        &["serve", "--rails", "3"],
        &["connect", "127.0.0.1:1", "--rail-pattern", "cross"],
        &["connect", "127.0.0.1:1", "--rails", "gpu0=mlx5_0,gpu0=mlx5_1"],
    ];
    for args in cases {
        let out = Command::new(BIN).args(args).stdin(Stdio::null()).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.starts_with("ic-bench: error: "), "{args:?}: {stderr}");
        assert!(out.stdout.is_empty(), "{args:?}");
    }
}

/// Each emulated rail is its own switch (rail-optimized): in the cross pattern only rail i ↔ rail i
/// is reachable. That every such row reaches its own decode rank, in whichever round, shows the
/// rows find the right rank; the others fail as unreachable.
#[test]
fn the_cross_pattern_finds_each_rows_decode_rank() {
    let Some(_one) = privileged("the_cross_pattern_finds_each_rows_decode_rank") else {
        return;
    };
    let fabric = fabric();
    let (mut serve, agent) = start_serve(&fabric);
    let (code, report, stderr) = connect(&fabric, &agent, &["--rail-pattern", "cross"]);
    let _ = serve.kill();
    let _ = serve.wait();
    assert_eq!(code, 1, "stderr:\n{stderr}");
    let rails = report.expect("a report").rails.expect("a rails section");
    let mut pairs: Vec<(usize, usize)> = rails.rails.iter().map(|r| (r.prefill.rail, r.decode.rail)).collect();
    pairs.sort_unstable();
    let every: Vec<(usize, usize)> = (0..3).flat_map(|p| (0..3).map(move |d| (p, d))).collect();
    assert_eq!(pairs, every);
    for row in &rails.rails {
        let same = row.prefill.rail == row.decode.rail;
        assert_eq!(row.concurrent.app_bytes > 0, same, "{row:?}");
        if !same {
            assert_eq!(row.status, VerdictStatus::Fail, "{row:?}");
        }
    }
    fabric.teardown().unwrap();
}
