//! Least-privilege bench pods on the emulated cluster, whose API server enforces Pod Security
//! admission and ResourceQuota as a real one does: `pair` and `sweep` run in a namespace labelled
//! `pod-security.kubernetes.io/enforce=restricted` (with a quota, on tainted GPU nodes); RDMA bench
//! pods are refused there with one line naming the label and `--memlock-unlimited`, and admitted
//! with that flag; the probe pod needs `privileged` and says so; cordoned and NoExecute-tainted
//! nodes are never tolerated.

use crate::pair_kube_support as support;

use icb_testcluster::{ClusterConfig, Isolation, NodeConfig, TestCluster};
use std::time::Duration;
use support::*;

const ENFORCE: &str = "pod-security.kubernetes.io/enforce";
const LIMIT: Duration = Duration::from_secs(180);

/// `config` with its pods' namespace `bench` enforcing `level`.
fn enforcing(config: ClusterConfig, level: &str) -> ClusterConfig {
    config
        .default_namespace("bench")
        .namespace_labels("bench", &[(ENFORCE, level)])
}

fn pair_args<'a>(extra: &[&'a str]) -> Vec<&'a str> {
    let mut a = vec!["--prefill", "node/gpu-1", "--decode", "node/gpu-2", "-o", "json"];
    a.extend_from_slice(FAST);
    a.extend_from_slice(extra);
    a
}

/// Every created bench pod meets `restricted` by icb-pss and runs as the unprivileged user (the
/// emulated node agent applies the securityContext to the process: uid 65532, no capability,
/// no_new_privs; crates/testcluster/tests/security.rs), and UCX measured every case between them.
fn assert_restricted(run: &PairRun) {
    for case in run.report()["cases"].as_array().expect("cases") {
        assert_eq!(
            case["status"], "measured",
            "a UCX pair between two unprivileged pods: {case}"
        );
    }
    let pods = run.created_pods();
    assert_eq!(pods.len(), 2, "{run:#?}");
    for p in &pods {
        let spec = p.spec.as_ref().unwrap();
        assert_eq!(
            icb_pss::required_level(&p.metadata, spec),
            icb_pss::Level::Restricted,
            "{p:#?}"
        );
        let sc = spec.security_context.as_ref().unwrap();
        assert_eq!(sc.run_as_user, Some(65532));
        let res = spec.containers[0].resources.as_ref().unwrap();
        assert!(res.limits.as_ref().unwrap().contains_key("memory"), "{res:?}");
    }
}

#[test]
fn pair_runs_in_a_restricted_namespace_and_rdma_needs_memlock_unlimited_there() {
    if !icb_isolate::privileged_tests_enabled("pod_security_pair") {
        return;
    }
    let cluster = cluster_with(enforcing(ClusterConfig::two_gpu_nodes(), "restricted"));
    // The nodes advertise rdma/ib: by default the bench pods request it and add IPC_LOCK.
    let refused = run_pair(&cluster, &pair_args(&[]), LIMIT);
    assert_eq!(refused.code, 2, "{refused:#?}");
    let line = refused.last_err_line();
    assert!(
        line.contains(
            "namespace bench enforces Pod Security \"restricted\" (pod-security.kubernetes.io/enforce=restricted)"
        ) && line
            .contains("it needs \"privileged\": label the namespace pod-security.kubernetes.io/enforce=privileged")
            && line.contains("--memlock-unlimited"),
        "{line}"
    );
    assert!(leftover_bench_pods(&cluster).is_empty());

    let run = run_pair(&cluster, &pair_args(&["--memlock-unlimited"]), LIMIT);
    assert_eq!(run.report()["placement"]["mode"], "kubernetes", "{run:#?}");
    assert!(run.code == 0 || run.code == 1, "{run:#?}");
    assert_eq!(
        run.report()["cases"].as_array().unwrap().len(),
        4,
        "every case ran: {run:#?}"
    );
    assert_restricted(&run);
    assert!(leftover_bench_pods(&cluster).is_empty());

    let plain = run_pair(&cluster, &pair_args(&["--rdma", "none"]), LIMIT);
    assert_eq!(plain.report()["cases"].as_array().unwrap().len(), 4, "{plain:#?}");
    assert_restricted(&plain);
    assert!(leftover_bench_pods(&cluster).is_empty());
}

#[test]
fn sweep_runs_in_a_restricted_namespace_with_a_quota_on_tainted_gpu_nodes() {
    if !icb_isolate::privileged_tests_enabled("pod_security_sweep") {
        return;
    }
    let config = (1..=3).fold(ClusterConfig::new(), |c, i| {
        c.node(NodeConfig::gpu(format!("node-{i}"), 1).taint("nvidia.com/gpu", Some("present"), "NoSchedule"))
    });
    let config = enforcing(config, "restricted").resource_quota(
        "bench",
        "compute",
        &[
            ("limits.cpu", "8"),
            ("limits.memory", "8Gi"),
            ("requests.cpu", "8"),
            ("requests.memory", "8Gi"),
        ],
    );
    let cluster = cluster_with(config);
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("sweep.json");
    let (code, out, err) = run_sweep(
        &cluster,
        &["--gpus", "1", "--rdma", "none", "--results", results.to_str().unwrap()],
        Duration::from_secs(420),
    );
    // Bandwidth verdicts depend on how busy the machine is; admission is what this test is about.
    assert!(code == 0 || code == 1, "{out}\n{err}");
    let r: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&results).unwrap()).unwrap();
    let pairs: Vec<&serde_json::Value> = r["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["pass"] == 1)
        .collect();
    assert_eq!(pairs.len(), 3, "{r}");
    for p in pairs {
        assert_eq!(
            p["outcome"]["status"], "measured",
            "every pair admitted, placed and run: {p}"
        );
    }
    let created = created_pods(&cluster);
    assert!(
        created.len() >= 6,
        "one server and one client per pair (a second pass may rerun some)"
    );
    for p in &created {
        let spec = p.spec.as_ref().unwrap();
        assert_eq!(icb_pss::required_level(&p.metadata, spec), icb_pss::Level::Restricted);
        let keys: Vec<&str> = spec
            .tolerations
            .iter()
            .flatten()
            .map(|t| t.key.as_deref().unwrap_or(""))
            .collect();
        assert_eq!(keys, ["nvidia.com/gpu"], "only the node's own taint");
    }
    assert!(leftover_via_api(&cluster).is_empty());
}

#[test]
fn a_sweep_whose_rdma_pods_a_restricted_namespace_refuses_stops_with_one_line_and_blames_no_node() {
    let config = (1..=3).fold(ClusterConfig::new(), |c, i| {
        c.node(NodeConfig::gpu(format!("node-{i}"), 1))
    });
    let config = enforcing(config.program(BIN).isolation(Isolation::Host), "restricted");
    let cluster = TestCluster::start_blocking(config).expect("the emulated cluster starts");
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("sweep.json");
    let (code, _out, err) = run_sweep(&cluster, &["--results", results.to_str().unwrap()], LIMIT);
    assert_eq!(code, 2, "{err}");
    let line = err.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or_default();
    assert!(
        line.contains("blames no node")
            && line.contains("enforces Pod Security \"restricted\"")
            && line.contains("--memlock-unlimited"),
        "{line}"
    );
    let r: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&results).unwrap()).unwrap();
    assert!(
        r["node_verdicts"]
            .as_array()
            .into_iter()
            .flatten()
            .all(|v| v["status"] != "fail"),
        "{r}"
    );
    assert!(leftover_via_api(&cluster).is_empty());
}

#[test]
fn a_cordoned_node_and_a_no_execute_taint_are_not_tolerated() {
    let config = ClusterConfig::new()
        .node(NodeConfig::new("gpu-1").taint("nvidia.com/gpu", Some("present"), "NoSchedule"))
        .node(NodeConfig::new("gpu-2").taint("node.kubernetes.io/unschedulable", None, "NoSchedule"))
        .node(NodeConfig::new("gpu-3").taint("maintenance", Some("true"), "NoExecute"))
        .program(BIN)
        .isolation(Isolation::Host);
    let cluster = TestCluster::start_blocking(config).expect("the emulated cluster starts");
    let dry = run_pair(
        &cluster,
        &[
            "--prefill",
            "node/gpu-1",
            "--decode",
            "node/gpu-3",
            "--dry-run=client",
            "-o",
            "yaml",
        ],
        LIMIT,
    );
    assert_eq!(dry.code, 0, "{dry:#?}");
    // The YAML shows it all: the user, the dropped capabilities, the read-only root, the reserve.
    for (shown, times) in [
        ("runAsNonRoot: true", 2),
        ("runAsUser: 65532", 2),
        ("- ALL", 2),
        ("readOnlyRootFilesystem: true", 2),
        ("allowPrivilegeEscalation: false", 2),
        ("type: RuntimeDefault", 2),
        ("memory: ", 4),
        ("cpu: \"2\"", 4),
        ("mountPath: /tmp", 2),
    ] {
        assert_eq!(
            dry.stdout.matches(shown).count(),
            times,
            "{shown} in both pods:\n{}",
            dry.stdout
        );
    }
    let pods = icb_kube::yaml::pods(&dry.stdout).unwrap();
    let tolerated = |i: usize| -> Vec<String> {
        pods[i]
            .spec
            .as_ref()
            .unwrap()
            .tolerations
            .iter()
            .flatten()
            .map(|t| format!("{:?}:{:?}", t.key, t.effect))
            .collect()
    };
    assert!(
        tolerated(0).is_empty(),
        "the server on gpu-3 tolerates no NoExecute taint"
    );
    assert_eq!(tolerated(1), ["Some(\"nvidia.com/gpu\"):Some(\"NoSchedule\")"]);
    for (decode, taint) in [
        ("node/gpu-2", "node.kubernetes.io/unschedulable"),
        ("node/gpu-3", "maintenance"),
    ] {
        let run = run_pair(
            &cluster,
            &["--prefill", "node/gpu-1", "--decode", decode, "--timeout", "30s"],
            LIMIT,
        );
        assert_ne!(run.code, 0, "{run:#?}");
        let line = run.last_err_line();
        assert!(line.contains(taint), "{decode}: {line}");
        assert!(leftover_bench_pods(&cluster).is_empty());
    }
}

fn probe(cluster: &TestCluster) -> (i32, String) {
    let out = std::process::Command::new(BIN)
        .args([
            "probe",
            "node",
            "--node",
            "gpu-1",
            "--image",
            "busybox:1.36",
            "-o",
            "json",
        ])
        .args(["--counter-interval", "0s", "--kubeconfig"])
        .arg(cluster.kubeconfig_path())
        .args(["--request-timeout", "10s"])
        .output()
        .unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn the_probe_pod_is_admitted_at_privileged_and_refused_below_with_one_line() {
    let node = || {
        ClusterConfig::new()
            .node(NodeConfig::gpu("gpu-1", 8))
            .isolation(Isolation::Host)
    };
    let baseline = TestCluster::start_blocking(enforcing(node(), "baseline")).unwrap();
    let (code, err) = probe(&baseline);
    assert_eq!(code, 2, "{err}");
    let line = err.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or_default();
    assert!(
        line.contains("enforces Pod Security \"baseline\"")
            && line.contains("hostPath volumes")
            && line.contains("pod-security.kubernetes.io/enforce=privileged")
            && line.contains("probe node --pod"),
        "{line}"
    );
    assert_eq!(err.trim().lines().count(), 1, "one line: {err}");
    assert!(baseline.pods().is_empty());

    let privileged = TestCluster::start_blocking(enforcing(node(), "privileged")).unwrap();
    let (code, err) = probe(&privileged);
    assert!(code == 0 || code == 1, "admitted and run: {err}");
    assert!(privileged.pods().is_empty(), "the probe pod is deleted");
}
