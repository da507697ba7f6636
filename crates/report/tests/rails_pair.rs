//! The per-rail view of `pair --rails` in every format: the table fits 80 and 100 columns and
//! names the bad rail first, JUnit has a testcase per rail, Prometheus a gauge per rail with
//! both NICs' PCI addresses.

use crate::common;

use icb_core::model::{BandwidthUnit, PairReport, VerdictStatus};
use icb_core::rails::judge::judge_rails;
use icb_core::rails::{
    Attribution, AttributionStatus, DeviceShare, NicRef, Phase, RailEnd, RailPattern, RailResult, RailRun,
    SideAttribution,
};
use icb_report::{Format, View, render_pair_in};

fn end(rail: usize, node: &str) -> RailEnd {
    RailEnd {
        rail,
        node: node.into(),
        gpu: Some(icb_core::rails::GpuRef {
            ordinal: rail,
            pci: format!("0000:{:02x}:00.0", 0x19 + 0x10 * rail),
            numa_node: Some(0),
        }),
        nic: NicRef {
            name: format!("mlx5_{rail}"),
            pci: Some(format!("0000:{:02x}:00.0", 0x1a + 0x10 * rail)),
            port: 1,
            state: "ACTIVE/LinkUp".into(),
            rate_gbps: Some(400.0),
            link_layer: Some("InfiniBand".into()),
            netdevs: vec![],
            numa_node: Some(0),
        },
        relation: Some(icb_core::rails::PcieRelation::Pix),
        ucx_net_devices: format!("mlx5_{rail}:1"),
        counter_device: format!("mlx5_{rail}:1"),
    }
}

fn side(dev: &str, share: f64) -> SideAttribution {
    SideAttribution {
        status: AttributionStatus::Counted,
        devices: vec![DeviceShare {
            device: dev.into(),
            pci: None,
            rail: None,
            bytes: (share * 1e9) as u64,
            share,
        }],
        note: None,
    }
}

fn rails_report() -> PairReport {
    let mut r = common::two_nodes_rdma();
    let rows: Vec<RailResult> = (0..8)
        .map(|i| {
            let gbps = if i == 5 { 11.8 } else { 44.0 + (i % 3) as f64 };
            let run = RailRun {
                bandwidth_bps: Some(gbps * 1e9),
                status: VerdictStatus::Pass,
                reason: "ok".into(),
                app_bytes: 1_000_000_000,
                data_path: Some(format!("rc_mlx5/mlx5_{i}:1")),
                error: None,
            };
            RailResult {
                index: i,
                prefill: end(i, "gpu-1"),
                decode: end(i, "gpu-2"),
                alone: (i == 5).then(|| run.clone()),
                concurrent: run,
                line_rate_share: None,
                attribution: Some(Attribution {
                    phase: if i == 5 { Phase::Alone } else { Phase::Concurrent },
                    app_bytes: 1_000_000_000,
                    prefill: side(&format!("mlx5_{i}:1"), 1.02),
                    decode: side(&format!("mlx5_{i}:1"), 1.02),
                }),
                health: None,
                mismatches: Vec::new(),
                status: VerdictStatus::Pass,
            }
        })
        .collect();
    let outcome = judge_rails(RailPattern::Aligned, rows, 0.2, BandwidthUnit::GBps);
    r.verdict.status = VerdictStatus::Fail;
    r.verdict.reason = outcome.findings[0].text.clone();
    r.verdict.hint = outcome.findings[0].fix.clone();
    r.rails = Some(Box::new(outcome));
    r
}

#[test]
fn the_rail_table_fits_the_terminal_and_names_the_bad_rail_first() {
    let r = rails_report();
    for width in [80u16, 100] {
        // Figures keep their units on their line (no-break spaces); compare as a reader sees it.
        let text = render_pair_in(&r, Format::Table, View { width, wide: false })
            .unwrap()
            .replace('\u{a0}', " ");
        for line in text.lines() {
            assert!(line.chars().count() <= width as usize, "{width}: {line:?}\n{text}");
        }
        assert!(
            text.starts_with("FAIL: rail 5: gpu-1:GPU5 mlx5_5 (0000:6a:00.0)"),
            "{text}"
        );
        assert!(text.contains("0000:6a:00.0"), "NIC name and PCI in the row: {text}");
        assert!(text.contains("aggregate 324.80 GB/s over 8 rails"), "{text}");
        assert!(text.contains("FAIL rail 5:"), "{text}");
        assert!(!text.contains("tag_lat"), "cases only with -o wide: {text}");
    }
    let wide = render_pair_in(&r, Format::Table, View { width: 100, wide: true }).unwrap();
    assert!(wide.contains("0000:6a:00.0"), "{wide}");
    assert!(wide.contains("Bandwidth"), "-o wide adds the cases: {wide}");
}

#[test]
fn junit_and_prometheus_carry_each_rail() {
    let r = rails_report();
    let xml = render_pair_in(&r, Format::Junit, View::default()).unwrap();
    assert_eq!(xml.matches("classname=\"ic-bench.pair.rail\"").count(), 8, "{xml}");
    assert_eq!(xml.matches("<failure").count(), 1, "only rail 5 fails: {xml}");
    let prom = render_pair_in(&r, Format::Prometheus, View::default()).unwrap();
    let rail5: Vec<&str> = prom
        .lines()
        .filter(|l| l.starts_with("icbench_rail_status{") && l.contains("rail=\"5\""))
        .collect();
    assert_eq!(rail5.len(), 1, "{prom}");
    assert!(
        rail5[0].contains("prefill_pci=\"0000:6a:00.0\"") && rail5[0].ends_with(" 2"),
        "{}",
        rail5[0]
    );
    assert!(prom.contains("icbench_rails_aggregate_bytes_per_second"), "{prom}");
    let json = render_pair_in(&r, Format::Json, View::default()).unwrap();
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["rails"]["rails"][5]["status"], "fail");
    assert_eq!(v["rails"]["findings"][0]["kind"], "below_median");
}

/// The report of [`rails_report`] with every rail's NIC health read: rail 5's port sent CNPs
/// (congested), rail 2's saw sequence errors (lossy), the others still; rail 7's decode side
/// was not read.
fn health_report() -> PairReport {
    use icb_core::rails::nic_health::rail::RailHealth;
    use icb_core::rails::nic_health::{Driver, HealthSnapshot, PortHealth};
    let reading = |moved: &[(usize, &str, u64)]| HealthSnapshot {
        ports: (0..8)
            .map(|k| PortHealth {
                device: format!("mlx5_{k}:1"),
                drivers: vec![Driver::IbCore, Driver::Mlx5],
                values: ["np_cnp_sent", "packet_seq_err", "symbol_error"]
                    .iter()
                    .map(|n| {
                        let by = moved.iter().find(|(r, m, _)| *r == k && m == n).map_or(0, |m| m.2);
                        (n.to_string(), 10 + by)
                    })
                    .collect(),
                unreadable: Default::default(),
            })
            .collect(),
        unreadable: None,
    };
    let before = reading(&[]);
    let after = reading(&[(5, "np_cnp_sent", 4096), (2, "packet_seq_err", 12)]);
    let gone = HealthSnapshot::unread("the agent did not answer");
    let mut r = rails_report();
    let mut rails = *r.rails.take().unwrap();
    for row in &mut rails.rails {
        let name = format!("mlx5_{}:1", row.index);
        let decode_after = if row.index == 7 { &gone } else { &after };
        row.health = Some(RailHealth::read(
            Phase::Concurrent,
            (&name, &name),
            (&before, &before),
            (&after, decode_after),
        ));
    }
    let outcome = judge_rails(RailPattern::Aligned, rails.rails, 0.2, BandwidthUnit::GBps);
    r.verdict.reason = outcome.findings[0].text.clone();
    r.verdict.hint = outcome.findings[0].fix.clone();
    r.rails = Some(Box::new(outcome));
    r
}

#[test]
fn the_nic_health_column_junit_property_and_prometheus_gauges_name_each_rails_counters() {
    let r = health_report();
    for width in [80u16, 100] {
        let text = render_pair_in(&r, Format::Table, View { width, wide: false })
            .unwrap()
            .replace('\u{a0}', " ");
        for line in text.lines() {
            assert!(line.chars().count() <= width as usize, "{width}: {line:?}\n{text}");
        }
        assert!(text.contains("Health"), "{text}");
        assert!(
            text.starts_with("FAIL: rail 5: gpu-1:GPU5 mlx5_5 (0000:6a:00.0)"),
            "{text}"
        );
        assert!(text.contains("congested: np_cnp_sent +4096 on mlx5_5:1"), "{text}");
        let row = |k: usize| {
            text.lines()
                .find(|l| l.starts_with(&format!("│ {k} ")))
                .unwrap_or_else(|| panic!("rail {k}: {text}"))
        };
        assert!(row(5).contains("congested"), "{}", row(5));
        assert!(row(2).contains("lossy"), "{}", row(2));
        assert!(row(0).contains(" ok "), "{}", row(0));
        assert!(
            row(7).contains(" ok (part"),
            "rail 7's decode side was not read: {}",
            row(7)
        );
    }
    let xml = render_pair_in(&r, Format::Junit, View::default()).unwrap();
    assert!(xml.contains("name=\"nic_health\" value=\"congested\""), "{xml}");
    assert!(xml.contains("name=\"nic_health\" value=\"lossy\""), "{xml}");
    let prom = render_pair_in(&r, Format::Prometheus, View::default()).unwrap();
    let gauge = |rail: &str, side: &str, counter: &str| {
        prom.lines()
            .find(|l| {
                l.starts_with("icbench_rail_nic_counter_delta{")
                    && l.contains(&format!("rail=\"{rail}\""))
                    && l.contains(&format!("side=\"{side}\""))
                    && l.contains(&format!("counter=\"{counter}\""))
            })
            .map(|l| l.rsplit(' ').next().unwrap().to_string())
    };
    assert_eq!(gauge("5", "prefill", "np_cnp_sent").as_deref(), Some("4096"), "{prom}");
    assert_eq!(
        gauge("0", "decode", "symbol_error").as_deref(),
        Some("0"),
        "read and still: {prom}"
    );
    assert_eq!(gauge("7", "decode", "np_cnp_sent"), None, "not read: no gauge, never 0");
    let v: serde_json::Value =
        serde_json::from_str(&render_pair_in(&r, Format::Json, View::default()).unwrap()).unwrap();
    assert_eq!(
        v["rails"]["rails"][5]["health"]["prefill"]["findings"][0]["kind"],
        "congested"
    );
    assert_eq!(v["rails"]["findings"][0]["kind"], "congested");
}

/// The rails table's cells are never broken mid-word at 80 or 100 columns (a 100-column run
/// printed `NIC count/ers`, `(alon/e)`, `0.023/6` and `0.2/%`): each column gets its longest
/// word first; below the width all eleven need, the PCI addresses give way, then the PCIe
/// relation and the line-rate share, then the alone figure.
#[test]
fn the_rail_table_breaks_no_word_at_80_or_100_columns() {
    let mut r = health_report();
    let rails = r.rails.as_mut().unwrap();
    for row in &mut rails.rails {
        row.line_rate_share = Some(0.002);
        if row.index == 5 {
            if let Some(alone) = row.alone.as_mut() {
                alone.bandwidth_bps = Some(0.0236e9);
            }
            let a = row.attribution.as_mut().unwrap();
            a.decode = side("mlx5_5:1", 1.18);
            a.prefill = side("mlx5_5:1", 1.19);
        }
    }
    for width in [80u16, 100] {
        let text = render_pair_in(&r, Format::Table, View { width, wide: false }).unwrap();
        let table: Vec<&str> = text.lines().filter(|l| l.starts_with('│')).collect();
        let words: Vec<&str> = table
            .iter()
            .flat_map(|l| l.split(|c: char| c.is_whitespace() || c == '│' || c == '┆'))
            .filter(|w| !w.is_empty())
            .collect();
        for whole in ["counters", "(alone)", "congested", "lossy", "Verdict", "Health"] {
            assert!(words.contains(&whole), "{width}: {whole:?} is broken:\n{text}");
        }
        for line in text.lines() {
            assert!(line.chars().count() <= width as usize, "{width}: {line:?}\n{text}");
        }
        if width == 100 {
            assert!(words.contains(&"Line"), "the line share at 100:\n{text}");
            assert!(words.contains(&"0.0236"), "the alone figure at 100:\n{text}");
            assert!(
                table.iter().any(|l| l.contains("0.2\u{a0}%")),
                "the line share on one line:\n{text}"
            );
        } else {
            assert!(
                !words.contains(&"Line") && !words.contains(&"Alone"),
                "80: the line share and the alone figure give way (the findings say them):\n{text}"
            );
        }
    }
}
