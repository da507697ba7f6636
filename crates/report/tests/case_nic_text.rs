//! Issue 40 item 1: the NIC counters of each case of a plain pair in the table (a `NIC` column
//! within 100 columns, a line per finding with its fix, a side not read said), `-o wide` (every
//! counter that moved), JUnit properties and Prometheus samples; a report without counters has
//! no column, and a counter not read has no sample.

use crate::common;

use icb_core::model::{PairReport, TestKind};
use icb_core::rails::nic_health::case::CaseHealth;
use icb_core::rails::nic_health::{HealthSnapshot, PortHealth};
use icb_report::{Format, View, render_pair_in};

fn port(cnp: u64, write_requests: u64) -> HealthSnapshot {
    let values = [
        ("symbol_error", 0),
        ("out_of_sequence", 0),
        ("np_cnp_sent", cnp),
        ("rx_read_requests", 0),
        ("rx_write_requests", write_requests),
    ];
    HealthSnapshot {
        ports: vec![PortHealth {
            device: "mlx5_0:1".into(),
            drivers: serde_json::from_str(r#"["ib_core", "mlx5"]"#).unwrap(),
            values: values.into_iter().map(|(n, v)| (n.to_string(), v)).collect(),
            unreadable: Default::default(),
        }],
        unreadable: None,
    }
}

/// `two_nodes_rdma` with counters on every measured case: the put cases' decode port saw its
/// WRITE requests, the 64 MiB tag case's prefill port sent 900 CNPs, and that case failed.
fn with_counters() -> PairReport {
    let mut r = common::two_nodes_rdma();
    for c in &mut r.cases {
        let big_tag = c.test == TestKind::TagBw && c.size == 64 << 20;
        let prefill_after = port(if big_tag { 900 } else { 0 }, 0);
        let decode_after = port(0, if c.test == TestKind::PutBw { 64 } else { 0 });
        let (p0, d0) = (port(0, 0), port(0, 0));
        c.nic_health = Some(Box::new(CaseHealth::read(
            (Some(&p0), Some(&prefill_after)),
            (Some(&d0), Some(&decode_after)),
        )));
        if big_tag {
            // Slow: far below the floor of a different-hosts pair.
            let m = c.measurement.as_mut().unwrap();
            m.bandwidth_bps = Some(1e6);
        }
    }
    icb_core::verdict::judge(&mut r);
    r
}

/// A 100-column terminal, where the tables are looked at.
const AT_100: View = View {
    width: 100,
    wide: false,
};

fn fits(text: &str) {
    for line in text.lines() {
        assert!(line.chars().count() <= 100, "{} columns: {line}", line.chars().count());
    }
}

#[test]
fn the_table_has_a_nic_column_and_names_the_congested_case_with_its_fix() {
    let r = with_counters();
    let text = render_pair_in(&r, Format::Table, AT_100).unwrap();
    fits(&text);
    let header = text.lines().find(|l| l.contains("Test")).unwrap();
    assert!(header.contains("NIC"), "{text}");
    assert!(text.contains("congested"), "{text}");
    let joined = text.replace("\n  ", " ");
    assert!(
        joined.contains("nic[tag_bw host→host 64 MiB]: prefill congested: np_cnp_sent +900 on mlx5_0:1; fix: check the switch's ECN marking"),
        "{text}"
    );
    // The quiet cases read `ok`; none is left blank.
    assert!(
        text.lines().any(|l| l.contains("put_bw") && l.contains(" ok ")),
        "{text}"
    );
    let wide = render_pair_in(&r, Format::Wide, View::default()).unwrap();
    assert!(
        wide.contains("nic[tag_bw host→host 64 MiB]: prefill moved: mlx5_0:1 np_cnp_sent +900"),
        "{wide}"
    );
    assert!(
        wide.contains("attribution: rx_write_requests +64 and no READ request on mlx5_0:1"),
        "{wide}"
    );
}

#[test]
fn junit_and_prometheus_carry_each_cases_counters_and_nothing_for_what_was_not_read() {
    let r = with_counters();
    let xml = render_pair_in(&r, Format::Junit, View::default()).unwrap();
    assert!(xml.contains(r#"name="nic" value="congested""#), "{xml}");
    assert!(xml.contains(r#"name="nic.prefill.congested""#), "{xml}");
    let prom = render_pair_in(&r, Format::Prometheus, View::default()).unwrap();
    let cnp: Vec<&str> = prom
        .lines()
        .filter(|l| l.starts_with("icbench_case_nic_counter_delta{") && l.contains(r#"counter="np_cnp_sent""#))
        .collect();
    assert!(
        cnp.iter()
            .any(|l| l.contains(r#"side="prefill""#) && l.ends_with(" 900")),
        "{prom}"
    );
    // Attribution counters are the rule's, not samples; unread ones have none.
    assert!(!prom.contains(r#"counter="rx_write_requests""#), "{prom}");
    assert!(!prom.contains(r#"counter="port_rcv_errors""#), "{prom}");
}

#[test]
fn a_report_without_counters_has_no_column_and_one_not_read_on_a_side_says_so() {
    let plain = common::two_nodes_rdma();
    let text = render_pair_in(&plain, Format::Table, AT_100).unwrap();
    assert!(!text.lines().any(|l| l.contains("NIC")), "{text}");
    let mut r = common::two_nodes_rdma();
    let (b, a) = (port(0, 0), port(0, 0));
    let none = HealthSnapshot::default();
    for c in &mut r.cases {
        c.nic_health = Some(Box::new(CaseHealth::read(
            (Some(&b), Some(&a)),
            (Some(&none), Some(&none)),
        )));
    }
    icb_core::verdict::judge(&mut r);
    let text = render_pair_in(&r, Format::Table, AT_100).unwrap();
    fits(&text);
    assert!(text.contains("ok (part") && !text.contains("┆ ok        │"), "{text}");
    assert!(
        text.contains("NIC counters not read: no RDMA port on the decode side"),
        "{text}"
    );
    let prom = render_pair_in(&r, Format::Prometheus, View::default()).unwrap();
    let samples: Vec<&str> = prom
        .lines()
        .filter(|l| l.starts_with("icbench_case_nic_counter_delta{"))
        .collect();
    assert!(!samples.is_empty(), "{prom}");
    assert!(samples.iter().all(|l| l.contains(r#"side="prefill""#)), "{prom}");
}
