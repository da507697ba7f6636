//! Property tests: no parser panics on any bytes, and a node built from arbitrary probe-script
//! output still yields a full set of checks (CI runs these; cargo-fuzz goes deeper, see fuzz/).

use icb_probe::parse::*;
use icb_probe::remote::parse_snapshot;
use icb_probe::{GatherOptions, NodeExpectations, TransportEnv, detect_env, envspec, node_checks};
use proptest::prelude::*;
use std::time::Duration;

/// Text made of the tokens the parsers branch on, so generated inputs reach deep branches.
fn tokeny() -> impl Strategy<Value = String> {
    let tokens = prop::sample::select(vec![
        "\t",
        "\n",
        ":",
        " ",
        ",",
        "(",
        ")",
        "[",
        "]",
        "'",
        "=",
        "^",
        "CA '",
        "Port 1:",
        "State: ",
        "Active",
        "Initializing",
        "Physical state: ",
        "LinkUp",
        "Rate: ",
        "400",
        "Link layer: ",
        "Ethernet",
        "hca_id:",
        "port:",
        "PORT_ACTIVE (4)",
        "GID[  3]:",
        "::ffff:10.0.0.1, RoCE v2",
        "GPU0",
        "NIC0",
        "NV18",
        "PIX",
        "SYS",
        "\u{1b}[4m",
        "\u{1b}[0m",
        "NIC Legend:",
        "  NIC0: mlx5_0",
        "Legend:",
        "# Memory domain: ",
        "Component: ib",
        "memory types: host (reg), cuda (",
        "Transport: rc_mlx5",
        "Device: mlx5_0:1",
        "nvidia_peermem 16384 0",
        "Max locked memory",
        "unlimited",
        "CapEff:\t",
        "ffffffffffffffff",
        "NVRM version: ",
        "Open Kernel Module",
        "NCCL INFO ",
        "Channel 00/0 : 0[0] -> 1[1] via NET/IB/0/GDRDMA",
        "NET/IB : Using [0]mlx5_0:1/IB [RO];",
        "@@ICB FILE /sys/class/infiniband/mlx5_0/ports/1/state\n",
        "@@ICB LIST /sys/class/infiniband\n",
        "@@ICB LIST /sys/class/infiniband/mlx5_0/ports\n",
        "@@ICB END\n",
        "@@ICB TOOL ibstat\n",
        "@@ICB RC 0\n",
        "@@ICB DONE\n",
        "@@ICB ENV UCX_NET_DEVICES=",
        "@@ICB SAMPLE2 /x\n",
        "4: ACTIVE",
        "5: LinkUp",
        "mlx5_0",
        "1",
        "é",
        "\u{0}",
        "0000:0000:0000:0000:0000:ffff:0a00:0105",
        "@@ICB LIST /sys/bus/pci/devices\n",
        "0000:19:00.0",
        "@@ICB FILE /sys/bus/pci/devices/0000:19:00.0/vendor\n",
        "@@ICB FILE /sys/bus/pci/devices/0000:19:00.0/class\n",
        "0x10de",
        "0x030200",
        "-1",
        "@@ICB LINK /sys/bus/pci/devices/0000:19:00.0 /sys/devices/pci0000:16/0000:16:02.0/0000:19:00.0\n",
        "@@ICB LINK /sys/class/infiniband/mlx5_0/device /sys/devices/pci0000:16/0000:16:02.0/0000:1a:00.0\n",
        "/sys/devices/pci0000:16/",
        "/..",
    ]);
    prop::collection::vec(tokens, 0..80).prop_map(|v| v.concat())
}

fn all_parsers(s: &str) {
    let _ = parse_ibstat(s);
    let _ = icb_probe::parse::ethtool::parse_ethtool_pause("eth0", s);
    let _ = parse_ibv_devinfo(s);
    let _ = parse_ibv_devinfo_list(s, s);
    let _ = parse_topo(s);
    let _ = parse_ucx_info(s);
    let _ = parse_modules(s);
    let _ = parse_nccl_log(s);
    let _ = parse_memlock(s);
    let _ = parse_cap_eff(s);
    let _ = parse_nvidia_version(s);
    let _ = parse_kernel_release(s);
    let _ = PortState::parse(s);
    let _ = PhysState::parse(s);
    let _ = LinkLayer::parse(s);
    let _ = GidType::parse(s);
    let _ = sysfs::parse_rate(s);
    let _ = sysfs::parse_gid(s);
    let _ = sysfs::gid_ipv4(s);
    let _ = sysfs::parse_counter(s);
    let _ = envspec::parse_ucx_net_devices(s);
    let h = envspec::parse_nccl_ib_hca(s);
    let _ = h.selects("mlx5_0", 1);
    let _ = envspec::socket_ifname_matches(s, "eth0");
    if let Some(p) = icb_probe::rails::PciPath::parse(s) {
        assert!(!p.chain.is_empty());
        let _ = icb_probe::rails::relation(&p, Some(0), &p, None);
    }
}

fn snapshot_pipeline(s: &str) {
    if let Ok(snap) = parse_snapshot("pod/fuzz", &format!("{s}\n@@ICB DONE\n")) {
        let opts = GatherOptions {
            tool_timeout: Duration::from_millis(1),
            counter_interval: Duration::from_millis(1),
        };
        let facts = icb_probe::gather(&snap, &opts);
        let env = TransportEnv::new("fuzz", snap.env.clone());
        let checks = node_checks(
            &facts,
            &NodeExpectations {
                env: env.clone(),
                rdma_required: true,
            },
        );
        assert!(checks.len() >= 14);
        let _ = detect_env(&snap, &env);
        // The rail map reads the same snapshot: it may be absent or empty, never a panic, and
        // its rails are numbered 0…K-1.
        if let Some(map) = icb_probe::rails::rail_map(&snap, &facts) {
            assert!(map.rails.iter().enumerate().all(|(i, r)| r.index == i));
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..2048)) {
        let s = String::from_utf8_lossy(&bytes);
        all_parsers(&s);
        snapshot_pipeline(&s);
    }

    #[test]
    fn format_shaped_text_never_panics(s in tokeny()) {
        all_parsers(&s);
        snapshot_pipeline(&s);
    }
}
