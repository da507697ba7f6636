//! `--history`, `--baseline`, `--regression`, `--ack`, `--fail-on-regression` and `ic-bench
//! history` through the binary, on real local pairs: a run recorded, a slower run "pass,
//! regressed" (exit 0, or 1 with --fail-on-regression), an acknowledged one, and every bad input
//! one line and exit 2 (the run's own report still written where the run happened).

mod engine_support;

use engine_support::{command, run};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::time::Duration;

const LIMIT: Duration = Duration::from_secs(120);

/// A quick local pair: two cases (put_bw 1 MiB, tag_lat 8 B), host memory.
fn pair(extra: &[&str]) -> engine_support::Outcome {
    let quick = [
        "pair",
        "--local",
        "--tests",
        "put_bw,tag_lat",
        "--sizes",
        "8,1MiB",
        "--memory",
        "host-host",
        "--min-time",
        "0.01",
        "--max-time",
        "0.2",
        "--warmup",
        "1",
        "--min-iterations",
        "2",
    ];
    run(command(&[&quick[..], extra].concat(), &[]), LIMIT)
}

fn history(args: &[&str]) -> engine_support::Outcome {
    run(command(&[&["history"], args].concat(), &[]), Duration::from_secs(30))
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

/// The report at `path` with every bandwidth multiplied by `factor`: a baseline the next run
/// is far below.
fn inflated(report: &Path, factor: f64, out: PathBuf) -> PathBuf {
    let mut v: Value = json(&std::fs::read_to_string(report).unwrap());
    for c in v["cases"].as_array_mut().unwrap() {
        if let Some(bw) = c["measurement"]["bandwidth_bps"].as_f64() {
            c["measurement"]["bandwidth_bps"] = (bw * factor).into();
        }
    }
    std::fs::write(&out, v.to_string()).unwrap();
    out
}

fn bandwidth_check(report: &Value) -> &Value {
    report["baseline"]["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["metric"] == "bandwidth_bps" && c["test"] == "put_bw" && c["size"] == 1 << 20)
        .expect("the put_bw 1 MiB bandwidth check")
}

#[test]
fn a_pair_far_below_its_baseline_passes_but_is_regressed() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("history.db");
    let first = dir.path().join("first.json");
    let out = pair(&["-o", "json", "--output-file", s(&first), "--history", s(&db)]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        json(&std::fs::read_to_string(&first).unwrap())
            .get("baseline")
            .is_none()
    );

    // A baseline 100× faster than this machine: the run passes its floors and is regressed.
    let base = inflated(&first, 100.0, dir.path().join("fast.json"));
    let out = pair(&["-o", "json", "--history", s(&db), "--baseline", s(&base)]);
    assert_eq!(out.code, 0, "regressed is not failed: {}", out.stderr);
    let report = json(&out.stdout);
    assert_eq!(report["verdict"]["status"], "pass");
    let bw = bandwidth_check(&report);
    assert_eq!(bw["verdict"], "regressed", "{bw}");
    assert_eq!(bw["baseline_runs"], 1);
    assert!(bw["change"].as_f64().unwrap() < -0.9, "{bw}");
    let checks = report["baseline"]["checks"].as_array().unwrap();
    let regressed = checks.iter().filter(|c| c["verdict"] == "regressed").count();
    assert!(
        regressed >= 1 && report["baseline"]["regressed"] == regressed,
        "{}",
        report["baseline"]
    );

    let out = pair(&["--history", s(&db), "--baseline", s(&base), "--fail-on-regression"]);
    assert_eq!(out.code, 1, "--fail-on-regression: {}", out.stderr);
    assert!(out.stdout.contains("regressed"), "the table says so: {}", out.stdout);

    // Acknowledged: reported, exit 0 even with --fail-on-regression.
    let host = report["placement"]["prefill"]["host"].as_str().unwrap().to_string();
    let ack = dir.path().join("ack.yaml");
    std::fs::write(
        &ack,
        // Latency too: on a loaded machine a small message's p50 moves by any amount.
        format!(
            "acks:\n  - pair: [{host}, {host}]\n    metric: bandwidth\n    reason: known slow VM\n    expires: 2099-12-31\n  - pair: [{host}, {host}]\n    metric: latency\n    reason: shared CPU\n    expires: 2099-12-31\n"
        ),
    )
    .unwrap();
    let out = pair(&[
        "-o",
        "json",
        "--baseline",
        s(&base),
        "--ack",
        s(&ack),
        "--fail-on-regression",
    ]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert_eq!(bandwidth_check(&json(&out.stdout))["verdict"], "acknowledged");

    // The history: three recorded runs, a pair trend, a comparison, as tables and JSON.
    let list = history(&["list", "--history", s(&db), "-o", "json"]);
    assert_eq!(list.code, 0, "{}", list.stderr);
    let runs = json(&list.stdout);
    assert_eq!(runs.as_array().unwrap().len(), 3, "{runs}");
    let table = history(&["list", "--history", s(&db)]);
    assert!(
        table.stdout.lines().all(|l| l.chars().count() <= 100),
        "{}",
        table.stdout
    );
    let show = history(&["show", "pair", &host, &host, "--history", s(&db)]);
    assert_eq!(show.code, 0, "{}", show.stderr);
    assert!(show.stdout.contains("put_bw host-host 1 MiB"), "{}", show.stdout);
    assert!(show.stdout.lines().all(|l| l.chars().count() <= 100), "{}", show.stdout);
    let node = history(&["show", &format!("node/{host}"), "--history", s(&db), "-o", "json"]);
    assert_eq!(json(&node.stdout).as_array().unwrap().len(), 3, "{}", node.stdout);
    let (a, b) = (runs[2]["run_id"].as_str().unwrap(), runs[0]["run_id"].as_str().unwrap());
    let cmp = history(&["compare", a, b, "--history", s(&db), "-o", "json"]);
    assert_eq!(cmp.code, 0, "{}", cmp.stderr);
    assert_eq!(
        json(&cmp.stdout).as_array().unwrap().len(),
        checks.len(),
        "one row per case figure"
    );
}

#[test]
fn import_loads_reports_and_a_missing_history_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("h.db");
    let out = history(&["list", "--history", s(&db)]);
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("no such file"), "{}", out.stderr);
    assert!(!db.exists(), "list never creates a history");
    let fixture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/crates/core/tests/fixtures/pair_report.json"
    );
    let out = history(&["import", fixture, "--history", s(&db)]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    assert!(
        out.stdout
            .contains("pair pair-2026-11-24T05:28:00.627565704Z-vm-vm (2 figures)"),
        "{}",
        out.stdout
    );
    let out = history(&["import", s(&db), "--history", s(&db)]);
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("not a JSON results file"), "{}", out.stderr);
}

/// One line on stderr, exit 2.
fn refused(out: &engine_support::Outcome, says: &str) {
    assert_eq!(out.code, 2, "{}", out.stderr);
    let lines: Vec<&str> = out
        .stderr
        .lines()
        .filter(|l| l.starts_with("ic-bench: error:"))
        .collect();
    assert_eq!(lines.len(), 1, "{}", out.stderr);
    assert!(lines[0].contains(says), "expected '{says}': {}", out.stderr);
}

#[test]
fn bad_history_input_is_one_line_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let not_db = dir.path().join("notes.txt");
    std::fs::write(&not_db, "shopping list ".repeat(200)).unwrap();
    refused(&pair(&["--history", s(&not_db)]), "not an ic-bench history database");

    let newer = dir.path().join("newer.db");
    let fixture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/crates/core/tests/fixtures/pair_report.json"
    );
    assert_eq!(history(&["import", fixture, "--history", s(&newer)]).code, 0);
    let conn = rusqlite::Connection::open(&newer).unwrap();
    conn.execute("INSERT INTO schema_version VALUES (99, 'later')", [])
        .unwrap();
    drop(conn);
    refused(&pair(&["--history", s(&newer)]), "schema version 99 is newer");
    refused(
        &history(&["list", "--history", s(&newer)]),
        "schema version 99 is newer",
    );

    let ro = dir.path().join("ro.db");
    assert_eq!(history(&["import", fixture, "--history", s(&ro)]).code, 0);
    std::fs::set_permissions(&ro, std::os::unix::fs::PermissionsExt::from_mode(0o444)).unwrap();
    refused(&pair(&["--history", s(&ro)]), "read-only");

    let ack = dir.path().join("ack.yaml");
    std::fs::write(&ack, "acks:\n  - pair: [a, b]\n    metric: speed\n").unwrap();
    refused(&pair(&["--baseline", fixture, "--ack", s(&ack)]), "--ack");
    refused(&pair(&["--fail-on-regression"]), "add --baseline");
    refused(&pair(&["--baseline", "last:3"]), "add --history FILE");
    refused(&pair(&["--regression", "fast"]), "not a percentage");
}

#[test]
fn a_history_locked_beyond_its_deadline_still_gets_the_report_written() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("locked.db");
    let fixture = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/crates/core/tests/fixtures/pair_report.json"
    );
    assert_eq!(history(&["import", fixture, "--history", s(&db)]).code, 0);
    let holder = rusqlite::Connection::open(&db).unwrap();
    holder.execute_batch("BEGIN IMMEDIATE").unwrap();
    let report = dir.path().join("report.json");
    let out = pair(&[
        "-o",
        "json",
        "--output-file",
        s(&report),
        "--history",
        s(&db),
        "--history-timeout",
        "0.5s",
    ]);
    holder.execute_batch("ROLLBACK").unwrap();
    refused(&out, "still locked by another writer");
    let written = json(&std::fs::read_to_string(&report).unwrap());
    assert_eq!(written["verdict"]["status"], "pass", "the run's report is written");
}

#[test]
fn an_unreachable_pushgateway_warns_and_fails_only_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    // A port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url = format!("http://127.0.0.1:{port}");
    let report = dir.path().join("report.json");
    let out = pair(&["-o", "json", "--output-file", s(&report), "--push-gateway", &url]);
    assert_eq!(out.code, 0, "the run's own exit code: {}", out.stderr);
    assert!(
        out.stderr.contains("warning: --push-gateway") && out.stderr.contains("unreachable"),
        "{}",
        out.stderr
    );
    assert_eq!(
        json(&std::fs::read_to_string(&report).unwrap())["verdict"]["status"],
        "pass"
    );
    std::fs::remove_file(&report).unwrap();
    let out = pair(&[
        "-o",
        "json",
        "--output-file",
        s(&report),
        "--push-gateway",
        &url,
        "--fail-on-push-error",
    ]);
    refused(&out, "unreachable");
    assert!(report.exists(), "the report is written before the push fails the run");
    refused(&pair(&["--push-gateway", "https://pg:9091"]), "give an http:// URL");
}
