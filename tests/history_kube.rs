//! The nightly memory on Kubernetes (issue 36): `pair`, `gate` and `sweep` on the emulated
//! cluster each form a baseline over two healthy nights, and `--fail-on-regression` fails the
//! third night, run with one node throttled, although its fabric verdict still passes (the floor
//! is low on purpose: only the history can catch it). Each night is recorded as it ended.
//!
//! Before the fix every Kubernetes night started a new baseline: the history key hashed the
//! prefill pod's `IC_BENCH_SERVER` (the decode pod's address and random port). The throttle is
//! both ways (`TestCluster::rate_limit_node`): put toward the slow node regresses too.

#[path = "pair_kube_support/mod.rs"]
mod support;

use serde_json::Value;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;
use support::*;

const LIMIT: Duration = Duration::from_secs(240);
const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/gate");

/// Short get/put cases at 1 MiB over the emulated TCP fabric, a floor nothing fails.
const NIGHT: &[&str] = &[
    "--tests",
    "put_bw,get_bw",
    "--sizes",
    "1MiB",
    "--allow-tcp",
    "--min-host-bw",
    "0.001",
];

/// The decode node's link for the third night: far below the healthy nights, far above the floor.
const THROTTLE: &str = "100mbit";

/// `ic-bench <args>` against `cluster` within [`LIMIT`]: (exit code, stdout, stderr).
fn ic_bench(cluster: &icb_testcluster::TestCluster, args: &[&str]) -> (i32, String, String) {
    let mut cmd = Command::new(BIN);
    cmd.args(args)
        .arg("--kubeconfig")
        .arg(cluster.kubeconfig_path())
        .env("IC_BENCH_LOG", "warn,kube_client=off,kube_runtime=off")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let out = wait_output(cmd.spawn().expect("ic-bench starts"), LIMIT);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn history_args(h: &Path, fail: bool) -> Vec<String> {
    let mut a = vec![
        "--history".to_string(),
        h.display().to_string(),
        "--baseline".into(),
        "last:5".into(),
    ];
    if fail {
        a.push("--fail-on-regression".into());
    }
    a
}

fn json(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or_else(|e| panic!("not JSON ({e}): {text}"))
}

/// `(kind, verdict)` of every recorded run, oldest first.
fn recorded(h: &Path) -> Vec<(String, String)> {
    let out = Command::new(BIN)
        .args(["history", "list", "-o", "json", "--history"])
        .arg(h)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let runs = json(&String::from_utf8_lossy(&out.stdout));
    let mut runs: Vec<(String, String)> = runs
        .as_array()
        .unwrap_or_else(|| panic!("a list of runs: {runs}"))
        .iter()
        .map(|r| {
            (
                r["kind"].as_str().unwrap().into(),
                r["verdict"].as_str().unwrap().into(),
            )
        })
        .collect();
    runs.reverse();
    runs
}

/// Night 1 starts every case's baseline; night 2 compares with it (no case is a new baseline:
/// the key did not change) and is no regression gate.
fn two_healthy_nights(baseline_of: impl Fn(usize) -> Value) {
    let first = baseline_of(1);
    let checks = first["checks"].as_array().unwrap().len();
    assert!(checks >= 2, "{first}");
    assert_eq!(first["new_baselines"], checks, "{first}");
    let second = baseline_of(2);
    assert_eq!(
        second["new_baselines"], 0,
        "night 2 has night 1 as its baseline: {second}"
    );
    for c in second["checks"].as_array().unwrap() {
        assert_eq!(c["baseline_runs"], 1, "{c}");
        assert!(!c["key_changed"].as_bool().unwrap_or(false), "{c}");
    }
}

/// The third night's baseline: both directions regressed against the two nights before (the
/// throttle slows the node's link both ways: put toward it as much as get from it).
fn assert_regressed(baseline: &Value) {
    assert!(baseline["regressed"].as_u64().unwrap() >= 2, "{baseline}");
    let checks = baseline["checks"].as_array().unwrap();
    for test in ["put_bw", "get_bw"] {
        let check = checks
            .iter()
            .find(|c| c["test"] == test && c["metric"] == "bandwidth_bps")
            .unwrap_or_else(|| panic!("no {test} check: {baseline}"));
        assert_eq!(check["verdict"], "regressed", "{check}");
        assert_eq!(check["baseline_runs"], 2, "{check}");
    }
}

#[test]
fn kubernetes_pair_forms_a_baseline_and_fails_the_throttled_night() {
    let Some(cluster) = cluster("history_kube_pair") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let h = dir.path().join("history.db");
    let night = |fail: bool| {
        let mut args: Vec<String> = [
            "pair",
            "--prefill",
            "node/gpu-1",
            "--decode",
            "node/gpu-2",
            "-o",
            "json",
        ]
        .map(String::from)
        .to_vec();
        args.extend(NIGHT.iter().map(|s| s.to_string()));
        args.extend(["--max-time", "0.5"].map(String::from));
        args.extend(history_args(&h, fail));
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        ic_bench(&cluster, &refs)
    };
    two_healthy_nights(|n| {
        let (code, out, err) = night(false);
        assert_eq!(code, 0, "night {n}: {err}");
        json(&out)["baseline"].clone()
    });
    cluster.rate_limit_node("gpu-2", THROTTLE).unwrap();
    let (code, out, err) = night(true);
    let r = json(&out);
    assert_ne!(r["verdict"]["status"], "fail", "the floor passes it: {}", r["verdict"]);
    assert_eq!(code, 1, "--fail-on-regression: {err}");
    assert_regressed(&r["baseline"]);
    assert_eq!(recorded(&h).len(), 3);
    assert!(leftover_via_api(&cluster).is_empty());
}

#[test]
fn kubernetes_gate_forms_a_baseline_and_fails_the_throttled_night() {
    let Some(cluster) = cluster("history_kube_gate") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let h = dir.path().join("history.db");
    let recipe = format!("{FIXTURES}/good.yaml");
    let night = |fail: bool| {
        let mut args: Vec<String> = [
            "gate",
            "--recipe",
            &recipe,
            "--prefill",
            "node/gpu-1",
            "--decode",
            "node/gpu-2",
            "--no-node-probe",
            "-o",
            "json",
        ]
        .map(String::from)
        .to_vec();
        args.extend(NIGHT.iter().map(|s| s.to_string()));
        args.extend(history_args(&h, fail));
        let refs: Vec<&str> = args.iter().map(String::as_str).collect();
        ic_bench(&cluster, &refs)
    };
    two_healthy_nights(|n| {
        let (code, out, err) = night(false);
        assert_eq!(code, 0, "night {n}: {out}\n{err}");
        json(&out)["pair"]["baseline"].clone()
    });
    cluster.rate_limit_node("gpu-2", THROTTLE).unwrap();
    let (code, out, err) = night(true);
    let r = json(&out);
    assert_eq!(r["verdict"], "pass", "{}", r["reason"]);
    assert_eq!(code, 1, "--fail-on-regression: {err}");
    assert_regressed(&r["pair"]["baseline"]);
    let runs = recorded(&h);
    assert_eq!(runs.len(), 3, "{runs:?}");
    assert!(
        runs.iter().all(|(kind, verdict)| kind == "gate" && verdict == "pass"),
        "{runs:?}"
    );
    assert!(leftover_via_api(&cluster).is_empty());
}

/// Two nodes, one pair a night: its rows and both nodes' medians form the baseline; the third
/// night passes the floor on its own (the pair is the only evidence), the history fails it; a
/// fourth night stopped by Ctrl-C is recorded `interrupted` (it was not recorded at all).
#[test]
fn kubernetes_sweep_forms_a_baseline_and_fails_the_throttled_night() {
    if !icb_isolate::privileged_tests_enabled("history_kube_sweep") {
        return;
    }
    let cluster = cluster_with(
        icb_testcluster::ClusterConfig::new()
            .node(icb_testcluster::NodeConfig::new("node-1"))
            .node(icb_testcluster::NodeConfig::new("node-2")),
    );
    let dir = tempfile::tempdir().unwrap();
    let h = dir.path().join("history.db");
    let night = |n: usize, fail: bool| {
        let results = dir.path().join(format!("night{n}.json"));
        let mut extra = vec!["--results".to_string(), results.display().to_string()];
        extra.extend(history_args(&h, fail));
        let refs: Vec<&str> = extra.iter().map(String::as_str).collect();
        let (code, out, err) = run_sweep(&cluster, &refs, LIMIT);
        (code, out, err, json(&std::fs::read_to_string(&results).unwrap()))
    };
    two_healthy_nights(|n| {
        let (code, out, err, r) = night(n, false);
        assert_eq!(code, 0, "night {n}: {out}\n{err}");
        r["baseline"].clone()
    });
    cluster.rate_limit_node("node-2", THROTTLE).unwrap();
    let (code, out, err, r) = night(3, true);
    assert!(out.contains("PASS"), "the floor passes it: {out}");
    assert_eq!(code, 1, "--fail-on-regression: {out}\n{err}");
    assert_regressed(&r["baseline"]);
    let child = sweep_command(&cluster, &["--history", h.to_str().unwrap()])
        .current_dir(dir.path())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    while leftover_via_api(&cluster).is_empty() {
        assert!(std::time::Instant::now() < deadline, "night 4 never started a pod");
        std::thread::sleep(Duration::from_millis(50));
    }
    let stderr = ctrl_c(child);
    let runs = recorded(&h);
    assert_eq!(runs.len(), 4, "{runs:?}\n{stderr}");
    assert!(runs.iter().all(|(kind, _)| kind == "sweep"), "{runs:?}");
    assert_eq!(runs[3].1, "interrupted", "{runs:?}");
    assert!(leftover_via_api(&cluster).is_empty());
}
