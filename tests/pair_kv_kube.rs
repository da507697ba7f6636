//! `ic-bench pair --prefill node/A --decode node/B --kv-shape MODEL …` on the emulated cluster
//! (root: namespaces; CI runs as root): one process per TP rank, `a` exec'd into the prefill
//! node's bench pod and `b` into the decode node's (the whole-node mode's two pods), the
//! coordinator in the decode pod, repetitions synchronised over every rank; the descriptors of
//! the geometry moved over NIXL, or with `--engine ucx` the UCX engine's block lists (TCP over
//! the emulated nodes' veths), and every block verified at its destination on every rank; no pod
//! and no rank process is left, on success and when a rank dies.

#[path = "pair_kube_support/mod.rs"]
mod support;

use icb_core::{EngineKind, KvOutcome, PairReport, VerdictStatus};
use icb_testcluster::TestCluster;
use std::time::{Duration, Instant};
use support::*;

/// `pair` across gpu-1 → gpu-2 for Llama-3.1-8B at 32 tokens (2 blocks), TP `a` → TP `b`,
/// with short repetitions.
fn kv_args(a: &'static str, b: &'static str, timing: [&'static str; 2]) -> Vec<&'static str> {
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

/// The per-rank model on the two nodes: `a + b` ranks, every one in every synchronised
/// repetition, every decode rank checked every block it received (READ: the decode ranks
/// post), each initiator knows its data path (TCP: two nodes joined by veths).
fn assert_ranks_on_two_nodes(report: &PairReport, kv: &KvOutcome, (a, b): (u32, u32), engine: EngineKind) {
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
    for (side, n) in [("prefill", a), ("decode", b)] {
        let mut ranks: Vec<u32> = kv.ranks.iter().filter(|r| r.side == side).map(|r| r.rank).collect();
        ranks.sort_unstable();
        assert_eq!(ranks, (0..n).collect::<Vec<_>>(), "{side} ranks: {:?}", kv.ranks);
    }
    for r in &kv.ranks {
        eprintln!(
            "{} rank {}: cpus {:?}, numa node {:?}, {:?}",
            r.side, r.rank, r.cpus, r.numa_node, r.cpu_placement
        );
        assert_pod_placement(r);
        assert_eq!(r.repetitions, reps, "{r:?}");
        assert_eq!(r.initiator, r.side == "decode", "{r:?}");
        let mine: Vec<_> = kv
            .peers
            .iter()
            .filter(|p| {
                if r.side == "decode" {
                    p.decode_rank == r.rank
                } else {
                    p.prefill_rank == r.rank
                }
            })
            .collect();
        assert_eq!(r.peers as usize, mine.len(), "{r:?}");
        assert_eq!(r.bytes, mine.iter().map(|p| p.bytes).sum::<u64>(), "{r:?}");
        if r.side == "decode" {
            assert_eq!(
                r.blocks_verified,
                mine.iter().map(|p| p.descriptors).sum::<u64>(),
                "{r:?}"
            );
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
fn assert_pod_placement(r: &icb_core::model::KvRank) {
    let why = r.cpu_placement.as_deref().unwrap_or_default();
    assert!(
        why.starts_with("NUMA node ")
            || why.starts_with("unpinned: one NUMA node")
            || why.starts_with("unpinned: sysfs shows no NUMA"),
        "{r:?}"
    );
    assert!(r.cpus.as_deref().is_some_and(|c| !c.is_empty()), "{r:?}");
}

/// Two whole-node bench pods, each pinned to its node (prefill = client on gpu-1, decode =
/// server on gpu-2), holding all of its node's GPUs.
fn assert_two_whole_node_pods(run: &PairRun) {
    let pods = run.created_pods();
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
        let limits = spec.containers[0]
            .resources
            .clone()
            .unwrap_or_default()
            .limits
            .unwrap_or_default();
        assert_eq!(
            limits.get("nvidia.com/gpu").map(|q| q.0.as_str()),
            Some("8"),
            "{name}: {limits:?}"
        );
    }
}

/// The pids of `ic-bench VERB` processes (not their `sh` wrappers) in the cluster's node
/// namespaces, each with its command line.
fn processes(cluster: &TestCluster, verb: &str) -> Vec<(u32, String)> {
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
fn all_running(cluster: &TestCluster, ranks: usize) -> Vec<(u32, String)> {
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
fn assert_nothing_left(cluster: &TestCluster) {
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

/// TP2 → TP1 (a > b): the one decode rank gathers prefill ranks 0 and 1, each 32 × 2 × 2 = 128
/// descriptors of 4 heads × 4096 B = 16 KiB, the second landing 16 KiB into every 32 KiB decode
/// block; 4 MiB in all, the request's whole KV.
#[test]
fn a_gather_across_two_nodes_moves_and_verifies_every_block() {
    let Some(cluster) = cluster("a_gather_across_two_nodes_moves_and_verifies_every_block") else {
        return;
    };
    let run = run_pair(&cluster, &kv_args("2", "1", ["0.1", "0.5"]), Duration::from_secs(240));
    assert_eq!(run.code, 0, "{run:#?}");
    let report: PairReport = serde_json::from_str(&run.stdout).expect("a JSON report");
    let kv: KvOutcome = *report.kv.clone().expect("a kv section");
    assert_eq!(kv.kv_bytes_per_request, 4 << 20);
    assert_eq!(kv.bytes_moved_per_request, 4 << 20);
    let pairs: Vec<(u32, u32, u64, u64)> = kv
        .peers
        .iter()
        .map(|p| (p.decode_rank, p.prefill_rank, p.descriptors, p.descriptor_bytes))
        .collect();
    assert_eq!(pairs, [(0, 0, 128, 16_384), (0, 1, 128, 16_384)]);
    assert_ranks_on_two_nodes(&report, &kv, (2, 1), EngineKind::Nixl);
    assert_two_whole_node_pods(&run);
    assert_nothing_left(&cluster);
}

/// TP1 → TP2 (a < b): each decode rank reads its 4 heads from the one prefill rank: 128
/// descriptors of 16 KiB at 16 KiB into every 32 KiB prefill block; 4 MiB in all.
#[test]
fn a_split_across_two_nodes_moves_and_verifies_every_block() {
    let Some(cluster) = cluster("a_split_across_two_nodes_moves_and_verifies_every_block") else {
        return;
    };
    let run = run_pair(&cluster, &kv_args("1", "2", ["0.1", "0.5"]), Duration::from_secs(240));
    assert_eq!(run.code, 0, "{run:#?}");
    let report: PairReport = serde_json::from_str(&run.stdout).expect("a JSON report");
    let kv: KvOutcome = *report.kv.clone().expect("a kv section");
    assert_eq!(kv.kv_bytes_per_request, 4 << 20);
    assert_eq!(kv.bytes_moved_per_request, 4 << 20);
    let pairs: Vec<(u32, u32, u64, u64)> = kv
        .peers
        .iter()
        .map(|p| (p.decode_rank, p.prefill_rank, p.descriptors, p.descriptor_bytes))
        .collect();
    assert_eq!(pairs, [(0, 0, 128, 16_384), (1, 0, 128, 16_384)]);
    assert_ranks_on_two_nodes(&report, &kv, (1, 2), EngineKind::Nixl);
    assert_two_whole_node_pods(&run);
    assert_nothing_left(&cluster);
}

/// The UCX engine's ranks in the same two pods (`--engine ucx`): TP1 → TP2 READ, each decode
/// rank's 128 blocks fetched with RMA gets through the coordinator in the decode pod, which
/// admits them by the run's token as it admits NIXL ranks.
#[test]
fn the_ucx_engine_runs_per_rank_across_two_nodes_too() {
    let Some(cluster) = cluster("the_ucx_engine_runs_per_rank_across_two_nodes_too") else {
        return;
    };
    let mut args = kv_args("1", "2", ["0.1", "0.5"]);
    args.extend(["--engine", "ucx"]);
    let run = run_pair(&cluster, &args, Duration::from_secs(240));
    assert_eq!(run.code, 0, "{run:#?}");
    let report: PairReport = serde_json::from_str(&run.stdout).expect("a JSON report");
    let kv: KvOutcome = *report.kv.clone().expect("a kv section");
    assert_eq!(kv.bytes_moved_per_request, 4 << 20);
    let pairs: Vec<(u32, u32, u64)> = kv
        .peers
        .iter()
        .map(|p| (p.decode_rank, p.prefill_rank, p.descriptors))
        .collect();
    assert_eq!(pairs, [(0, 0, 128), (1, 0, 128)]);
    assert_ranks_on_two_nodes(&report, &kv, (1, 2), EngineKind::Ucx);
    assert_two_whole_node_pods(&run);
    assert_nothing_left(&cluster);
}

/// A prefill rank killed mid-run (SIGKILL, as the OOM killer does): one line naming it (not the
/// decode rank whose reads then fail), exit 2, no report, well before the run's own deadline;
/// the other ranks, the coordinator and both pods are gone.
#[test]
fn a_rank_that_dies_ends_the_run_with_its_name_and_nothing_is_left() {
    let Some(cluster) = cluster("a_rank_that_dies_ends_the_run_with_its_name_and_nothing_is_left") else {
        return;
    };
    cluster.clear_requests();
    // Repetitions for 20 s at least: the rank dies in the middle of them.
    let child = pair_command(&cluster, &kv_args("2", "1", ["20", "30"]))
        .spawn()
        .unwrap();
    let victim = all_running(&cluster, 3)
        .into_iter()
        .find(|(_, cmd)| cmd.contains(r#"{"id":{"side":"prefill","rank":1}"#))
        .expect("prefill rank 1")
        .0;
    // Into the repetitions (the ranks connect, exchange metadata and warm up first).
    std::thread::sleep(Duration::from_secs(3));
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(victim as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    let killed = Instant::now();
    let out = wait_output(child, Duration::from_secs(120));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(out.stdout.is_empty(), "{}", String::from_utf8_lossy(&out.stdout));
    let last = stderr.lines().rev().find(|l| !l.trim().is_empty()).unwrap_or_default();
    // The rank killed, not decode rank 0, whose reads from it failed because it died.
    assert!(
        last.contains("prefill rank 1") && last.contains("exited early"),
        "{stderr}"
    );
    eprintln!("the line: {last}");
    assert!(
        killed.elapsed() < Duration::from_secs(20),
        "{:?} after the kill",
        killed.elapsed()
    );
    assert_nothing_left(&cluster);
}

/// One node for both sides (`--prefill node/gpu-1 --decode node/gpu-1`) with `--host-ipc`,
/// `--host-pid`, `--gpus 2` and `--rdma none`: the per-rank model still (3 ranks at once, every
/// block verified), in two pods on gpu-1 that share its IPC and PID namespaces and each request
/// exactly 2 GPUs and no RDMA device (two pods cannot both hold the whole node); nothing left.
#[test]
fn one_node_runs_per_rank_in_two_pods_shaped_by_the_flags() {
    let Some(cluster) = cluster("one_node_runs_per_rank_in_two_pods_shaped_by_the_flags") else {
        return;
    };
    let mut args = kv_args("2", "1", ["0.1", "0.5"]);
    args[3] = "node/gpu-1";
    args.extend(["--host-ipc", "--host-pid", "--gpus", "2", "--rdma", "none"]);
    let run = run_pair(&cluster, &args, Duration::from_secs(240));
    assert_eq!(run.code, 0, "{run:#?}");
    let report: PairReport = serde_json::from_str(&run.stdout).expect("a JSON report");
    let kv: KvOutcome = *report.kv.clone().expect("a kv section");
    assert!(kv.synchronised, "not the per-rank model: {kv:?}");
    assert!(
        report.placement.mode.starts_with("kubernetes (ranks)"),
        "{}",
        report.placement.mode
    );
    assert_eq!(report.placement.locality, icb_core::model::Locality::SameHost);
    assert_eq!(
        (
            report.placement.prefill.host.as_str(),
            report.placement.decode.host.as_str()
        ),
        ("gpu-1", "gpu-1")
    );
    assert_eq!(kv.ranks.len(), 3, "{:?}", kv.ranks);
    kv.ranks.iter().for_each(assert_pod_placement);
    let blocks: u64 = kv
        .ranks
        .iter()
        .filter(|r| r.side == "decode")
        .map(|r| r.blocks_verified)
        .sum();
    assert_eq!(blocks, 256, "{:?}", kv.ranks);
    for p in &kv.peers {
        assert!(p.verified && p.failure.is_none(), "{p:?}");
        assert!(p.data_path.is_some(), "{p:?}");
    }
    let pods = run.created_pods();
    assert_eq!(pods.len(), 2);
    for pod in &pods {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let spec = pod.spec.clone().unwrap_or_default();
        assert!(
            serde_json::to_string(&spec.affinity).unwrap().contains("\"gpu-1\""),
            "{name}"
        );
        assert_eq!((spec.host_ipc, spec.host_pid), (Some(true), Some(true)), "{name}");
        let limits = spec.containers[0]
            .resources
            .clone()
            .unwrap_or_default()
            .limits
            .unwrap_or_default();
        assert_eq!(
            limits.get("nvidia.com/gpu").map(|q| q.0.as_str()),
            Some("2"),
            "{name}: {limits:?}"
        );
        assert!(!limits.keys().any(|k| k.starts_with("rdma/")), "{name}: {limits:?}");
    }
    assert_nothing_left(&cluster);
}

/// A serving worker pod on `node` holding 2 GPUs and an RDMA device, with its transport env.
fn worker_pod(name: &str, node: &str) -> serde_json::Value {
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

/// Worker-shaped targets (`pod/prefill-0` on gpu-1, `pod/decode-0` on gpu-2): the per-rank
/// model in two bench pods modelled on the workers (their node, transport env and devices),
/// TP2 → TP1, every block verified, the report naming the workers; nothing left but them.
#[test]
fn worker_pod_targets_run_per_rank_in_pods_modelled_on_the_workers() {
    let Some(cluster) = cluster("worker_pod_targets_run_per_rank_in_pods_modelled_on_the_workers") else {
        return;
    };
    create_reference_pod(&cluster, worker_pod("prefill-0", "gpu-1"));
    create_reference_pod(&cluster, worker_pod("decode-0", "gpu-2"));
    let mut args = kv_args("2", "1", ["0.1", "0.5"]);
    args[1] = "pod/prefill-0";
    args[3] = "pod/decode-0";
    let run = run_pair(&cluster, &args, Duration::from_secs(240));
    assert_eq!(run.code, 0, "{run:#?}");
    let report: PairReport = serde_json::from_str(&run.stdout).expect("a JSON report");
    let kv: KvOutcome = *report.kv.clone().expect("a kv section");
    assert_eq!(kv.bytes_moved_per_request, 4 << 20);
    assert_ranks_on_two_nodes(&report, &kv, (2, 1), EngineKind::Nixl);
    assert_eq!(report.placement.prefill.modelled_on.as_deref(), Some("pod/prefill-0"));
    assert_eq!(report.placement.decode.modelled_on.as_deref(), Some("pod/decode-0"));
    let pods: Vec<_> = run
        .created_pods()
        .into_iter()
        .filter(|p| p.metadata.name.as_deref().is_some_and(|n| n.starts_with("ic-bench-")))
        .collect();
    assert_eq!(pods.len(), 2);
    for pod in &pods {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let ann = pod.metadata.annotations.clone().unwrap_or_default();
        let worker = if name.ends_with("-client") {
            "pod/prefill-0"
        } else {
            "pod/decode-0"
        };
        assert_eq!(
            ann.get("ic-bench.dev/modelled-on").map(String::as_str),
            Some(worker),
            "{name}"
        );
        let c = &pod.spec.clone().unwrap_or_default().containers[0];
        let env: Vec<_> = c.env.clone().unwrap_or_default();
        assert!(
            env.iter()
                .any(|e| e.name == "UCX_TLS" && e.value.as_deref() == Some("rc,cuda_ipc,cuda_copy,tcp")),
            "{name}: {env:?}"
        );
        let limits = c.resources.clone().unwrap_or_default().limits.unwrap_or_default();
        assert_eq!(
            limits.get("nvidia.com/gpu").map(|q| q.0.as_str()),
            Some("2"),
            "{name}: {limits:?}"
        );
    }
    assert_nothing_left(&cluster);
}

/// `gate --kv-shape` with no model on the command line: the recipe's vLLM arguments name
/// Llama-3.1-8B-Instruct, prefill TP 2, decode TP 1, block 16, so the gate's pair step is that
/// gather (2 reads of 128 descriptors of 16 KiB at 32 tokens) on the per-rank model: 2 prefill
/// ranks in gpu-1's whole-node pod, 1 decode rank in gpu-2's, all at once, every block verified;
/// and `--max-kv-ms` judges it. No pod and no rank process is left.
#[test]
fn gate_kv_shape_measures_the_recipes_own_transfer() {
    let Some(cluster) = cluster("gate_kv_shape_measures_the_recipes_own_transfer") else {
        return;
    };
    let fixture = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/gate/kv.yaml");
    let gate = |extra: &[&str]| {
        let mut cmd = std::process::Command::new(BIN);
        cmd.arg("gate")
            .arg("--kubeconfig")
            .arg(cluster.kubeconfig_path())
            .args(["--recipe", fixture, "--prefill", "node/gpu-1", "--decode", "node/gpu-2"])
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
        wait_output(cmd.spawn().unwrap(), Duration::from_secs(200))
    };
    let out = gate(&[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let kv = &report["pair"]["kv"];
    assert_eq!(kv["model"], "llama-3.1-8b", "{report}");
    assert_eq!(
        (kv["prefill_tp"].as_u64(), kv["decode_tp"].as_u64()),
        (Some(2), Some(1))
    );
    assert_eq!(kv["kv_bytes_per_request"], 4 << 20);
    for p in kv["peers"].as_array().unwrap() {
        assert_eq!(p["verified"], true, "{p}");
        assert_eq!(p["descriptors"], 128, "{p}");
    }
    // The per-rank model, not one process pair per read: the same checks as `pair`'s.
    let pair: PairReport = serde_json::from_value(report["pair"].clone()).expect("a pair report");
    let outcome: KvOutcome = *pair.kv.clone().expect("a kv section");
    let engine = pair.cases.first().map(|c| c.run_by.engine).expect("a case");
    assert_ranks_on_two_nodes(&pair, &outcome, (2, 1), engine);
    let notes = report["notes"].to_string();
    assert!(
        notes.contains("one process per TP rank in two whole-node bench pods"),
        "{notes}"
    );
    // A budget no request meets fails the gate (exit 1), in TTFT terms.
    let out = gate(&["--max-kv-ms", "0.000001"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(1),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("over --max-kv-ms"), "{stdout}");
    assert_nothing_left(&cluster);
}

/// `gate --kv-shape` on worker pods (`pod/prefill-0`, `pod/decode-0`, running): the recipe's
/// shape (TP2 → TP1) moved per rank in bench pods modelled on the running workers, every block
/// verified, the report naming the workers; nothing left but them.
#[test]
fn gate_kv_shape_on_worker_pods_runs_per_rank_in_pods_modelled_on_them() {
    let Some(cluster) = cluster("gate_kv_shape_on_worker_pods_runs_per_rank_in_pods_modelled_on_them") else {
        return;
    };
    create_reference_pod(&cluster, worker_pod("prefill-0", "gpu-1"));
    create_reference_pod(&cluster, worker_pod("decode-0", "gpu-2"));
    let fixture = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/gate/kv.yaml");
    let mut cmd = std::process::Command::new(BIN);
    cmd.arg("gate")
        .arg("--kubeconfig")
        .arg(cluster.kubeconfig_path())
        .args([
            "--recipe",
            fixture,
            "--prefill",
            "pod/prefill-0",
            "--decode",
            "pod/decode-0",
        ])
        .args([
            "--allow-tcp",
            "--min-host-bw",
            "0.001",
            "--no-node-probe",
            "--budget",
            "120s",
        ])
        .args(["-o", "json", "--kv-shape", "--isl", "32"])
        .env("IC_BENCH_LOG", "warn,kube_client=off,kube_runtime=off")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let out = wait_output(cmd.spawn().unwrap(), Duration::from_secs(200));
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let report: serde_json::Value = serde_json::from_str(&stdout).unwrap();
    let pair: PairReport = serde_json::from_value(report["pair"].clone()).expect("a pair report");
    let kv: KvOutcome = *pair.kv.clone().expect("a kv section");
    assert_eq!((kv.prefill_tp, kv.decode_tp), (2, 1));
    let engine = pair.cases.first().map(|c| c.run_by.engine).expect("a case");
    assert_ranks_on_two_nodes(&pair, &kv, (2, 1), engine);
    assert_eq!(pair.placement.prefill.modelled_on.as_deref(), Some("pod/prefill-0"));
    assert_eq!(pair.placement.decode.modelled_on.as_deref(), Some("pod/decode-0"));
    let notes = report["notes"].to_string();
    assert!(notes.contains("modelled on the workers"), "{notes}");
    assert_nothing_left(&cluster);
}

/// Ctrl-C in the middle of the repetitions: exit 130 within seconds, the line says what was
/// removed (the rank processes and both pods), and nothing is left.
#[test]
fn ctrl_c_mid_run_removes_every_rank_and_both_pods() {
    let Some(cluster) = cluster("ctrl_c_mid_run_removes_every_rank_and_both_pods") else {
        return;
    };
    cluster.clear_requests();
    let child = pair_command(&cluster, &kv_args("1", "2", ["20", "30"]))
        .spawn()
        .unwrap();
    let pid = child.id();
    all_running(&cluster, 3);
    std::thread::sleep(Duration::from_secs(2));
    let sent = Instant::now();
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), nix::sys::signal::Signal::SIGINT).unwrap();
    let out = wait_output(child, Duration::from_secs(60));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert!(
        sent.elapsed() < Duration::from_secs(30),
        "cleanup took {:?}",
        sent.elapsed()
    );
    let line = stderr.lines().rev().find(|l| !l.is_empty()).unwrap_or_default();
    assert!(
        line.starts_with("ic-bench: interrupted by SIGINT (Ctrl-C): "),
        "{stderr}"
    );
    assert!(
        line.contains("3 rank processes") && line.contains("-kr-client"),
        "{stderr}"
    );
    assert_nothing_left(&cluster);
}
