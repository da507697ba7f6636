//! Issue 40: the two sides' readiness in a pair's table (each difference with both values and its
//! fix, a side not read said) and the sweep's fleet view (the odd ones out named, the agreeing
//! values counted, the nodes not read said), both within 100 columns, and the fleet's JSON fields
//! in docs/schema.md.

use crate::common;
use crate::sweep_fixture::fixture;

use icb_core::readiness::{PairReadiness, PortReadiness, Readiness, ReadinessField};
use icb_report::{Format, View, render_pair_in, render_sweep_in};
use icb_sweep::Pair;

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

#[test]
fn the_sweep_table_names_the_odd_ones_out_of_the_fleet() {
    let mut r = fixture();
    // node-3 runs older firmware, node-2's port another MTU; node-4's pairs read nothing.
    let reads = [
        ("node-1", node("28.39.1002", 9000)),
        ("node-2", node("28.39.1002", 1500)),
        ("node-3", node("28.38.1000", 9000)),
    ];
    for (n, read) in &reads {
        let pair = Pair::new(n, "node-1");
        r.add_readiness(&pair, PairReadiness::of(Some(read.clone()), None));
    }
    let text = render_sweep_in(&r, Format::Table, View::default()).unwrap();
    fits(&text);
    assert!(
        text.contains("Fleet: NIC firmware and MTUs of 3 of 4 nodes, as their pairs read them:"),
        "{text}"
    );
    assert!(
        text.contains("  firmware mlx5_1:1: 28.39.1002 on 2 nodes; odd one out: node-3 28.38.1000"),
        "{text}"
    );
    assert!(
        text.contains("  netdev MTU mlx5_1:1: 9000 on 2 nodes; odd one out: node-2 1500"),
        "{text}"
    );
    assert!(text.contains("  not read on node-4 (not compared)"), "{text}");
    // The HTML report lists the same lines.
    let html = icb_report::Exporter::sweep(&icb_report::HtmlExporter, &r).unwrap();
    assert!(html.contains("<h2>Fleet</h2>"), "no fleet section");
    assert!(html.contains("<li>netdev MTU mlx5_1:1: 9000 on 2 nodes; odd one out: node-2 1500</li>"));
    // A fleet whose nodes showed no RDMA port has nothing to say (a sweep over veths).
    let mut bare = fixture();
    let none = Readiness {
        ports: vec![],
        gdr_mode: None,
        pcie_links: vec![],
    };
    bare.add_readiness(
        &Pair::new("node-1", "node-2"),
        PairReadiness::of(Some(none.clone()), Some(none)),
    );
    assert!(bare.fleet.is_some());
    let table = render_sweep_in(&bare, Format::Table, View::default()).unwrap();
    assert!(!table.contains("Fleet"), "{table}");
    // The JSON carries it, and every field of it is in the sweep's section of docs/schema.md.
    let json: serde_json::Value =
        serde_json::from_str(&render_sweep_in(&r, Format::Json, View::default()).unwrap()).unwrap();
    assert_eq!(json["fleet"]["not_read"], serde_json::json!(["node-4"]));
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/schema.md")).unwrap();
    let sweep = &doc[doc.find("## `ic-bench.sweep/v1`").unwrap()..];
    let sweep = &sweep[..sweep[3..].find("\n## ").unwrap_or(sweep.len())];
    for key in [
        "node_readiness",
        "fleet",
        "values",
        "field",
        "port",
        "nodes",
        "majority",
        "odd_ones_out",
        "not_read",
    ] {
        assert!(
            sweep.contains(&format!("`{key}`")),
            "docs/schema.md's sweep section lacks `{key}`"
        );
    }
}
