//! stdout is a contract: `serve` prints one listening line and `connect` one report, nothing
//! else, even when UCX logs (it writes its log lines to stdout). Orchestrators parse these.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::time::Duration;

const BIN: &str = env!("CARGO_BIN_EXE_ic-bench");

#[test]
fn ucx_log_lines_never_reach_stdout() {
    // An unknown UCX_* variable makes every UCX context print a warning.
    let mut serve = Command::new(BIN)
        .args(["serve", "--listen", "127.0.0.1:0", "--once", "--idle-timeout", "60s"])
        .env("UCX_IC_BENCH_TEST_UNKNOWN", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start serve");
    let mut lines = BufReader::new(serve.stdout.take().expect("piped")).lines();
    let first = lines.next().expect("a listening line").expect("utf-8");
    let event: serde_json::Value = serde_json::from_str(&first).expect("the first stdout line is JSON");
    assert_eq!(event["event"], "listening");
    let address = event["address"].as_str().expect("an address").to_string();

    let connect = Command::new(BIN)
        .args([
            "connect",
            &address,
            "-o",
            "json",
            "--tests",
            "tag_bw",
            "--sizes",
            "8",
            "--memory",
            "host-host",
        ])
        .args(["--min-time", "0.01", "--warmup", "2", "--min-iterations", "4"])
        .env("UCX_IC_BENCH_TEST_UNKNOWN", "1")
        .output()
        .expect("run connect");
    let stdout = String::from_utf8_lossy(&connect.stdout);
    let stderr = String::from_utf8_lossy(&connect.stderr);
    assert_eq!(connect.status.code(), Some(0), "{stderr}");
    let report: serde_json::Value = serde_json::from_str(&stdout).expect("stdout is exactly one JSON document");
    assert_eq!(report["schema"], "ic-bench.pair/v1");
    assert!(
        stderr.contains("UCX_IC_BENCH_TEST_UNKNOWN"),
        "UCX's warning went to stderr: {stderr}"
    );

    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while serve.try_wait().expect("poll serve").is_none() {
        assert!(std::time::Instant::now() < deadline, "serve --once did not exit");
        std::thread::sleep(Duration::from_millis(20));
    }
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    assert!(
        rest.is_empty(),
        "serve printed more than its listening line on stdout: {rest:?}"
    );
}
