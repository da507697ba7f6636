//! `ic-bench gate --rails auto` on the emulated cluster (root): the pair step runs every rail of
//! the two nodes with the recipe's own transport env and `UCX_NET_DEVICES`. A recipe that sends
//! every rank through one NIC fails, measured: the counters show the other rails' bytes on that
//! NIC. Refusals are one line, exit 2.

use crate::pair_kube_support as support;

use icb_core::model::{GateReport, GateVerdict};
use icb_testcluster::ClusterConfig;
use std::process::{Command, Stdio};
use std::time::Duration;
use support::*;

const FIXTURES: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/gate");

fn gate(kubeconfig: &std::path::Path, recipe: &str, extra: &[&str]) -> (i32, String, String) {
    let mut cmd = Command::new(BIN);
    cmd.arg("gate")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .args(["--recipe", &format!("{FIXTURES}/{recipe}")])
        .args([
            "--allow-tcp",
            "--min-host-bw",
            "0.001",
            "--tests",
            "put_bw",
            "--sizes",
            "4MiB",
        ])
        .args(["--budget", "240s", "--no-node-probe", "-o", "json"])
        .args(extra)
        .env("IC_BENCH_LOG", "warn,kube_client=off,kube_runtime=off")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let out = wait_output(cmd.spawn().unwrap(), Duration::from_secs(300));
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn a_recipe_sending_every_rank_through_one_nic_fails_measured() {
    if !icb_isolate::privileged_tests_enabled("a_recipe_sending_every_rank_through_one_nic_fails_measured") {
        return;
    }
    let cluster = cluster_with(ClusterConfig::two_gpu_nodes().rails(3));
    let (code, stdout, stderr) = gate(
        cluster.kubeconfig_path(),
        "one_nic.yaml",
        &["--prefill", "node/gpu-1", "--decode", "node/gpu-2", "--rails", "auto"],
    );
    assert_eq!(code, 1, "stderr:\n{stderr}\nstdout:\n{stdout}");
    let report: GateReport = serde_json::from_str(&stdout).unwrap();
    assert_eq!(report.verdict, GateVerdict::Fail);
    let pair = report.pair.as_ref().expect("the rails pair ran");
    let rails = pair.rails.as_ref().expect("a rails section");
    assert_eq!(rails.rails.len(), 3);
    for row in &rails.rails {
        assert_eq!(
            row.prefill.ucx_net_devices, "rail0",
            "the recipe's value, for every rank"
        );
    }
    let wrong: Vec<_> = rails
        .findings
        .iter()
        .filter(|f| f.kind == icb_core::rails::RailFindingKind::WrongNic)
        .collect();
    assert!(
        wrong
            .iter()
            .any(|f| f.rail == Some(1) && f.text.contains("went through rail0")),
        "{:?}",
        rails.findings
    );
    assert!(
        pair.verdict.reason.contains("went through rail0"),
        "{}",
        pair.verdict.reason
    );
    assert!(cluster.pods().is_empty(), "the rails pods were removed");
}

#[test]
fn gate_rails_refusals_are_one_line() {
    // Refused before anything connects: no cluster is needed.
    let kubeconfig = std::path::Path::new("/nonexistent/kubeconfig");
    for (extra, want) in [
        (
            vec!["--prefill", "pod/a", "--decode", "node/b", "--rails", "auto"],
            "--rails gates whole nodes",
        ),
        (
            vec!["--prefill", "node/a", "--decode", "node/a", "--rails", "auto"],
            "two different nodes",
        ),
        (
            vec!["--prefill", "node/a", "--decode", "node/b", "--rails", "4"],
            "a gate takes --rails auto",
        ),
        (
            vec!["--prefill", "node/a", "--decode", "node/b", "--rails", "gpu0"],
            "--rails \"gpu0\"",
        ),
    ] {
        let (code, _, stderr) = gate(kubeconfig, "good.yaml", &extra);
        assert_eq!(code, 2, "{extra:?}: {stderr}");
        assert!(stderr.contains(want), "{extra:?}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{extra:?}: {stderr}");
    }
}
