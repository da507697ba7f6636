//! `ic-bench pair --kv-shape MODEL …` on Kubernetes targets, on the emulated cluster (root:
//! namespaces; CI runs as root): one process per TP rank, `a` exec'd into the prefill side's bench
//! pod and `b` into the decode side's (whole-node pods on two nodes, pods shaped by the device
//! flags on one node, pods modelled on worker pods), the coordinator in the decode pod,
//! repetitions synchronised over every rank, each rank on the CPUs chosen from its pod's view of
//! its node; the descriptors of the geometry moved over NIXL, or with `--engine ucx` the UCX
//! engine's block lists (TCP over the emulated nodes' veths), and every block verified at its
//! destination on every rank; no pod and no rank process is left, on success, when a rank dies
//! and at Ctrl-C. The gate's KV step is `gate_kv_kube`.

use crate::pair_kube_support as support;

use icb_core::EngineKind;
use std::time::{Duration, Instant};
use support::kv::*;
use support::*;

/// TP2 → TP1 (a > b): the one decode rank gathers prefill ranks 0 and 1, each 32 × 2 × 2 = 128
/// descriptors of 4 heads × 4096 B = 16 KiB, the second landing 16 KiB into every 32 KiB decode
/// block; 4 MiB in all, the request's whole KV. `--recipe` is read on the pods path as locally:
/// its vLLM NixlConnector reads, and the output says so.
#[test]
fn a_gather_across_two_nodes_moves_and_verifies_every_block() {
    let Some(cluster) = cluster("a_gather_across_two_nodes_moves_and_verifies_every_block") else {
        return;
    };
    let mut args = kv_args("2", "1", ["0.1", "0.5"]);
    args.extend([
        "--recipe",
        concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/gate/kv.yaml"),
    ]);
    let run = run_pair(&cluster, &args, Duration::from_secs(240));
    let (report, kv) = kv_report(&run);
    assert_eq!(kv.kv_bytes_per_request, 4 << 20);
    assert_eq!(kv.bytes_moved_per_request, 4 << 20);
    assert_eq!(peer_geometry(&kv), [(0, 0, 128, 16_384), (0, 1, 128, 16_384)]);
    assert_ranks_on_two_nodes(&report, &kv, (2, 1), EngineKind::Nixl);
    assert_two_whole_node_pods(&run);
    assert_bulk_row_ran(&run, &kv);
    let d = kv.directions.as_ref().expect("push and pull");
    assert_eq!(d.connector_op.as_deref(), Some("read"), "{d:?}");
    let why = d.connector.as_deref().unwrap_or_default();
    assert!(why.ends_with("kv.yaml: vLLM kv_connector=NixlConnector: the decode worker reads the prefill worker's blocks with NIXL READ"), "{why}");
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
    let (report, kv) = kv_report(&run);
    assert_eq!(kv.kv_bytes_per_request, 4 << 20);
    assert_eq!(kv.bytes_moved_per_request, 4 << 20);
    assert_eq!(peer_geometry(&kv), [(0, 0, 128, 16_384), (1, 0, 128, 16_384)]);
    assert_ranks_on_two_nodes(&report, &kv, (1, 2), EngineKind::Nixl);
    assert_two_whole_node_pods(&run);
    assert_bulk_row_ran(&run, &kv);
    // No recipe and node targets: nothing says the connector's operation, and the output says so.
    let d = kv.directions.as_ref().expect("push and pull");
    assert_eq!(d.connector_op, None, "{d:?}");
    assert_eq!(d.connector.as_deref(), Some(icb_kv_transfer::directions::NOTHING_READ));
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
    let (report, kv) = kv_report(&run);
    assert_eq!(kv.bytes_moved_per_request, 4 << 20);
    let pairs: Vec<_> = peer_geometry(&kv).into_iter().map(|(d, p, n, _)| (d, p, n)).collect();
    assert_eq!(pairs, [(0, 0, 128), (1, 0, 128)]);
    assert_ranks_on_two_nodes(&report, &kv, (1, 2), EngineKind::Ucx);
    assert_two_whole_node_pods(&run);
    assert_bulk_row_ran(&run, &kv);
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
    args.extend(["--kv-extra-runs", "none"]);
    let run = run_pair(&cluster, &args, Duration::from_secs(240));
    let (report, kv) = kv_report(&run);
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
    let pods = paged_run_pods(&run);
    assert_eq!(pods.len(), 2);
    for pod in &pods {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let spec = pod.spec.clone().unwrap_or_default();
        assert!(
            serde_json::to_string(&spec.affinity).unwrap().contains("\"gpu-1\""),
            "{name}"
        );
        assert_eq!((spec.host_ipc, spec.host_pid), (Some(true), Some(true)), "{name}");
        let limits = first_container_limits(&spec);
        gpu_limit_is(&name, &limits, "2");
        assert!(!limits.keys().any(|k| k.starts_with("rdma/")), "{name}: {limits:?}");
    }
    assert_nothing_left(&cluster);
}

/// Two NUMA nodes as the bench pods see their node (written into each emulated node's recorded
/// sysfs tree, which `rail-info --cpus` reads as the rail map is read): one CPU of this machine
/// each, the RDMA NIC mlx5_0 on node 0 of gpu-1 and on node 1 of gpu-2. Every rank (host memory:
/// no GPU) runs on its NIC's node, pins itself to that node's CPU and reports the CPU it ran on:
/// the placement decided from each pod's view and applied inside the pod.
#[test]
fn ranks_in_pods_run_on_the_numa_node_chosen_from_the_pods_view() {
    if !icb_isolate::privileged_tests_enabled("ranks_in_pods_run_on_the_numa_node_chosen_from_the_pods_view") {
        return;
    }
    let allowed = icb_rails::cpus::allowed_cpus();
    assert!(allowed.len() >= 2, "two CPUs needed: {allowed:?}");
    let cluster = cluster_with(icb_testcluster::ClusterConfig::two_gpu_nodes().rails(1));
    for (node, nic_numa) in [("gpu-1", 0), ("gpu-2", 1)] {
        let tree = cluster.rail_tree(node).expect("a rail tree");
        for (n, cpu) in allowed.iter().take(2).enumerate() {
            let dir = tree.join(format!("sys/devices/system/node/node{n}"));
            std::fs::create_dir_all(&dir).unwrap();
            std::fs::write(dir.join("cpulist"), format!("{cpu}\n")).unwrap();
        }
        let nic = tree.join("sys/class/infiniband/mlx5_0/device/numa_node");
        std::fs::write(&nic, format!("{nic_numa}\n")).unwrap();
    }
    let mut args = kv_args("2", "1", ["0.1", "0.5"]);
    args.extend(["--kv-extra-runs", "none"]);
    let run = run_pair(&cluster, &args, Duration::from_secs(240));
    let (report, kv) = kv_report(&run);
    assert_ranks_on_two_nodes(&report, &kv, (2, 1), EngineKind::Nixl);
    for r in &kv.ranks {
        let node: u32 = if r.side == "prefill" { 0 } else { 1 };
        let why = r.cpu_placement.as_deref().unwrap_or_default();
        assert_eq!(why, format!("NUMA node {node} of NIC mlx5_0"), "{r:?}");
        assert_eq!(r.numa_node, Some(node), "{r:?}");
        assert_eq!(r.cpus, Some(allowed[node as usize].to_string()), "{r:?}");
    }
    assert_nothing_left(&cluster);
}

/// Worker-shaped targets (`pod/prefill-0` on gpu-1, `pod/decode-0` on gpu-2): the per-rank
/// model in two bench pods modelled on the workers (their node, transport env and devices),
/// TP2 → TP1, every block verified, the report naming the workers; nothing left but them. No
/// `--recipe`: the workers' own command lines (SGLang disaggregation over NIXL) say the connector
/// writes, beside the other operation's run.
#[test]
fn worker_pod_targets_run_per_rank_in_pods_modelled_on_the_workers() {
    let Some(cluster) = cluster("worker_pod_targets_run_per_rank_in_pods_modelled_on_the_workers") else {
        return;
    };
    for (name, node, mode) in [("prefill-0", "gpu-1", "prefill"), ("decode-0", "gpu-2", "decode")] {
        let mut pod = worker_pod(name, node);
        // The engine's command line after the script `sh` runs (its $0, $1, …: never run).
        pod["spec"]["containers"][0]["command"] = serde_json::json!([
            "sh",
            "-c",
            "sleep 600",
            "python3",
            "-m",
            "sglang.launch_server",
            "--disaggregation-mode",
            mode,
            "--disaggregation-transfer-backend",
            "nixl"
        ]);
        create_reference_pod(&cluster, pod);
    }
    let mut args = kv_args("2", "1", ["0.1", "0.5"]);
    args[1] = "pod/prefill-0";
    args[3] = "pod/decode-0";
    args.extend(["--kv-extra-runs", "other-op"]);
    let run = run_pair(&cluster, &args, Duration::from_secs(240));
    let (report, kv) = kv_report(&run);
    assert_eq!(kv.bytes_moved_per_request, 4 << 20);
    assert_ranks_on_two_nodes(&report, &kv, (2, 1), EngineKind::Nixl);
    assert_eq!(report.placement.prefill.modelled_on.as_deref(), Some("pod/prefill-0"));
    assert_eq!(report.placement.decode.modelled_on.as_deref(), Some("pod/decode-0"));
    let pods: Vec<_> = paged_run_pods(&run)
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
        let spec = pod.spec.clone().unwrap_or_default();
        let env: Vec<_> = spec.containers[0].env.clone().unwrap_or_default();
        assert!(
            env.iter()
                .any(|e| e.name == "UCX_TLS" && e.value.as_deref() == Some("rc,cuda_ipc,cuda_copy,tcp")),
            "{name}: {env:?}"
        );
        gpu_limit_is(&name, &first_container_limits(&spec), "2");
    }
    let d = kv.directions.as_ref().expect("push and pull");
    assert!(d.other.check.verified && d.other.op == "write", "{d:?}");
    assert_eq!(d.connector_op.as_deref(), Some("write"), "{d:?}");
    assert_eq!(
        d.connector.as_deref(),
        Some(
            "the worker pods pod/decode-0 and pod/prefill-0 (no --recipe): SGLang disaggregation over nixl: the prefill worker writes into the decode worker's blocks"
        ),
        "{d:?}"
    );
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
    all_running(&cluster, 3);
    std::thread::sleep(Duration::from_secs(2));
    let stderr = ctrl_c(child);
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

/// SIGINT once the first repetition is measured (the coordinator in the decode pod prints each
/// step, which the `pair` process reads back): exit 130; `--output-file` holds the repetitions
/// measured so far as a report marked partial (both peers of TP1 → TP2 timed, none verified, no
/// data path known), the line names what was removed; no pod and no KV process is left. Before,
/// the run wrote nothing at all.
#[test]
fn sigint_mid_repetitions_on_two_nodes_writes_those_measured_marked_partial() {
    let Some(cluster) = cluster("sigint_mid_repetitions_on_two_nodes_writes_those_measured_marked_partial") else {
        return;
    };
    cluster.clear_requests();
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("kv.json");
    let mut args: Vec<&str> = kv_args("1", "2", ["20", "30"]);
    args.extend(["--output-file", file.to_str().unwrap()]);
    let child = pair_command(&cluster, &args)
        .env("IC_BENCH_LOG", support::kv_shared::REPETITIONS_LOGGED)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let ran = support::kv_shared::interrupt_after_first_repetition(
        child,
        nix::sys::signal::Signal::SIGINT,
        Duration::from_secs(180),
    );
    assert_eq!(ran.code, Some(130), "{}", ran.stderr);
    let last = ran.stderr.lines().rev().find(|l| !l.is_empty()).unwrap_or_default();
    assert!(
        last.starts_with("ic-bench: interrupted by SIGINT")
            && last.contains("wrote the 2 of 2 cases measured before it (marked partial)")
            && last.contains("3 rank processes")
            && last.contains("-kr-client"),
        "{}",
        ran.stderr
    );
    let text = std::fs::read_to_string(&file).expect("the --output-file");
    let report: icb_core::PairReport = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"));
    let partial = report.partial.as_ref().expect("marked partial");
    assert!(partial.reason.starts_with("interrupted by SIGINT"), "{partial:?}");
    assert_eq!(partial.planned_cases, 2);
    assert_eq!(report.verdict.status, icb_core::VerdictStatus::Interrupted);
    assert!(
        report.placement.mode.starts_with("kubernetes (ranks)"),
        "{}",
        report.placement.mode
    );
    let kv = report.kv.as_deref().expect("a kv section");
    let reps = kv.repetitions.expect("the repetitions measured");
    assert!(reps >= 1, "{kv:?}");
    assert_eq!(peer_geometry(kv), [(0, 0, 128, 16_384), (1, 0, 128, 16_384)]);
    for p in &kv.peers {
        assert_eq!(p.repetitions, reps, "{p:?}");
        assert!(p.request_ms_p50.is_some_and(|ms| ms > 0.0), "{p:?}");
        assert!(!p.verified && p.data_path.is_none(), "{p:?}");
    }
    assert_eq!(kv.ranks.len(), 3, "{:?}", kv.ranks);
    // The records came over the progress line (each rank's pid and host), none's blocks checked.
    for r in &kv.ranks {
        assert!(r.pid > 0 && !r.host.is_empty(), "{r:?}");
        assert!(r.blocks_verified == 0 && r.data_path.is_none(), "{r:?}");
    }
    assert_nothing_left(&cluster);
}

/// Issue 35 item 4: `--control tcp` on Kubernetes ranks: the transfer once more in two rank pods
/// of its own (run id `<run>-c1`, so its creates never meet the main run's pods being deleted),
/// every rank forced to TCP: caught, seen as TCP, and the "over TCP it would be" estimate is the
/// busiest rank's 4 MiB (TP1 → TP1: 128 descriptors of 32 KiB) at the control's measured rate.
/// Four pods in all, none left.
#[test]
fn a_kv_tcp_control_runs_in_pods_of_its_own_and_is_caught() {
    let Some(cluster) = cluster("a_kv_tcp_control_runs_in_pods_of_its_own_and_is_caught") else {
        return;
    };
    let mut args = kv_args("1", "1", ["0.1", "0.5"]);
    args.extend(["--control", "tcp", "--kv-extra-runs", "none"]);
    let run = run_pair(&cluster, &args, Duration::from_secs(240));
    let (report, kv) = kv_report(&run);
    assert_eq!(report.controls.len(), 1, "{:?}", report.controls);
    let c = &report.controls[0];
    assert_eq!(c.kind, icb_core::model::ControlKind::Tcp);
    assert!(c.caught, "{c:?}");
    assert!(
        !c.seen_as.is_empty()
            && c.seen_as
                .iter()
                .all(|s| matches!(s, icb_core::TransportClass::Tcp | icb_core::TransportClass::RmaEmulated)),
        "{c:?}"
    );
    let want = (4u64 << 20) as f64 / c.bandwidth_bps.expect("the control's rate") * 1e3;
    assert!(
        (kv.tcp_estimate_ms - want).abs() < 1e-9 * want.max(1.0),
        "{} vs {want}",
        kv.tcp_estimate_ms
    );
    assert!(
        kv.summary.ends_with("GB/s measured by the TCP control)"),
        "{}",
        kv.summary
    );
    let names: Vec<String> = run
        .created_pods()
        .iter()
        .filter_map(|p| p.metadata.name.clone())
        .collect();
    // The main run's two pods and the control's two (`-c1-`); with `--kv-extra-runs none`, no
    // bulk row (`-c2-`), bursts (`-c3-`) or other operation (`-c4-`).
    assert_eq!(names.len(), 4, "{names:?}");
    assert_eq!(names.iter().filter(|n| n.contains("-c1-")).count(), 2, "{names:?}");
    assert!(
        kv.bulk.is_none() && kv.bursts.is_none() && kv.directions.is_none(),
        "{kv:?}"
    );
    assert_nothing_left(&cluster);
}

/// `--gpus 1` on two DRA-only nodes (GPUs and NICs as ResourceSlices, no `nvidia.com/gpu`): each
/// ranks pod claims exactly one GPU and the NIC on its PCIe root through a template named like
/// it, asks for no extended resource, and the transfer runs; no pod, claim or template is left.
#[test]
fn explicit_gpus_on_dra_only_nodes_are_claimed_through_dra() {
    if !icb_isolate::privileged_tests_enabled("explicit_gpus_on_dra_only_nodes_are_claimed_through_dra") {
        return;
    }
    let cluster = cluster_with(
        icb_testcluster::ClusterConfig::new()
            .node(icb_testcluster::NodeConfig::dra_gpu("gpu-1", 2))
            .node(icb_testcluster::NodeConfig::dra_gpu("gpu-2", 2)),
    );
    let mut args = kv_args("2", "1", ["0.1", "0.5"]);
    args.extend(["--gpus", "1"]);
    let run = run_pair(&cluster, &args, Duration::from_secs(240));
    let (_, kv) = kv_report(&run);
    assert_eq!(kv.bytes_moved_per_request, 4 << 20);
    let pods = paged_run_pods(&run);
    assert_eq!(pods.len(), 2, "{pods:?}");
    for pod in &pods {
        let name = pod.metadata.name.clone().unwrap_or_default();
        let spec = pod.spec.clone().unwrap_or_default();
        let claims = spec.resource_claims.clone().unwrap_or_default();
        assert_eq!(claims.len(), 1, "{name}: {claims:?}");
        assert_eq!(claims[0].resource_claim_template_name.as_deref(), Some(name.as_str()));
        let limits = first_container_limits(&spec);
        assert!(
            !limits.keys().any(|k| k == "nvidia.com/gpu" || k.starts_with("rdma/")),
            "{name}: {limits:?}"
        );
    }
    // The bulk row's, the bursts' and the other operation's rank pods (`-c2-`, `-c3-`, `-c4-`)
    // claim theirs as the paged run's do.
    assert_bulk_row_ran(&run, &kv);
    let allocations = cluster.dra_allocations();
    assert_eq!(allocations.len(), 8, "{allocations:#?}");
    for a in &allocations {
        assert_eq!(a.devices.len(), 2, "one GPU and its NIC on {}: {a:?}", a.node);
    }
    assert!(cluster.resource_claims().is_empty(), "{:#?}", cluster.resource_claims());
    assert!(cluster.resource_claim_templates().is_empty());
    assert_nothing_left(&cluster);
}
