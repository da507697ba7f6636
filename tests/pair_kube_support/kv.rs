//! The KV tests' shared checks (`pair_kv_kube`, `gate_kv_kube`): the arguments of a short
//! `--kv-shape` run across gpu-1 → gpu-2, what the per-rank model on two nodes must show, and
//! that no pod and no rank process is left.

use super::kv_shared::{assert_rank_sums_its_peers, assert_ranks_numbered};
use super::*;
use icb_core::{EngineKind, KvOutcome, PairReport, VerdictStatus};
use icb_kube::k8s_openapi::api::core::v1::PodSpec;
use icb_kube::k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use icb_testcluster::TestCluster;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

/// `pair` across gpu-1 → gpu-2 for Llama-3.1-8B at 32 tokens (2 blocks), TP `a` → TP `b`,
/// with short repetitions.
pub fn kv_args(a: &'static str, b: &'static str, timing: [&'static str; 2]) -> Vec<&'static str> {
    vec![
        "--prefill",
        "node/gpu-1",
        "--decode",
        "node/gpu-2",
        "-o",
        "json",
        "--kv-shape",
        "llama-3.1-8b",
        "--isl",
        "32",
        "--prefill-tp",
        a,
        "--decode-tp",
        b,
        "--allow-tcp",
        "--min-host-bw",
        "0.001",
        "--min-time",
        timing[0],
        "--max-time",
        timing[1],
        "--warmup",
        "2",
    ]
}

/// Asserts the run passed (exit 0); its report and the report's KV section.
pub fn kv_report(run: &PairRun) -> (PairReport, KvOutcome) {
    assert_eq!(run.code, 0, "{run:#?}");
    let report: PairReport = serde_json::from_str(&run.stdout).expect("a JSON report");
    let kv = *report.kv.clone().expect("a kv section");
    (report, kv)
}

/// Each peer as (decode rank, prefill rank, descriptors, descriptor bytes), in report order.
pub fn peer_geometry(kv: &KvOutcome) -> Vec<(u32, u32, u64, u64)> {
    kv.peers
        .iter()
        .map(|p| (p.decode_rank, p.prefill_rank, p.descriptors, p.descriptor_bytes))
        .collect()
}

/// `gate --kv-shape --isl 32` with the recipe fixture `gate/kv.yaml` (Llama-3.1-8B, TP2 → TP1)
/// from `prefill` to `decode` over TCP, node probes off, and `extra`; asserts it exits with
/// `code` and returns its stdout.
pub fn gate_kv(cluster: &TestCluster, (prefill, decode): (&str, &str), extra: &[&str], code: i32) -> String {
    let fixture = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/gate/kv.yaml");
    let mut cmd = std::process::Command::new(BIN);
    cmd.arg("gate")
        .arg("--kubeconfig")
        .arg(cluster.kubeconfig_path())
        .args(["--recipe", fixture, "--prefill", prefill, "--decode", decode])
        .args([
            "--allow-tcp",
            "--min-host-bw",
            "0.001",
            "--no-node-probe",
            "--budget",
            "120s",
        ])
        .args(["-o", "json", "--kv-shape", "--isl", "32"])
        .args(extra)
        .env("IC_BENCH_LOG", "warn,kube_client=off,kube_runtime=off")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let out = wait_output(cmd.spawn().unwrap(), Duration::from_secs(200));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(
        out.status.code(),
        Some(code),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// A gate report's pair step, its KV section, and the engine of its first case.
pub fn gate_pair(report: &serde_json::Value) -> (PairReport, KvOutcome, EngineKind) {
    let pair: PairReport = serde_json::from_value(report["pair"].clone()).expect("a pair report");
    let kv = *pair.kv.clone().expect("a kv section");
    let engine = pair.cases.first().map(|c| c.run_by.engine).expect("a case");
    (pair, kv, engine)
}

/// The per-rank model on the two nodes: `a + b` ranks, every one in every synchronised
/// repetition, every decode rank checked every block it received (READ: the decode ranks
/// post), each initiator knows its data path (TCP: two nodes joined by veths).
pub fn assert_ranks_on_two_nodes(report: &PairReport, kv: &KvOutcome, (a, b): (u32, u32), engine: EngineKind) {
    assert!(kv.synchronised, "not the per-rank model: {kv:?}");
    let reps = kv.repetitions.expect("synchronised repetitions");
    assert!(reps >= 3, "{reps} repetitions");
    assert!(
        report.placement.mode.starts_with("kubernetes (ranks)"),
        "{}",
        report.placement.mode
    );
    assert_eq!(report.placement.prefill.host, "gpu-1");
    assert_eq!(report.placement.decode.host, "gpu-2");
    assert_ranks_numbered(kv, (a, b));
    for r in &kv.ranks {
        eprintln!(
            "{} rank {}: cpus {:?}, numa node {:?}, {:?}",
            r.side, r.rank, r.cpus, r.numa_node, r.cpu_placement
        );
        assert_pod_placement(r);
        assert_eq!(r.repetitions, reps, "{r:?}");
        assert_eq!(r.initiator, r.side == "decode", "{r:?}");
        assert_rank_sums_its_peers(kv, r);
        if r.side == "decode" {
            assert!(r.data_path.as_deref().is_some_and(|d| d.contains("tcp")), "{r:?}");
            assert!(r.post_ms.is_some(), "{r:?}");
        }
    }
    for p in &kv.peers {
        assert!(p.verified && p.failure.is_none(), "{p:?}");
        assert_eq!(p.repetitions, reps, "{p:?}");
        assert!(p.request_ms_p50.is_some_and(|v| v > 0.0), "{p:?}");
        assert!(p.data_path.as_deref().is_some_and(|d| d.contains("tcp")), "{p:?}");
    }
    // A synchronised request ends with its last peer: its p50 is at least every peer's.
    let slowest = kv.peers.iter().filter_map(|p| p.request_ms_p50).fold(0.0, f64::max);
    assert!(kv.request_ms_p50.expect("a request time") >= slowest * (1.0 - 1e-9));
    assert!(
        report.cases.iter().all(|c| c.run_by.engine == engine),
        "not all {engine:?}"
    );
    assert_ne!(report.verdict.status, VerdictStatus::Fail, "{:?}", report.verdict);
}

/// A rank in a pod was placed as local ranks are, from the pod's view of its node (read in the
/// pod, `rail-info --cpus`): the decision's reason, and the CPUs it ran on.
pub fn assert_pod_placement(r: &icb_core::model::KvRank) {
    let why = r.cpu_placement.as_deref().unwrap_or_default();
    assert!(
        why.starts_with("NUMA node ")
            || why.starts_with("unpinned: one NUMA node")
            || why.starts_with("unpinned: sysfs shows no NUMA"),
        "{r:?}"
    );
    assert!(r.cpus.as_deref().is_some_and(|c| !c.is_empty()), "{r:?}");
}

/// The runs `pair --kv-shape` adds after the paged one on fresh rank pods of the same shape
/// (issue 42): the bulk row (`<run>-c2-…`), the bursts (`-c3-`) and the other operation (`-c4-`).
const EXTRA_RUNS: [&str; 3] = ["-c2-", "-c3-", "-c4-"];

/// Whether `pod` is one of the extra runs' rank pods ([`EXTRA_RUNS`]).
pub fn is_extra_run_pod(pod: &icb_kube::k8s_openapi::api::core::v1::Pod) -> bool {
    pod.metadata
        .name
        .as_deref()
        .is_some_and(|n| EXTRA_RUNS.iter().any(|run| n.contains(run)))
}

/// The pods the run created, the extra runs' left out.
pub fn paged_run_pods(run: &PairRun) -> Vec<icb_kube::k8s_openapi::api::core::v1::Pod> {
    run.created_pods()
        .into_iter()
        .filter(|p| !is_extra_run_pod(p))
        .collect()
}

/// The bulk row, the bursts and the other operation each ran in two rank pods of their own: the
/// bulk row measured the paged request's bytes with the paged request's share of it, the bursts
/// at least two sizes (every copy verified), the other operation its request (verified).
pub fn assert_bulk_row_ran(run: &PairRun, kv: &KvOutcome) {
    let names: Vec<String> = run
        .created_pods()
        .iter()
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    for extra in EXTRA_RUNS {
        assert_eq!(
            names.iter().filter(|n| n.contains(extra)).count(),
            2,
            "{extra}: {names:?}"
        );
    }
    let bursts = kv.bursts.as_ref().expect("the bursts");
    assert!(bursts.failure.is_none() && bursts.verified, "{bursts:?}");
    assert!(bursts.sizes.len() >= 2 && bursts.sizes[0].requests == 1, "{bursts:?}");
    assert!(bursts.frontier.is_some(), "{bursts:?}");
    let other = &kv.directions.as_ref().expect("push and pull").other;
    assert!(other.check.failure.is_none() && other.check.verified, "{other:?}");
    assert_ne!(other.op, kv.op, "{other:?}");
    assert!(other.times.request_ms_p50.is_some_and(|ms| ms > 0.0), "{other:?}");
    let bulk = kv.bulk.as_ref().expect("a bulk row");
    assert!(bulk.check.failure.is_none() && bulk.check.verified, "{bulk:?}");
    assert_eq!(bulk.bytes_moved_per_request, kv.bytes_moved_per_request, "{bulk:?}");
    assert_eq!(bulk.descriptors_per_request, kv.peers.len() as u64, "{bulk:?}");
    assert!(bulk.paged_over_bulk.is_some_and(|r| r > 0.0), "{bulk:?}");
}

/// Two whole-node bench pods, each pinned to its node (prefill = client on gpu-1, decode =
/// server on gpu-2), holding all of its node's GPUs (the bulk row's pods aside).
pub fn assert_two_whole_node_pods(run: &PairRun) {
    let pods = paged_run_pods(run);
    let names: Vec<String> = pods.iter().filter_map(|p| p.metadata.name.clone()).collect();
    assert_eq!(pods.len(), 2, "{names:?}");
    for pod in &pods {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let spec = pod.spec.clone().unwrap_or_default();
        let affinity = serde_json::to_string(&spec.affinity).unwrap();
        let want = if name.ends_with("-client") {
            "\"gpu-1\""
        } else {
            "\"gpu-2\""
        };
        assert!(affinity.contains(want), "{name}: {affinity}");
        gpu_limit_is(&name, &first_container_limits(&spec), "8");
    }
}

/// The resource limits of a pod's first container (the bench container): none is an empty map.
pub fn first_container_limits(spec: &PodSpec) -> BTreeMap<String, Quantity> {
    spec.containers[0]
        .resources
        .clone()
        .unwrap_or_default()
        .limits
        .unwrap_or_default()
}

/// Asserts pod `name`'s `limits` hold exactly `gpus` nvidia.com/gpu.
pub fn gpu_limit_is(name: &str, limits: &BTreeMap<String, Quantity>, gpus: &str) {
    assert_eq!(
        limits.get("nvidia.com/gpu").map(|q| q.0.as_str()),
        Some(gpus),
        "{name}: {limits:?}"
    );
}

/// The pids of `ic-bench VERB` processes (not their `sh` wrappers) in the cluster's node
/// namespaces, each with its command line.
pub fn processes(cluster: &TestCluster, verb: &str) -> Vec<(u32, String)> {
    let mut found = Vec::new();
    for ns in cluster.netns_names() {
        let Ok(out) = std::process::Command::new("ip").args(["netns", "pids", &ns]).output() else {
            continue;
        };
        for pid in String::from_utf8_lossy(&out.stdout).split_whitespace() {
            let Ok(raw) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
                continue;
            };
            let args: Vec<String> = raw
                .split(|b| *b == 0)
                .map(|a| String::from_utf8_lossy(a).into_owned())
                .collect();
            if args.first().is_some_and(|a| a.ends_with("ic-bench")) && args.get(1).map(String::as_str) == Some(verb) {
                found.push((pid.parse().unwrap(), args.join(" ")));
            }
        }
    }
    found
}

/// Waits until `ranks` rank processes and the coordinator run; the ranks.
pub fn all_running(cluster: &TestCluster, ranks: usize) -> Vec<(u32, String)> {
    let started = Instant::now();
    loop {
        let found = processes(cluster, "kv-rank");
        if found.len() == ranks && processes(cluster, "kv-coordinate").len() == 1 {
            return found;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the ranks never all ran: {found:?}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// No pod, and (within a few seconds) no rank or coordinator process in any node.
pub fn assert_nothing_left(cluster: &TestCluster) {
    assert!(
        leftover_bench_pods(cluster).is_empty(),
        "{:?}",
        leftover_bench_pods(cluster)
    );
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left = processes(cluster, "kv-rank").len() + processes(cluster, "kv-coordinate").len();
        if left == 0 {
            return;
        }
        assert!(Instant::now() < deadline, "{left} KV process(es) still run");
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// A serving worker pod on `node` holding 2 GPUs and an RDMA device, with its transport env.
pub fn worker_pod(name: &str, node: &str) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "nodeName": node,
            "containers": [{"name": "vllm", "image": "serving:1", "command": ["sleep", "600"],
                "env": [{"name": "UCX_TLS", "value": "rc,cuda_ipc,cuda_copy,tcp"}],
                "resources": {"limits": {"nvidia.com/gpu": "2", "rdma/ib": "1"},
                              "requests": {"nvidia.com/gpu": "2", "rdma/ib": "1"}}}]
        }
    })
}
