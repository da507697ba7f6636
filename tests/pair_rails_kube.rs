//! `ic-bench pair --prefill node/A --decode node/B --rails auto` on the emulated cluster (root:
//! namespaces; CI runs as root): every node has K rail NICs, each with its own switch; one bench
//! pod per node holds all of its devices and every rank is exec'd into it; the counters are the
//! nodes' own `/sys/class/net/rail{k}/statistics`. Each test names exactly the rail it broke.

mod rails_support;
#[path = "pair_kube_support/mod.rs"]
mod support;

use icb_core::rails::{RailFindingKind, RailsOutcome};
use icb_core::{PairReport, VerdictStatus};
use icb_testcluster::{ClusterConfig, TestCluster};
use rails_support::{
    HealthFaults, RAIL_CASE, TWO_TIMED_CASES, assert_counted_on_its_own_nic, assert_health_findings,
    assert_partial_rails_report, interrupt_once_every_rail_measured,
};
use std::sync::Mutex;
use std::time::{Duration, Instant};
use support::*;

const LIMIT: Duration = Duration::from_secs(240);

/// One rails run at a time: their bandwidths are compared, and the machine has two cores.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

fn rails_cluster(test: &str, config: ClusterConfig) -> Option<TestCluster> {
    if !icb_isolate::privileged_tests_enabled(test) {
        return None;
    }
    Some(cluster_with(config))
}

/// `pair --rails auto` from gpu-1 to gpu-2 with one bandwidth case per rail ([`RAIL_CASE`]).
fn rails_run(cluster: &TestCluster, extra: &[&str]) -> PairRun {
    let mut args = vec!["--prefill", "node/gpu-1", "--decode", "node/gpu-2", "--rails", "auto"];
    args.extend(RAIL_CASE);
    args.extend(extra);
    run_pair(cluster, &args, LIMIT)
}

fn report(run: &PairRun) -> PairReport {
    serde_json::from_str(&run.stdout).unwrap_or_else(|e| panic!("no JSON report ({e}): {run:#?}"))
}

/// Asserts the run exited with `code`; its report and the report's rails section.
fn rails_after(run: &PairRun, code: i32) -> (PairReport, RailsOutcome) {
    assert_eq!(run.code, code, "stderr:\n{}", run.stderr);
    let report = report(run);
    let rails = *report.rails.clone().expect("a rails section");
    (report, rails)
}

/// Asserts the run was refused before any pod ran: exit 2, one line on stderr saying `want`.
fn assert_refused(cluster: &TestCluster, run: &PairRun, want: &str) {
    assert_eq!(run.code, 2, "{}", run.stderr);
    assert_eq!(run.stderr.trim().lines().count(), 1, "{}", run.stderr);
    assert!(run.stderr.contains(want), "{}", run.stderr);
    assert!(cluster.pods().is_empty());
}

/// Nothing of the run is left: no pod, and (within a few seconds) no rank in any node.
fn assert_nothing_left(cluster: &TestCluster) {
    assert!(cluster.pods().is_empty(), "pods left: {:?}", cluster.pods().len());
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let ranks = ranks_in(cluster, "serve").len() + ranks_in(cluster, "connect").len();
        if ranks == 0 {
            return;
        }
        assert!(Instant::now() < deadline, "{ranks} rank(s) still run");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The pids of ic-bench ranks (`serve`/`connect`) in the cluster's node namespaces.
fn ranks_in(cluster: &TestCluster, verb: &str) -> Vec<u32> {
    let mut pids = Vec::new();
    for ns in cluster.netns_names() {
        let Ok(out) = std::process::Command::new("ip").args(["netns", "pids", &ns]).output() else {
            continue;
        };
        for pid in String::from_utf8_lossy(&out.stdout).split_whitespace() {
            let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
                continue;
            };
            let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
            let is_rank = args.iter().any(|a| a.ends_with(b"ic-bench")) && args.contains(&verb.as_bytes());
            if is_rank && let Ok(p) = pid.parse() {
                pids.push(p);
            }
        }
    }
    pids
}

#[test]
fn four_rails_on_kubernetes_pass_each_counted_on_its_own_nic() {
    let Some(cluster) = rails_cluster(
        "four_rails_on_kubernetes_pass_each_counted_on_its_own_nic",
        ClusterConfig::two_gpu_nodes().rails(4),
    ) else {
        return;
    };
    let _one = serial();
    let run = rails_run(&cluster, &["--rail-margin", "60%"]);
    let (r, rails) = rails_after(&run, 0);
    assert_eq!(rails.rails.len(), 4);
    for row in &rails.rails {
        assert_counted_on_its_own_nic(row);
        assert_eq!(row.prefill.node, "gpu-1");
        assert_eq!(row.decode.node, "gpu-2");
        assert_eq!(row.decode.ucx_net_devices, format!("rail{}", row.index));
        assert_eq!(row.prefill.nic.name, format!("mlx5_{}", row.index));
        assert_eq!(
            row.concurrent.data_path.as_deref(),
            Some(format!("tcp/rail{}", row.index).as_str())
        );
    }
    assert_eq!(r.placement.prefill.host, "gpu-1");
    assert!(r.placement.mode.contains("kubernetes"), "{}", r.placement.mode);
    // Two pods, each pinned to its node and holding all of its GPUs and RDMA devices.
    let pods = run.created_pods();
    assert_eq!(pods.len(), 2, "{pods:?}");
    for pod in &pods {
        let c = &pod.spec.as_ref().unwrap().containers[0];
        let requests = c.resources.as_ref().unwrap().requests.as_ref().unwrap();
        assert_eq!(requests["nvidia.com/gpu"].0, "8");
        assert_eq!(requests["rdma/ib"].0, "8");
        assert_eq!(c.command.as_ref().unwrap()[0], "sleep");
    }
    assert_nothing_left(&cluster);
}

/// DRA-only nodes (GPUs and NICs as ResourceSlices, no `nvidia.com/gpu`): each node's pod claims
/// every GPU and NIC of its node from a template named like it; nothing is left afterwards.
#[test]
fn rails_between_dra_only_nodes_claim_every_gpu_and_nic() {
    let config = ClusterConfig::new()
        .node(icb_testcluster::NodeConfig::dra_gpu("gpu-1", 2))
        .node(icb_testcluster::NodeConfig::dra_gpu("gpu-2", 2))
        .rails(2);
    let Some(cluster) = rails_cluster("rails_between_dra_only_nodes_claim_every_gpu_and_nic", config) else {
        return;
    };
    let _one = serial();
    let run = rails_run(&cluster, &["--rail-margin", "60%"]);
    let (_, rails) = rails_after(&run, 0);
    assert_eq!(rails.rails.len(), 2);
    let pods = run.created_pods();
    assert_eq!(pods.len(), 2);
    for pod in &pods {
        let spec = pod.spec.as_ref().unwrap();
        let claims = spec
            .resource_claims
            .as_ref()
            .expect("the pod claims its node's devices");
        assert_eq!(claims[0].resource_claim_template_name, pod.metadata.name);
        let limits = spec.containers[0]
            .resources
            .as_ref()
            .unwrap()
            .limits
            .clone()
            .unwrap_or_default();
        assert!(!limits.contains_key("nvidia.com/gpu"), "{limits:?}");
    }
    let allocations = cluster.dra_allocations();
    assert_eq!(allocations.len(), 2, "{allocations:#?}");
    for a in &allocations {
        assert_eq!(a.devices.len(), 4, "both GPUs and both NICs of {}: {a:?}", a.node);
    }
    assert!(cluster.resource_claims().is_empty(), "{:#?}", cluster.resource_claims());
    assert!(cluster.resource_claim_templates().is_empty());
    assert_nothing_left(&cluster);
}

#[test]
fn a_slow_rail_on_one_node_is_named() {
    let Some(cluster) = rails_cluster(
        "a_slow_rail_on_one_node_is_named",
        ClusterConfig::two_gpu_nodes().rails(3).slow_rail("gpu-1", 1, "200mbit"),
    ) else {
        return;
    };
    let _one = serial();
    let run = rails_run(&cluster, &[]);
    let (r, rails) = rails_after(&run, 1);
    assert_eq!(rails.rails[1].status, VerdictStatus::Fail);
    assert!(rails.rails[1].alone.is_some(), "the slow rail ran alone too");
    for i in [0, 2] {
        assert_ne!(rails.rails[i].status, VerdictStatus::Fail, "{:?}", rails.rails[i]);
    }
    let first = &rails.findings[0];
    assert_eq!(
        (first.kind, first.rail),
        (RailFindingKind::BelowMedian, Some(1)),
        "{:?}",
        rails.findings
    );
    let verdict = r.verdict;
    assert!(verdict.reason.starts_with("rail 1: gpu-1:mlx5_1"), "{}", verdict.reason);
    assert_nothing_left(&cluster);
}

#[test]
fn a_dead_rail_on_kubernetes_fails_naming_it() {
    let Some(cluster) = rails_cluster(
        "a_dead_rail_on_kubernetes_fails_naming_it",
        ClusterConfig::two_gpu_nodes().rails(3).dead_rail("gpu-2", 2),
    ) else {
        return;
    };
    let _one = serial();
    let run = rails_run(&cluster, &[]);
    let (r, rails) = rails_after(&run, 1);
    assert_eq!(rails.rails[2].status, VerdictStatus::Fail);
    assert!(rails.rails[2].concurrent.error.is_some());
    assert_eq!(rails.findings[0].kind, RailFindingKind::Failed);
    let reason = r.verdict.reason;
    assert!(reason.starts_with("rail 2: "), "{reason}");
    assert_ne!(rails.rails[0].status, VerdictStatus::Fail);
    assert_nothing_left(&cluster);
}

/// The "done when": gpu-1's rail 1 congested (a real shaper whose held packets its
/// emulated mlx5_1 port counts as CNP/ECN), gpu-2's rail 2 lossy (1 % of its packets really
/// dropped each way, counted as sequence errors); the counters are read in the bench pods
/// (`ic-bench rail-info --counters` over the node's tree), the emulated cluster bringing them up
/// to date at each exec as a NIC's are whenever read. Rails 0 and 3 stay healthy.
#[test]
fn a_congested_and_a_lossy_rail_on_kubernetes_are_named_by_their_nic_counters() {
    let config = ClusterConfig::two_gpu_nodes()
        .rails(4)
        .congested_rail("gpu-1", 1, "200mbit")
        .lossy_rail("gpu-2", 2, 10);
    let Some(cluster) = rails_cluster(
        "a_congested_and_a_lossy_rail_on_kubernetes_are_named_by_their_nic_counters",
        config,
    ) else {
        return;
    };
    let _one = serial();
    let run = rails_run(&cluster, &["--rail-margin", "50%"]);
    let (report, rails) = rails_after(&run, 1);
    let expected = HealthFaults {
        congested: (1, "prefill"),
        lossy: 2,
        healthy: &[0, 3],
    };
    assert_health_findings(&report, &rails, &expected);
    assert_nothing_left(&cluster);
}

/// The "done when": gpu-2's rail 1 at MTU 1280 (its veth and its tree's netdev `mtu`),
/// every other rail at 1500. The two ends are compared before the run (each node's readiness
/// from its bench pod's `rail-info`): rail 1 warns naming both values and the fix, rail 0 has
/// nothing to say, and the rails still run (TCP's MSS fits the smaller MTU).
#[test]
fn a_rail_whose_mtu_differs_between_the_nodes_is_named_with_both_values() {
    let config = ClusterConfig::two_gpu_nodes().rails(2).rail_mtu("gpu-2", 1, 1280);
    let Some(cluster) = rails_cluster(
        "a_rail_whose_mtu_differs_between_the_nodes_is_named_with_both_values",
        config,
    ) else {
        return;
    };
    let _one = serial();
    let run = rails_run(&cluster, &["--rail-margin", "60%"]);
    let (_, rails) = rails_after(&run, 0);
    let want = "prefill mlx5_1:1 netdev MTU 1500, decode mlx5_1:1 netdev MTU 1280";
    let odd = &rails.rails[1].mismatches;
    assert_eq!(odd.len(), 1, "{odd:?}");
    assert_eq!(odd[0].field, icb_core::readiness::ReadinessField::NetdevMtu);
    assert_eq!(odd[0].to_string(), want);
    assert!(rails.rails[0].mismatches.is_empty(), "{:?}", rails.rails[0].mismatches);
    let found: Vec<_> = rails
        .findings
        .iter()
        .filter(|f| f.kind == RailFindingKind::Mismatch)
        .collect();
    assert_eq!(found.len(), 1, "{:?}", rails.findings);
    assert_eq!((found[0].rail, found[0].status), (Some(1), icb_core::Status::Warn));
    assert!(
        found[0].text.starts_with("rail 1: ") && found[0].text.ends_with(want),
        "{}",
        found[0].text
    );
    assert!(
        found[0].fix.as_deref().unwrap_or_default().contains("one MTU"),
        "{:?}",
        found[0].fix
    );
    assert_eq!(rails.rails[1].status, VerdictStatus::Warn);
    assert_nothing_left(&cluster);
}

/// Ctrl-C once every rail measured its first case: exit 130, no pod and no rank left, and the
/// partial report (every rail's finished case, marked interrupted) in `--output-file`.
#[test]
fn ctrl_c_during_a_kubernetes_rails_run_reports_what_was_measured_and_leaves_no_pod_and_no_rank() {
    let Some(cluster) = rails_cluster(
        "ctrl_c_during_a_kubernetes_rails_run_leaves_no_pod_and_no_rank",
        ClusterConfig::two_gpu_nodes().rails(3),
    ) else {
        return;
    };
    let _one = serial();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("report.json");
    let file_arg = file.display().to_string();
    let mut args = vec![
        "--prefill",
        "node/gpu-1",
        "--decode",
        "node/gpu-2",
        "--rails",
        "auto",
        "-o",
        "json",
        "--output-file",
        &file_arg,
    ];
    args.extend(TWO_TIMED_CASES);
    let (_, stderr) = interrupt_once_every_rail_measured(pair_command(&cluster, &args), 3, dir.path(), |pid| pid);
    let report = assert_partial_rails_report(&file, 3);
    let line = stderr.lines().rev().find(|l| !l.is_empty()).unwrap_or_default();
    assert!(
        line.contains(&format!(
            "wrote the {} of 6 cases measured before it (marked partial)",
            report.cases.len()
        )),
        "{stderr}"
    );
    assert!(line.contains("deleted 2 ic-bench pod(s)"), "{stderr}");
    assert_nothing_left(&cluster);
}

#[test]
fn unknown_gpus_and_nodes_without_rails_are_refused_in_one_line() {
    // Refused before anything is created: no root, no cluster needed.
    for (args, want) in [
        (
            vec!["--prefill", "node/a", "--decode", "node/b", "--rails", "4"],
            "use it with --local --isolation node",
        ),
        (
            vec!["--prefill", "pod/a", "--decode", "node/b", "--rails", "auto"],
            "give --prefill node/NAME --decode node/NAME",
        ),
        (
            vec!["--prefill", "node/a", "--decode", "node/a", "--rails", "auto"],
            "give two different nodes",
        ),
        (
            vec![
                "--prefill",
                "node/a",
                "--decode",
                "node/b",
                "--rails",
                "auto",
                "--gpus",
                "1",
            ],
            "--gpus/--rdma/--resource does not apply to --rails",
        ),
    ] {
        let mut all = vec!["pair"];
        all.extend(&args);
        let out = std::process::Command::new(BIN).args(&all).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert_eq!(stderr.trim().lines().count(), 1, "{args:?}: {stderr}");
        assert!(stderr.contains(want), "{args:?}: {stderr}");
    }
    // Refused once the nodes' rails are known (the pods are gone again).
    let Some(cluster) = rails_cluster(
        "unknown_gpus_and_nodes_without_rails_are_refused_in_one_line",
        ClusterConfig::two_gpu_nodes().rails(2),
    ) else {
        return;
    };
    let run = run_pair(
        &cluster,
        &[
            "--prefill",
            "node/gpu-1",
            "--decode",
            "node/gpu-2",
            "--rails",
            "gpu0=mlx5_0",
        ],
        LIMIT,
    );
    assert_refused(&cluster, &run, "gpu-1 has no GPU gpu0 (it has none)");
    let run = run_pair(
        &cluster,
        &["--prefill", "node/gpu-9", "--decode", "node/gpu-2", "--rails", "auto"],
        LIMIT,
    );
    assert_refused(&cluster, &run, "there is no node gpu-9");
    drop(cluster);
    let Some(plain) = rails_cluster(
        "unknown_gpus_and_nodes_without_rails_are_refused_in_one_line",
        ClusterConfig::two_gpu_nodes(),
    ) else {
        return;
    };
    let run = run_pair(
        &plain,
        &["--prefill", "node/gpu-1", "--decode", "node/gpu-2", "--rails", "auto"],
        LIMIT,
    );
    assert_refused(&plain, &run, "the rail map of gpu-1 has no usable NIC");
}
