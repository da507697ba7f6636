//! `ic-bench gate` on the emulated cluster: a good recipe passes; a recipe whose env forces TCP
//! fails naming the probe finding and the measured data path together; a budget too small for
//! the run exits 2 naming what still ran. The emulated fabric is TCP over veths: the pair is
//! asked to allow TCP, so only the recipe decides good from bad.

#[path = "pair_kube_support/mod.rs"]
mod support;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::*;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/gate");

fn gate(cluster: &icb_testcluster::TestCluster, recipe: &str, extra: &[&str]) -> (i32, String, String, Duration) {
    let started = Instant::now();
    let mut cmd = Command::new(BIN);
    cmd.arg("gate")
        .arg("--kubeconfig")
        .arg(cluster.kubeconfig_path())
        .args(["--recipe", &format!("{FIXTURES}/{recipe}")])
        .args(["--prefill", "node/gpu-1", "--decode", "node/gpu-2"])
        .args(["--allow-tcp", "--min-host-bw", "0.001", "--sizes", "1MiB", "-o", "json"])
        .args(extra)
        .env("IC_BENCH_LOG", "warn,kube_client=off,kube_runtime=off")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let out = wait_output(cmd.spawn().unwrap(), Duration::from_secs(180));
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
        started.elapsed(),
    )
}

#[test]
fn good_recipe_passes_tcp_recipe_fails_with_both_findings_and_budget_is_enforced() {
    let Some(cluster) = cluster("gate") else {
        return;
    };
    // The emulated nodes truthfully have no RDMA device, which `probe node` reports: the good
    // case skips the node probes; the TCP case keeps them.
    let (code, out, err, wall) = gate(&cluster, "good.yaml", &["--no-node-probe"]);
    assert_eq!(code, 0, "{out}\n{err}");
    let r: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(r["verdict"], "pass");
    eprintln!(
        "gate (good recipe) wall {:.1}s, steps {}",
        wall.as_secs_f64(),
        r["steps"]
    );
    assert_ne!(r["pair"]["verdict"]["status"], "fail", "{}", r["pair"]["verdict"]);
    assert!(leftover_via_api(&cluster).is_empty());

    let (code, out, err, _) = gate(&cluster, "tcp.yaml", &[]);
    assert_eq!(code, 1, "{out}\n{err}");
    let r: serde_json::Value = serde_json::from_str(&out).unwrap();
    let reason = r["reason"].as_str().unwrap();
    assert!(reason.contains("env.ucx_tls.tcp_only"), "{reason}");
    assert!(reason.contains("measured data paths: tcp"), "{reason}");
    assert!(leftover_via_api(&cluster).is_empty());

    let (code, _, err, wall) = gate(
        &cluster,
        "good.yaml",
        &[
            "--budget",
            "2s",
            "--tests",
            "put_bw,get_bw,tag_lat,tag_bw",
            "--sizes",
            "8,64KiB,1MiB,4MiB",
        ],
    );
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("over the --budget of 2s"), "{err}");
    assert!(wall < Duration::from_secs(40), "bounded: {wall:?}");
    assert!(leftover_via_api(&cluster).is_empty());
}
