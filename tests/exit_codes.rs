//! The README's exit-code contract, row by row, through the binary: each row's meanings are
//! produced for real (a real UCX pair, real fixtures, real signals) and must give that row's code.
//!
//! | 0 | pass (or warnings only); a probe with only ok/warn checks |
//! | 1 | the verdict failed; a probe check failed |
//! | 2 | usage or setup error: bad flags or input, UCX missing or too old, peer unreachable,
//! |   | Kubernetes errors; nothing measured (a requested memory type unavailable); --require-cuda
//! |   | without CUDA |
//! | 130 | interrupted by Ctrl-C or SIGTERM |

mod engine_support;

use engine_support::{Server, command, connect, run};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const QUICK: &[&str] = &[
    "--min-time",
    "0.01",
    "--max-time",
    "0.2",
    "--warmup",
    "1",
    "--min-iterations",
    "2",
];

fn node_fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/nodes")
        .join(name)
}

fn probe_node(name: &str, net_devices: &str) -> Command {
    let root = node_fixture(name);
    let mut cmd = command(&["probe", "node"], &[("UCX_NET_DEVICES", net_devices)]);
    cmd.arg("--sysfs-root")
        .arg(root.join("sys"))
        .arg("--devfs-root")
        .arg(root.join("dev"))
        .arg("--procfs-root")
        .arg(root.join("proc"))
        .arg("--tool-outputs")
        .arg(root.join("tools"));
    cmd
}

/// `connect` to a fresh `serve --once` with `args` (plus quick timings); the outcome.
fn pair(args: &[&str]) -> engine_support::Outcome {
    let server = Server::start(&[]);
    connect(&server.addr, &[QUICK, args].concat(), &[])
}

fn no_cuda_driver() -> bool {
    // The same answer the engine gets: without libcuda.so.1 every CUDA case is skipped.
    !["/usr/lib/x86_64-linux-gnu/libcuda.so.1", "/usr/lib64/libcuda.so.1"]
        .iter()
        .any(|p| std::path::Path::new(p).exists())
}

#[test]
fn row_0_pass_and_probe_ok() {
    let out = pair(&["--tests", "tag_bw", "--sizes", "64KiB", "--memory", "host-host"]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(out.report()["verdict"]["status"], "pass");

    let probe = run(probe_node("healthy_ib", "mlx5_0:1,mlx5_1:1"), Duration::from_secs(60));
    assert_eq!(probe.code, 0, "{}", probe.stderr);
}

#[test]
fn row_0_cuda_skipped_when_not_required_says_so_in_the_verdict() {
    if !no_cuda_driver() {
        eprintln!("a CUDA driver is present: the no-driver rows do not apply here");
        return;
    }
    // CUDA named in --memory is required by default (issue 35): --cuda-optional skips it.
    let out = pair(&[
        "--tests",
        "tag_bw",
        "--sizes",
        "8",
        "--memory",
        "host-host,cuda-cuda",
        "--cuda-optional",
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let reason = out.report()["verdict"]["reason"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(reason.contains("1 skipped: no CUDA driver"), "{reason}");
}

/// `--cuda-alloc` reaches the report's settings; without a driver every CUDA case still skips
/// with the typed "no CUDA driver" reason, and no case claims an allocation it never made.
#[test]
fn row_0_cuda_alloc_mode_is_recorded_and_skips_cleanly_without_a_driver() {
    if !no_cuda_driver() {
        eprintln!("a CUDA driver is present: the no-driver rows do not apply here");
        return;
    }
    let out = pair(&[
        "--tests",
        "tag_bw",
        "--sizes",
        "8",
        "--memory",
        "host-host,cuda-cuda",
        "--cuda-optional",
        "--cuda-alloc",
        "vmm",
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let report = out.report();
    assert_eq!(report["settings"]["cuda_alloc"], "vmm", "{report}");
    let cases = report["cases"].as_array().expect("cases");
    assert_eq!(cases.len(), 2, "{report}");
    for case in cases {
        assert!(
            case.get("cuda_alloc").is_none(),
            "nothing was allocated on a GPU: {case}"
        );
    }
    let skipped = cases.iter().find(|c| c["status"] == "skipped").expect("the CUDA case");
    assert!(
        skipped["reason"]
            .as_str()
            .unwrap_or_default()
            .contains("no CUDA driver"),
        "{skipped}"
    );
}

#[test]
fn row_1_verdict_failed_and_probe_check_failed() {
    // A floor no machine reaches: the fabric is "not what the placement should give".
    let out = pair(&[
        "--tests",
        "put_bw",
        "--sizes",
        "1MiB",
        "--memory",
        "host-host",
        "--min-host-bw",
        "100000",
    ]);
    assert_eq!(out.code, 1, "{}", out.stderr);
    assert_eq!(out.report()["verdict"]["status"], "fail");

    let probe = run(probe_node("down_port", "mlx5_1:1"), Duration::from_secs(60));
    assert_eq!(probe.code, 1, "{}", probe.stderr);
}

#[test]
fn row_2_usage_and_setup_errors() {
    let limit = Duration::from_secs(60);
    let closed_port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").to_string()
        // dropped: nothing listens there any more
    };
    // No subcommand: the help (on stdout, as a usage answer) and 2.
    assert_eq!(run(command(&[], &[]), limit).code, 2);
    let cases: Vec<(&str, Command)> = vec![
        ("a bad flag", command(&["pair", "--bogus"], &[])),
        ("a bad value", command(&["serve", "--idle-timeout", "soon"], &[])),
        (
            "UCX missing",
            command(
                &[
                    "serve",
                    "--listen",
                    "127.0.0.1:0",
                    "--once",
                    "--ucx-lib",
                    "/nonexistent",
                ],
                &[("IC_BENCH_UCX_LIB", "/nonexistent")],
            ),
        ),
        (
            "peer unreachable",
            command(&["connect", &closed_port, "--connect-timeout", "2s"], &[]),
        ),
        (
            "Kubernetes unreachable",
            command(
                &[
                    "pair",
                    "--prefill",
                    "node/a",
                    "--decode",
                    "node/b",
                    "--kubeconfig",
                    "/nonexistent/kubeconfig",
                ],
                &[],
            ),
        ),
        (
            "unsupported probe env input",
            command(&["probe", "env", "/nonexistent/recipe.yaml"], &[]),
        ),
    ];
    for (what, cmd) in cases {
        let out = run(cmd, limit);
        assert_eq!(out.code, 2, "{what}: stderr: {}", out.stderr);
        assert!(
            out.stderr.lines().any(|l| l.starts_with("ic-bench: error:")),
            "{what}: one error line expected, got: {}",
            out.stderr
        );
        assert!(!out.stderr.contains("panicked"), "{what}: {}", out.stderr);
    }
}

#[test]
fn row_2_nothing_measured_or_cuda_required_without_a_driver() {
    if !no_cuda_driver() {
        eprintln!("a CUDA driver is present: the no-driver rows do not apply here");
        return;
    }
    let out = pair(&[
        "--tests",
        "tag_bw",
        "--sizes",
        "8",
        "--memory",
        "cuda-cuda",
        "--cuda-optional",
    ]);
    assert_eq!(out.code, 2, "--memory cuda-cuda without a driver: {}", out.stderr);
    assert!(
        out.error_line().contains("nothing was measured: no CUDA driver"),
        "{}",
        out.stderr
    );
    // The report is still written, and says why: nothing measured is no verdict.
    assert_eq!(out.report()["verdict"]["status"], "inconclusive");

    // CUDA named in --memory is required unless --cuda-optional: a failure of the pair, exit 2.
    let out = pair(&["--tests", "tag_bw", "--sizes", "8", "--memory", "host-host,cuda-cuda"]);
    assert_eq!(out.code, 2, "named CUDA memory without a driver: {}", out.stderr);
    assert!(out.error_line().contains("CUDA memory was asked for"), "{}", out.stderr);
    assert_eq!(out.report()["verdict"]["status"], "fail");

    let out = pair(&[
        "--tests",
        "tag_bw",
        "--sizes",
        "8",
        "--memory",
        "host-host,cuda-cuda",
        "--require-cuda",
    ]);
    assert_eq!(out.code, 2, "--require-cuda without a driver: {}", out.stderr);
    assert!(out.error_line().contains("--require-cuda"), "{}", out.stderr);
}

/// Issue 35, item 5: a `connect` whose only case the server refused (above its `--max-buffer`)
/// measured nothing: exit 2, and the one line names the server's bound, not UCX's logs.
#[test]
fn row_2_a_case_the_server_refused_is_nothing_measured_naming_its_bound() {
    let server = Server::start_with(&["--once", "--idle-timeout", "60s", "--max-buffer", "1MiB"], &[]);
    let out = connect(
        &server.addr,
        &[
            QUICK,
            &["--tests", "put_bw", "--sizes", "4MiB", "--memory", "host-host"],
        ]
        .concat(),
        &[],
    );
    assert_eq!(out.code, 2, "nothing measured: {}", out.stderr);
    let line = out.error_line();
    assert!(
        line.contains("nothing was measured") && line.contains("--max-buffer"),
        "{line}"
    );
    let report = out.report();
    assert_eq!(report["verdict"]["status"], "inconclusive");
    assert!(
        report["verdict"]["hint"]
            .as_str()
            .unwrap_or_default()
            .contains("--max-buffer"),
        "the fix is the server's bound: {}",
        report["verdict"]
    );
}

#[test]
fn row_130_for_a_command_without_cleanup_too() {
    // `probe env -` waits on its stdin: a command that creates nothing and never claims the
    // signal handler still ends with 130 and the one line, not with the default 143.
    for (sig, name) in [(Signal::SIGTERM, "SIGTERM"), (Signal::SIGINT, "SIGINT (Ctrl-C)")] {
        let mut cmd = command(&["probe", "env", "-"], &[]);
        cmd.stdin(Stdio::piped()).stdout(Stdio::null()).stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn probe env");
        let stdin = child.stdin.take();
        std::thread::sleep(Duration::from_millis(1000));
        kill(Pid::from_raw(child.id() as i32), sig).expect("signal");
        let started = Instant::now();
        while child.try_wait().expect("try_wait").is_none() {
            if started.elapsed() > Duration::from_secs(10) {
                let _ = child.kill();
                panic!("probe env did not stop on {name}");
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        drop(stdin);
        let out = child.wait_with_output().expect("output");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(130), "{name}: {stderr}");
        assert_eq!(stderr.trim(), format!("ic-bench: interrupted by {name}: stopped"));
    }
}

#[test]
fn row_130_interrupted() {
    for (sig, name) in [(Signal::SIGINT, "SIGINT"), (Signal::SIGTERM, "SIGTERM")] {
        let mut cmd = command(&["serve", "--listen", "127.0.0.1:0"], &[]);
        cmd.stdout(Stdio::null()).stderr(Stdio::piped()).stdin(Stdio::null());
        let mut child = cmd.spawn().expect("spawn serve");
        std::thread::sleep(Duration::from_millis(1500));
        kill(Pid::from_raw(child.id() as i32), sig).expect("signal");
        let started = Instant::now();
        let status = loop {
            if let Some(s) = child.try_wait().expect("try_wait") {
                break s;
            }
            if started.elapsed() > Duration::from_secs(15) {
                let _ = child.kill();
                panic!("serve did not stop on {name}");
            }
            std::thread::sleep(Duration::from_millis(20));
        };
        assert_eq!(status.code(), Some(130), "{name}");
    }
}
