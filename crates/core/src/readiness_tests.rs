use super::*;

fn roce(port: &str, mtu: u32, gid: u32, fw: &str) -> PortReadiness {
    PortReadiness {
        port: port.into(),
        pci: None,
        link_layer: Some("Ethernet".into()),
        active_mtu: Some(mtu),
        netdev_mtu: Some(9000),
        gid_index: Some(gid),
        gid_type: Some("RoCE v2".into()),
        firmware: Some(fw.into()),
    }
}

fn side(ports: Vec<PortReadiness>, gdr: Option<GdrMode>) -> Readiness {
    Readiness {
        ports,
        gdr_mode: gdr,
        pcie_links: vec![],
    }
}

#[test]
fn equal_sides_have_no_mismatch_and_nothing_uncompared() {
    let a = side(vec![roce("mlx5_1:1", 4096, 3, "28.39.1002")], Some(GdrMode::DmaBuf));
    let c = compare("prefill", &a, "decode", &a.clone());
    assert_eq!(c, ReadinessComparison::default());
}

#[test]
fn an_mtu_difference_names_both_sides_and_values() {
    let a = side(vec![roce("mlx5_1:1", 4096, 3, "28.39.1002")], Some(GdrMode::DmaBuf));
    let b = side(vec![roce("mlx5_1:1", 1024, 3, "28.39.1002")], Some(GdrMode::DmaBuf));
    let c = compare("prefill", &a, "decode", &b);
    assert_eq!(c.mismatches.len(), 1, "{c:?}");
    let m = &c.mismatches[0];
    assert_eq!(m.field, ReadinessField::ActiveMtu);
    assert_eq!(m.a, ("prefill".to_string(), "4096".to_string()));
    assert_eq!(m.b, ("decode".to_string(), "1024".to_string()));
    assert_eq!(m.to_string(), "prefill mlx5_1:1 MTU 4096, decode mlx5_1:1 MTU 1024");
    assert!(c.not_compared.is_empty(), "{:?}", c.not_compared);
}

#[test]
fn gid_index_and_gdr_mode_differences_are_each_a_mismatch() {
    let a = side(vec![roce("mlx5_0:1", 4096, 3, "28.39.1002")], Some(GdrMode::PeerMem));
    let b = side(vec![roce("mlx5_0:1", 4096, 1, "28.39.1002")], Some(GdrMode::DmaBuf));
    let c = compare("prefill", &a, "decode", &b);
    let fields: Vec<ReadinessField> = c.mismatches.iter().map(|m| m.field).collect();
    assert_eq!(fields, vec![ReadinessField::GidIndex, ReadinessField::GdrMode]);
    assert_eq!(c.mismatches[1].port, None);
    assert_eq!(
        c.mismatches[1].to_string(),
        "prefill GPUDirect mode peermem, decode GPUDirect mode dmabuf"
    );
}

#[test]
fn another_firmware_family_is_one_finding_not_two() {
    let a = side(vec![roce("mlx5_0:1", 4096, 3, "28.39.1002")], None);
    let b = side(vec![roce("mlx5_0:1", 4096, 3, "22.41.1000")], None);
    let c = compare("prefill", &a, "decode", &b);
    let fields: Vec<ReadinessField> = c.mismatches.iter().map(|m| m.field).collect();
    assert_eq!(fields, vec![ReadinessField::FirmwareFamily]);
    // Same family, other version: the version is the finding.
    let b = side(vec![roce("mlx5_0:1", 4096, 3, "28.40.1000")], None);
    let c = compare("prefill", &a, "decode", &b);
    let fields: Vec<ReadinessField> = c.mismatches.iter().map(|m| m.field).collect();
    assert_eq!(fields, vec![ReadinessField::Firmware]);
    // Neither GPUDirect mode was read: not compared, never "equal".
    assert_eq!(c.not_compared, vec!["prefill and decode GPUDirect mode not read"]);
}

#[test]
fn infiniband_ports_have_no_gid_to_compare_and_a_link_layer_difference_is_named() {
    let ib = PortReadiness {
        port: "mlx5_0:1".into(),
        link_layer: Some("InfiniBand".into()),
        active_mtu: Some(4096),
        netdev_mtu: Some(2044),
        firmware: Some("28.39.1002".into()),
        ..Default::default()
    };
    let a = side(vec![ib.clone()], Some(GdrMode::DmaBuf));
    let c = compare("prefill", &a, "decode", &a.clone());
    assert_eq!(c, ReadinessComparison::default(), "no GID on IB: nothing to compare");
    let b = side(vec![roce("mlx5_0:1", 4096, 3, "28.39.1002")], Some(GdrMode::DmaBuf));
    let c = compare("prefill", &a, "decode", &b);
    let fields: Vec<ReadinessField> = c.mismatches.iter().map(|m| m.field).collect();
    assert_eq!(fields, vec![ReadinessField::LinkLayer, ReadinessField::NetdevMtu]);
}

#[test]
fn what_a_side_did_not_read_or_does_not_have_is_not_compared() {
    let mut unread = roce("mlx5_1:1", 4096, 3, "28.39.1002");
    unread.active_mtu = None;
    let a = side(
        vec![
            roce("mlx5_1:1", 4096, 3, "28.39.1002"),
            roce("mlx5_3:1", 4096, 3, "28.39.1002"),
        ],
        Some(GdrMode::DmaBuf),
    );
    let b = side(
        vec![unread, roce("mlx5_4:1", 4096, 3, "28.39.1002")],
        Some(GdrMode::DmaBuf),
    );
    let c = compare("prefill", &a, "decode", &b);
    assert!(c.mismatches.is_empty(), "{:?}", c.mismatches);
    assert_eq!(
        c.not_compared,
        vec![
            "decode mlx5_1:1 MTU not read",
            "decode has no mlx5_3:1",
            "prefill has no mlx5_4:1"
        ]
    );
}

fn link(cw: u32, mw: u32, cs: f64, ms: f64, bridge: Option<(u32, f64)>) -> PcieLink {
    PcieLink {
        device: "mlx5_0".into(),
        pci: "0000:1a:00.0".into(),
        current_width: Some(cw),
        max_width: Some(mw),
        current_speed_gts: Some(cs),
        max_speed_gts: Some(ms),
        bridge: bridge.map(|_| "0000:18:01.0".into()),
        bridge_max_width: bridge.map(|b| b.0),
        bridge_max_speed_gts: bridge.map(|b| b.1),
    }
}

#[test]
fn link_training_against_both_ends() {
    assert_eq!(link(16, 16, 32.0, 32.0, None).training(), LinkTraining::Full);
    assert_eq!(link(8, 16, 32.0, 32.0, None).training(), LinkTraining::WidthBelow);
    assert_eq!(link(16, 16, 16.0, 32.0, None).training(), LinkTraining::SpeedBelow);
    // A Gen5 NIC in a Gen4 slot trained at Gen4: the slot caps it, nothing is broken.
    let capped = link(16, 16, 16.0, 32.0, Some((16, 16.0)));
    assert_eq!(capped.training(), LinkTraining::CappedBySlot);
    assert_eq!(capped.trainable_text(), "x16 16 GT/s");
    // Narrower than the slot allows too: downtrained.
    assert_eq!(
        link(8, 16, 16.0, 32.0, Some((16, 16.0))).training(),
        LinkTraining::WidthBelow
    );
    let mut unread = link(16, 16, 32.0, 32.0, None);
    unread.current_speed_gts = None;
    assert_eq!(unread.training(), LinkTraining::Unknown);
    assert_eq!(unread.current_text(), "x16 ? GT/s");
}

#[test]
fn readiness_json_leaves_out_what_was_not_read() {
    let r = side(
        vec![PortReadiness {
            port: "mlx5_0:1".into(),
            ..Default::default()
        }],
        None,
    );
    let v = serde_json::to_value(&r).unwrap();
    assert_eq!(
        v,
        serde_json::json!({"ports": [{"port": "mlx5_0:1"}], "pcie_links": []})
    );
    let back: Readiness = serde_json::from_value(v).unwrap();
    assert_eq!(back, r);
}
