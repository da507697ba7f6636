//! Issue 40: the two sides' readiness in a pair's table (each difference with both values and its
//! fix, a side not read said), within 100 columns.

use crate::common;

use icb_core::readiness::{PairReadiness, PortReadiness, Readiness, ReadinessField};
use icb_report::{Format, View, render_pair_in};

fn node(fw: &str, netdev_mtu: u32) -> Readiness {
    Readiness {
        ports: vec![PortReadiness {
            port: "mlx5_1:1".into(),
            link_layer: Some("Ethernet".into()),
            netdev_mtu: Some(netdev_mtu),
            firmware: Some(fw.into()),
            ..Default::default()
        }],
        gdr_mode: None,
        pcie_links: vec![],
    }
}

fn fits(text: &str) {
    for line in text.lines() {
        assert!(line.chars().count() <= 100, "{} columns: {line}", line.chars().count());
    }
}

#[test]
fn a_pairs_table_names_each_difference_with_its_fix_and_a_side_not_read() {
    let mut r = common::same_host_healthy();
    let read = PairReadiness::of(Some(node("28.39.1002", 9000)), Some(node("28.39.1002", 1500)));
    r.readiness = Some(Box::new(read));
    icb_core::verdict::judge(&mut r);
    let text = render_pair_in(&r, Format::Table, View::default()).unwrap();
    fits(&text);
    let joined = text.replace("\n  ", " ");
    let want = format!(
        "readiness: prefill mlx5_1:1 netdev MTU 9000, decode mlx5_1:1 netdev MTU 1500; fix: {}",
        ReadinessField::NetdevMtu.fix()
    );
    assert!(joined.contains(&want), "{text}");
    assert!(!text.contains("readiness not compared"), "{text}");

    r.readiness = Some(Box::new(PairReadiness::of(Some(node("28.39.1002", 9000)), None)));
    icb_core::verdict::judge(&mut r);
    let text = render_pair_in(&r, Format::Table, View::default()).unwrap();
    assert!(text.contains("readiness not compared: not read on decode"), "{text}");
    assert!(!text.contains("readiness: prefill"), "{text}");
}
