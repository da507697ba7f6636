//! `probe node` and `detect-env` on replayed node roots (tests/fixtures/nodes, made by generate.py).

use icb_core::Status;
use icb_core::checks::{Check, ProbeReport};
use icb_probe::{GatherOptions, LocalSource, NodeExpectations, TransportEnv, detect_env, probe_node};
use std::path::PathBuf;
use std::time::Duration;

fn root(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/nodes")
        .join(name)
}

fn env(vars: &[(&str, &str)]) -> TransportEnv {
    TransportEnv::new("test env", vars.iter().map(|(k, v)| (k.to_string(), v.to_string())))
}

fn probe(name: &str, vars: &[(&str, &str)]) -> ProbeReport {
    let src = LocalSource::replay(&root(name));
    let opts = GatherOptions {
        tool_timeout: Duration::from_secs(5),
        counter_interval: Duration::from_secs(1),
    };
    let x = NodeExpectations {
        env: env(vars),
        rdma_required: false,
    };
    probe_node(&src, &opts, &x).0
}

fn get<'a>(r: &'a ProbeReport, id: &str) -> &'a Check {
    r.checks
        .iter()
        .find(|c| c.id == id)
        .unwrap_or_else(|| panic!("no check {id} in {r:#?}"))
}

fn status(r: &ProbeReport, id: &str) -> Status {
    get(r, id).status
}

#[test]
fn healthy_ib_node_is_trusted() {
    let r = probe(
        "healthy_ib",
        &[
            ("UCX_NET_DEVICES", "mlx5_0:1,mlx5_1:1"),
            ("NCCL_IB_HCA", "=mlx5_0,mlx5_1"),
        ],
    );
    for id in [
        "node.rdma_devs",
        "node.port_state",
        "node.port_rate",
        "node.net_devices",
        "node.gid",
        "node.gdr_mode",
        "node.gdrcopy",
        "node.memlock",
        "node.affinity",
        "node.nvlink",
        "node.ucx_tl",
        "node.ucx_gpumem",
        "node.link_errors",
    ] {
        assert_eq!(status(&r, id), Status::Ok, "{id}: {:?}", get(&r, id));
    }
    assert_eq!(status(&r, "node.efa_kernel"), Status::Skipped);
    assert_eq!(r.status, Status::Ok, "{r:#?}");
    assert_eq!(r.exit_code(), 0);
    assert!(get(&r, "node.gid").detail.contains("InfiniBand"));
    assert!(get(&r, "node.gdr_mode").detail.contains("nvidia_peermem"));
    assert!(get(&r, "node.affinity").detail.contains("GPU0→mlx5_0 PIX"));
    // A replay cannot see counters rise: the detail says it read once.
    assert!(get(&r, "node.link_errors").detail.contains("not sampled twice"));
}

#[test]
fn gid_index_forced_on_infiniband_warns() {
    let r = probe("healthy_ib", &[("NCCL_IB_GID_INDEX", "3")]);
    assert_eq!(status(&r, "node.gid"), Status::Warn);
    let r = probe("healthy_ib", &[("NCCL_IB_GID_INDEX", "-1")]);
    assert_eq!(status(&r, "node.gid"), Status::Ok);
}

#[test]
fn roce_hcas_that_disagree_on_the_gid_index() {
    let r = probe("roce_gid_disagree", &[]);
    let g = get(&r, "node.gid");
    assert_eq!(g.status, Status::Warn, "{g:?}");
    assert!(
        g.detail.contains("mlx5_0:1→3") && g.detail.contains("mlx5_1:1→5"),
        "{}",
        g.detail
    );
    // Forcing index 3 breaks mlx5_1: fail, naming it.
    let r = probe("roce_gid_disagree", &[("NCCL_IB_GID_INDEX", "3")]);
    let g = get(&r, "node.gid");
    assert_eq!(g.status, Status::Fail);
    assert!(
        g.detail.contains("mlx5_1:1") && !g.detail.contains("mlx5_0:1"),
        "{}",
        g.detail
    );
    assert_eq!(r.exit_code(), 1);
    // An index valid on both (none here besides per-HCA ones) vs a valid one for a single HCA.
    let r = probe("roce_gid_disagree", &[("UCX_IB_GID_INDEX", "5")]);
    assert_eq!(status(&r, "node.gid"), Status::Fail);
    // No tool outputs recorded: skipped with the reason, never ok.
    let t = get(&r, "node.ucx_tl");
    assert_eq!(t.status, Status::Skipped);
    assert!(t.detail.contains("ucx_info.txt"), "{}", t.detail);
}

#[test]
fn node_without_rdma() {
    let r = probe("no_rdma", &[]);
    assert_eq!(status(&r, "node.rdma_devs"), Status::Warn);
    assert_eq!(status(&r, "node.port_state"), Status::Skipped);
    assert_eq!(status(&r, "node.gdr_mode"), Status::Skipped);
    assert_eq!(status(&r, "node.memlock"), Status::Warn);
    assert!(get(&r, "node.memlock").detail.contains("8 MiB"));
    assert_eq!(status(&r, "node.nvlink"), Status::Skipped);
    assert_ne!(r.status, Status::Ok);
    // When the env says RDMA is expected, its absence fails.
    let r = probe("no_rdma", &[("NCCL_IB_HCA", "mlx5_0")]);
    assert_eq!(status(&r, "node.rdma_devs"), Status::Fail);
    assert_eq!(status(&r, "node.net_devices"), Status::Fail);
    assert_eq!(r.exit_code(), 1);
}

#[test]
fn peermem_missing_but_dmabuf_possible() {
    let r = probe("dmabuf_no_peermem", &[]);
    let g = get(&r, "node.gdr_mode");
    assert_eq!(g.status, Status::Ok, "{g:?}");
    assert!(
        g.detail.contains("DMA-BUF") && g.detail.contains("6.5.0"),
        "{}",
        g.detail
    );
    let r = probe("no_gdr", &[]);
    let g = get(&r, "node.gdr_mode");
    assert_eq!(g.status, Status::Warn);
    assert!(g.detail.contains("nvidia_peermem not loaded"), "{}", g.detail);
}

#[test]
fn ucx_net_devices_naming_a_port_that_is_not_up() {
    let r = probe("down_port", &[("UCX_NET_DEVICES", "mlx5_0:1,mlx5_1:1")]);
    let n = get(&r, "node.net_devices");
    assert_eq!(n.status, Status::Fail);
    assert!(n.detail.contains("mlx5_1:1 is INIT/LinkUp"), "{}", n.detail);
    // INIT + LinkUp is not up; the hint names the subnet manager.
    let p = get(&r, "node.port_state");
    assert_eq!(p.status, Status::Warn);
    assert!(p.hint.as_deref().unwrap_or("").contains("subnet manager"));
    assert_eq!(r.exit_code(), 1);
    assert!(r.verdict.contains("node.net_devices"));
    // Only the healthy port: passes.
    let r = probe("down_port", &[("UCX_NET_DEVICES", "mlx5_0:1")]);
    assert_eq!(status(&r, "node.net_devices"), Status::Ok);
    // A device that does not exist, and a malformed entry.
    let r = probe("down_port", &[("UCX_NET_DEVICES", "mlx5_7:1")]);
    assert!(get(&r, "node.net_devices").detail.contains("no such device"));
    let r = probe("down_port", &[("UCX_NET_DEVICES", "mlx5_0")]);
    assert!(get(&r, "node.net_devices").detail.contains("lacks :PORT"));
    let r = probe("down_port", &[("UCX_NET_DEVICES", "mlx5_0:x")]);
    assert_eq!(status(&r, "node.net_devices"), Status::Fail);
    // A GPU whose only chosen NIC is across the SMP link.
    let r = probe("down_port", &[("UCX_NET_DEVICES", "mlx5_0:1")]);
    assert_eq!(status(&r, "node.affinity"), Status::Fail);
}

#[test]
fn fix_first_names_the_down_port_not_the_affinity_it_causes() {
    // GPU1's own NIC (mlx5_1, PIX) is INIT: its traffic can only take mlx5_0 across the SMP link.
    let r = probe("down_port", &[("UCX_NET_DEVICES", "mlx5_0:1")]);
    let port = get(&r, "node.port_state");
    assert_eq!(port.status, Status::Fail, "{}", port.detail);
    assert!(port.detail.contains("GPU1→mlx5_1:1"), "{}", port.detail);
    assert!(get(&r, "node.affinity").detail.contains("see node.port_state"));
    assert_eq!(r.fix_first().first(), Some(&"node.port_state"), "{}", r.verdict);
}

#[test]
fn socket_ifname_checked_against_interfaces() {
    assert_eq!(
        status(
            &probe("healthy_ib", &[("NCCL_SOCKET_IFNAME", "eth")]),
            "node.socket_ifname"
        ),
        Status::Ok
    );
    assert_eq!(
        status(
            &probe("healthy_ib", &[("NCCL_SOCKET_IFNAME", "bond0")]),
            "node.socket_ifname"
        ),
        Status::Fail
    );
}

fn detect(name: &str, vars: &[(&str, &str)]) -> icb_probe::DetectedEnv {
    detect_env(&LocalSource::replay(&root(name)), &env(vars))
}

#[test]
fn detect_joins_every_active_hca_and_tests_the_full_prefix() {
    let d = detect("detect_multi_hca", &[]);
    assert_eq!(d.fabric, "roce");
    assert_eq!(d.get("NCCL_IB_HCA"), Some("mlx5_0,mlx5_1,mlx5_2"));
    assert_eq!(d.get("UCX_NET_DEVICES"), Some("mlx5_0:1,mlx5_1:1,mlx5_2:1"));
    assert_eq!(d.get("NVSHMEM_HCA_LIST"), Some("mlx5_0:1,mlx5_1:1,mlx5_2:1"));
    // mlx5_2's index 2 is RoCE v2 with "ffff:" inside a link-local GID: not IPv4-mapped.
    assert_eq!(
        d.ports.iter().find(|p| p.name == "mlx5_2:1").and_then(|p| p.gid_index),
        Some(3)
    );
    for k in ["NCCL_IB_GID_INDEX", "NVSHMEM_IB_GID_INDEX", "UCX_IB_GID_INDEX"] {
        assert_eq!(d.get(k), Some("3"), "{k}");
    }
    assert!(d.problems.is_empty(), "{:?}", d.problems);
    let sh = d.to_shell();
    assert!(
        sh.contains("export UCX_NET_DEVICES=mlx5_0:1,mlx5_1:1,mlx5_2:1\n"),
        "{sh}"
    );
}

#[test]
fn detect_reads_port_2() {
    let d = detect("detect_port2", &[]);
    assert_eq!(d.get("UCX_NET_DEVICES"), Some("mlx5_0:2"));
    assert_eq!(d.get("NCCL_IB_HCA"), Some("mlx5_0"));
    assert_eq!(d.get("NCCL_IB_GID_INDEX"), Some("3"));
}

#[test]
fn detect_on_infiniband_needs_no_gid_index() {
    let d = detect("healthy_ib", &[]);
    assert_eq!(d.fabric, "infiniband");
    assert_eq!(d.get("NCCL_IB_HCA"), Some("mlx5_0,mlx5_1"));
    assert_eq!(d.get("NCCL_IB_GID_INDEX"), None);
    assert!(d.notes.iter().any(|n| n.contains("no GID index needed")));
}

#[test]
fn detect_tie_prefers_index_3_and_preset_wins() {
    let d = detect("detect_tie", &[]);
    assert_eq!(d.gid_index.as_ref().map(|g| (g.index, g.counts.len())), Some((3, 2)));
    assert_eq!(d.get("NCCL_IB_GID_INDEX"), Some("3"));
    // HCAs on index 1 have no RoCE v2 IPv4 at 3: a warning that names them and says why 3
    // (KServe parity), not an error next to an export that contradicts it.
    assert!(d.problems.is_empty(), "{:?}", d.problems);
    assert!(d.found_something());
    assert_eq!(d.warnings.len(), 1, "{:?}", d.warnings);
    let w = &d.warnings[0];
    assert!(
        w.contains("1 on mlx5_2:1,mlx5_3:1; 3 on mlx5_0:1,mlx5_1:1")
            && w.contains("exporting 3, the SR-IOV convention on a tie")
            && w.contains("not RoCE v2 IPv4 on mlx5_2:1,mlx5_3:1"),
        "{w}"
    );
    assert!(d.to_shell().contains(&format!("# WARNING: {w}\n")), "{}", d.to_shell());
    assert!(!d.to_shell().contains("ERROR"), "{}", d.to_shell());
    let d = detect(
        "detect_tie",
        &[("NCCL_IB_GID_INDEX", "1"), ("UCX_NET_DEVICES", "mlx5_2:1")],
    );
    for k in ["NCCL_IB_GID_INDEX", "NVSHMEM_IB_GID_INDEX", "UCX_IB_GID_INDEX"] {
        assert_eq!(d.get(k), Some("1"), "{k}");
    }
    assert_eq!(d.gid_index.as_ref().map(|g| g.source.as_str()), Some("preset"));
    assert_eq!(d.get("UCX_NET_DEVICES"), Some("mlx5_2:1"));
    // The operator chose: no warning about the detected index they overrode.
    assert!(d.warnings.is_empty(), "{:?}", d.warnings);
}

#[test]
fn detect_disagreement_on_two_hcas_exports_3_with_a_warning() {
    let d = detect("roce_gid_disagree", &[]);
    assert_eq!(d.get("NCCL_IB_GID_INDEX"), Some("3"));
    assert!(d.problems.is_empty(), "{:?}", d.problems);
    assert!(
        d.warnings.len() == 1 && d.warnings[0].contains("not RoCE v2 IPv4 on mlx5_1:1"),
        "{:?}",
        d.warnings
    );
    // A preset that is wrong for a port stays a problem.
    let d = detect("roce_gid_disagree", &[("NCCL_IB_GID_INDEX", "5")]);
    assert!(d.problems.iter().any(|p| p.contains("mlx5_0:1")), "{:?}", d.problems);
    assert!(!d.found_something());
}

fn copy_tree(from: &std::path::Path, to: &std::path::Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &to.join(e.file_name()));
        } else {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

#[test]
fn detect_disagreement_exports_the_most_common_index_and_says_so() {
    // roce_gid_disagree plus a second HCA like mlx5_1: index 5 on two ports, 3 on one.
    let dir = tempfile::tempdir().unwrap();
    copy_tree(&root("roce_gid_disagree"), dir.path());
    let ib = dir.path().join("sys/class/infiniband");
    copy_tree(&ib.join("mlx5_1"), &ib.join("mlx5_2"));
    let d = detect_env(&LocalSource::replay(dir.path()), &env(&[]));
    assert_eq!(d.get("NCCL_IB_GID_INDEX"), Some("5"));
    assert!(d.problems.is_empty(), "{:?}", d.problems);
    assert_eq!(d.warnings.len(), 1, "{:?}", d.warnings);
    let w = &d.warnings[0];
    assert!(
        w.contains("3 on mlx5_0:1; 5 on mlx5_1:1,mlx5_2:1")
            && w.contains("exporting 5, the most common")
            && w.contains("not RoCE v2 IPv4 on mlx5_0:1"),
        "{w}"
    );
}

#[test]
fn detect_names_the_replayed_root_it_read() {
    let d = detect("no_rdma", &[]);
    let want = format!(
        "no RDMA devices in {}",
        root("no_rdma").join("sys/class/infiniband").display()
    );
    assert!(d.notes.contains(&want), "{:?}", d.notes);
}

#[test]
fn detect_uses_exact_names_when_a_prefix_would_spill() {
    let d = detect("detect_prefix", &[]);
    assert_eq!(d.get("NCCL_IB_HCA"), Some("=mlx5_1"));
    assert_eq!(d.get("UCX_NET_DEVICES"), Some("mlx5_1:1"));
}

#[test]
fn detect_with_no_rdma_exports_nothing() {
    let d = detect("no_rdma", &[]);
    assert_eq!(d.fabric, "none");
    assert!(d.exports.is_empty());
    assert!(!d.found_something());
}

/// A node described directly as probe-script output (what `--pod` returns).
fn snapshot(body: &str) -> icb_probe::Snapshot {
    icb_probe::remote::parse_snapshot("pod/t", &format!("{body}@@ICB DONE\n")).unwrap()
}

fn file(path: &str, v: &str) -> String {
    format!("@@ICB FILE {path}\n{v}\n\n@@ICB END\n")
}

fn efa_or_ib_node(dev: &str, extra: &str) -> String {
    let b = format!("/sys/class/infiniband/{dev}/ports/1");
    format!(
        "@@ICB LIST /sys/class/infiniband\n{dev}\n@@ICB END\n@@ICB LIST /sys/class/infiniband/{dev}/ports\n1\n@@ICB END\n{}{}{}{}{}{extra}",
        file(&format!("{b}/state"), "4: ACTIVE"),
        file(&format!("{b}/phys_state"), "5: LinkUp"),
        file(&format!("{b}/link_layer"), "InfiniBand"),
        file(&format!("{b}/counters/symbol_error"), "10"),
        file("/proc/sys/kernel/osrelease", "6.8.0-1015-aws"),
    )
}

fn run_snapshot(s: &icb_probe::Snapshot, vars: &[(&str, &str)]) -> ProbeReport {
    let opts = GatherOptions {
        tool_timeout: Duration::from_secs(1),
        counter_interval: Duration::from_secs(1),
    };
    probe_node(
        s,
        &opts,
        &NodeExpectations {
            env: env(vars),
            rdma_required: false,
        },
    )
    .0
}

#[test]
fn rising_error_counters_warn() {
    let b = "/sys/class/infiniband/mlx5_0/ports/1/counters/symbol_error";
    let s = snapshot(&efa_or_ib_node(
        "mlx5_0",
        &format!("@@ICB SAMPLE2 {b}\n25\n\n@@ICB END\n"),
    ));
    let r = run_snapshot(&s, &[]);
    let c = get(&r, "node.link_errors");
    assert_eq!(c.status, Status::Warn, "{c:?}");
    assert!(c.detail.contains("symbol_error +15"), "{}", c.detail);
    let s = snapshot(&efa_or_ib_node(
        "mlx5_0",
        &format!("@@ICB SAMPLE2 {b}\n10\n\n@@ICB END\n"),
    ));
    assert!(
        get(&run_snapshot(&s, &[]), "node.link_errors")
            .detail
            .contains("stable")
    );
}

#[test]
fn efa_with_get_zcopy_on_a_new_kernel_fails() {
    let s = snapshot(&efa_or_ib_node("rdmap16s27", ""));
    assert_eq!(
        status(
            &run_snapshot(&s, &[("UCX_RNDV_SCHEME", "get_zcopy")]),
            "node.efa_kernel"
        ),
        Status::Fail
    );
    assert_eq!(
        status(&run_snapshot(&s, &[("UCX_RNDV_THRESH", "0")]), "node.efa_kernel"),
        Status::Fail
    );
    assert_eq!(
        status(
            &run_snapshot(&s, &[("UCX_RNDV_SCHEME", "put_zcopy")]),
            "node.efa_kernel"
        ),
        Status::Ok
    );
}

#[test]
fn ucx_without_gpu_memory_or_rdma_transports() {
    let ucx_host_only = "@@ICB TOOL ucx_info\n# Memory domain: mlx5_0\n#     Component: ib\n#         memory types: host (access,reg,cache)\n#      Transport: rc_mlx5\n#         Device: mlx5_0:1\n# Memory domain: tcp\n#      Transport: tcp\n\n@@ICB RC 0\n";
    let s = snapshot(&efa_or_ib_node("mlx5_0", ucx_host_only));
    let r = run_snapshot(&s, &[]);
    assert_eq!(status(&r, "node.ucx_gpumem"), Status::Warn);
    // rc but no cuda_copy, no NVIDIA driver here: warn.
    assert_eq!(status(&r, "node.ucx_tl"), Status::Warn);
    let tcp_only = "@@ICB TOOL ucx_info\n# Memory domain: tcp\n#     Component: tcp\n#      Transport: tcp\n#         Device: eth0\n\n@@ICB RC 0\n";
    let r = run_snapshot(&snapshot(&efa_or_ib_node("mlx5_0", tcp_only)), &[]);
    assert_eq!(status(&r, "node.ucx_tl"), Status::Fail);
    // The same UCX on a node with no RDMA device and no GPU driver: nothing to blame UCX for.
    let r = run_snapshot(&snapshot(tcp_only), &[]);
    let tl = r.checks.iter().find(|c| c.id == "node.ucx_tl").unwrap();
    assert_eq!(tl.status, Status::Warn, "{tl:?}");
    assert!(
        tl.detail.contains("no RDMA device and no NVIDIA driver"),
        "{}",
        tl.detail
    );
}

#[test]
fn ibstat_is_the_fallback_when_sysfs_shows_no_ports() {
    let ib = "@@ICB TOOL ibstat\nCA 'mlx5_0'\n\tPort 1:\n\t\tState: Initializing\n\t\tPhysical state: LinkUp\n\t\tRate: 400\n\t\tLink layer: InfiniBand\n\n@@ICB RC 0\n";
    let r = run_snapshot(&snapshot(ib), &[]);
    let c = get(&r, "node.port_state");
    assert_eq!(c.status, Status::Fail, "{c:?}");
    assert!(
        c.detail.contains("from ibstat") && c.detail.contains("INIT/LinkUp"),
        "{}",
        c.detail
    );
}

#[test]
fn line_rate_sums_up_rdma_ports_and_device_backed_up_interfaces() {
    // Two NDR ports up: 800 Gb/s. One of two ports still initialising: only the active one counts.
    let rate = |name: &str| icb_probe::facts::line_rate_bps(&LocalSource::replay(&root(name)));
    assert_eq!(rate("healthy_ib"), Some(800e9 / 8.0));
    assert_eq!(rate("down_port"), Some(400e9 / 8.0));
    assert_eq!(rate("no_rdma"), None, "nothing rated: no ceiling from sysfs");

    // Ethernet: a 100 Gb/s NIC up, a 25 Gb/s NIC down, and a veth (no device) that says 10000.
    let dir = tempfile::tempdir().unwrap();
    let net = dir.path().join("sys/class/net");
    for (dev, state, speed, physical) in [
        ("eth0", "up", "100000", true),
        ("eth1", "down", "25000", true),
        ("veth0", "up", "10000", false),
    ] {
        let d = net.join(dev);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("operstate"), format!("{state}\n")).unwrap();
        std::fs::write(d.join("speed"), format!("{speed}\n")).unwrap();
        if physical {
            std::fs::create_dir_all(d.join("device")).unwrap();
        }
    }
    assert_eq!(
        icb_probe::facts::line_rate_bps(&LocalSource::replay(dir.path())),
        Some(100e9 / 8.0)
    );
}
