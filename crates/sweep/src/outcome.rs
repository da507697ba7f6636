//! A pair's report reduced to the sweep's [`Outcome`]: the verdict, the data paths, the
//! bandwidth a pair is scored on, and every point the reports plot.

use crate::results::{LatencyPoint, Outcome, SizePoint};

impl Outcome {
    /// The pair report reduced to what the sweep scores and plots.
    pub fn from_report(report: &icb_core::PairReport) -> Outcome {
        // A pair that measured nothing (every case skipped: `--memory cuda-cuda` in pods that
        // cannot see the driver) is an error for the scoring, blamed like any other error on the
        // node that measured nothing with most partners: never a good pair.
        if !report.cases.iter().any(|c| c.status == icb_core::CaseStatus::Measured) {
            let reason = icb_core::exit::setup_problem(report)
                .unwrap_or_else(|| format!("nothing was measured: {}", report.verdict.reason));
            return Outcome::Error { reason };
        }
        let data_paths = report
            .verdict
            .data_paths
            .iter()
            .filter_map(|c| serde_json::to_value(c).ok()?.as_str().map(String::from))
            .collect();
        let mut series = Vec::new();
        let mut latencies = Vec::new();
        let mut latency: Option<(u64, f64)> = None;
        for c in &report.cases {
            let Some(m) = &c.measurement else { continue };
            let memory = format!("{}-{}", c.memory.initiator, c.memory.target);
            if let Some(bw) = m.bandwidth_bps {
                series.push(SizePoint {
                    test: c.test,
                    size: c.size,
                    bandwidth_bps: bw,
                    memory: Some(memory.clone()),
                    direction: direction(c),
                });
            }
            if let Some(l) = &m.latency_us {
                latencies.push(LatencyPoint {
                    test: c.test,
                    size: c.size,
                    memory: Some(memory),
                    p50_us: l.p50,
                    p99_us: l.p99,
                    // From the case itself, not the report's warning lines: a report from an
                    // older pod has the cases but no typed findings.
                    quality: icb_core::quality::kinds_of(c),
                });
                if latency.is_none_or(|(size, _)| c.size < size) {
                    latency = Some((c.size, l.p50));
                }
            }
        }
        let largest = series.iter().map(|p| p.size).max();
        let bandwidth_bps = series
            .iter()
            .filter(|p| Some(p.size) == largest)
            .map(|p| p.bandwidth_bps)
            // A pair is as good as its worst direction (put pushes into decode, get pulls out of it).
            .fold(None, |acc: Option<f64>, b| Some(acc.map_or(b, |a| a.min(b))));
        Outcome::Measured {
            verdict: report.verdict.status,
            reason: report.verdict.reason.clone(),
            data_paths,
            bandwidth_bps,
            latency_us: latency.map(|(_, l)| l),
            series,
            latency: latencies,
            warnings: report.warnings.clone(),
            rails: report
                .rails
                .as_deref()
                .map(crate::rails::RailSummary::from_rails)
                .unwrap_or_default(),
            controls: report.controls.clone(),
            nic: crate::nic::PairNic::of(report).map(Box::new),
        }
    }
}

/// Which way a case's bytes went, seen from the prefill side (NIXL's vocabulary): RMA put and
/// NIXL WRITE push into decode, RMA get and NIXL READ pull out of it; tag tests have no one
/// direction to name.
fn direction(c: &icb_core::model::CaseResult) -> Option<icb_core::model::Direction> {
    c.run_by
        .direction
        .or_else(|| icb_core::model::Direction::of_test(c.test))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_report_that_measured_nothing_is_an_error_not_a_good_pair() {
        let mut report: icb_core::PairReport =
            serde_json::from_str(include_str!("../../core/tests/fixtures/pair_report.json")).unwrap();
        for c in &mut report.cases {
            c.status = icb_core::CaseStatus::Skipped;
            c.measurement = None;
            c.reason = Some("no CUDA driver".into());
        }
        icb_core::verdict::judge(&mut report);
        assert_eq!(report.verdict.status, icb_core::VerdictStatus::Inconclusive);
        let out = Outcome::from_report(&report);
        assert!(
            matches!(&out, Outcome::Error { reason } if reason.contains("nothing was measured")),
            "{out:?}"
        );
        assert!(out.failed() && out.counts());
    }

    #[test]
    fn a_report_is_reduced_to_its_worst_direction_at_the_largest_size() {
        let report: icb_core::PairReport =
            serde_json::from_str(include_str!("../../core/tests/fixtures/pair_report.json")).unwrap();
        let Outcome::Measured {
            verdict,
            bandwidth_bps,
            series,
            data_paths,
            ..
        } = Outcome::from_report(&report)
        else {
            panic!("measured");
        };
        assert_eq!(verdict, report.verdict.status);
        assert_eq!(data_paths.len(), report.verdict.data_paths.len());
        let largest = series.iter().map(|p| p.size).max();
        let worst = series
            .iter()
            .filter(|p| Some(p.size) == largest)
            .map(|p| p.bandwidth_bps)
            .reduce(f64::min);
        assert_eq!(bandwidth_bps, worst);
        assert!(series.iter().filter(|p| p.test.is_rma()).all(|p| p.direction.is_some()));
    }

    /// A pod's report, read back as JSON, gives each latency point the kinds of its case's
    /// quality findings, from the case itself: the sweep decides on them, not on the warning
    /// text (which this report, as an older pod wrote it, does not even carry).
    #[test]
    fn a_latency_its_pair_calls_implausible_is_kept_distrusted() {
        use icb_core::quality::QualityKind;
        let mut report: icb_core::PairReport =
            serde_json::from_str(include_str!("../../core/tests/fixtures/pair_report.json")).unwrap();
        assert!(report.warnings.is_empty());
        let trusted = Outcome::from_report(&report);
        assert_eq!(trusted.latency(), Some(1.3535));
        assert!(trusted.distrusted_latency().is_none());
        let lat = report.cases[0]
            .measurement
            .as_mut()
            .unwrap()
            .latency_us
            .as_mut()
            .unwrap();
        (lat.p50, lat.p99) = (8000.0, 8100.0);
        let json = serde_json::to_string(&report).unwrap();
        let back: icb_core::PairReport = serde_json::from_str(&json).unwrap();
        let out = Outcome::from_report(&back);
        assert_eq!(out.latency(), None, "not a figure to judge a node by");
        let (point, kind) = out.distrusted_latency().unwrap();
        assert_eq!((point.p50_us, kind), (8000.0, QualityKind::ImplausibleLatency));
    }

    /// One aligned rail of a gpu-1 → gpu-2 pair at `gbps`, as `pair --rails` records it.
    fn rail(i: usize, gbps: f64) -> icb_core::rails::RailResult {
        use icb_core::model::VerdictStatus;
        use icb_core::rails::{NicRef, RailEnd, RailResult, RailRun};
        let end = |node: &str, pci: Option<String>| RailEnd {
            rail: i,
            node: node.into(),
            gpu: None,
            nic: NicRef {
                name: format!("mlx5_{i}"),
                pci,
                port: 1,
                state: "ACTIVE/LinkUp".into(),
                rate_gbps: Some(400.0),
                link_layer: None,
                netdevs: vec![],
                numa_node: None,
            },
            relation: None,
            ucx_net_devices: format!("mlx5_{i}:1"),
            counter_device: format!("mlx5_{i}:1"),
        };
        let run = RailRun {
            bandwidth_bps: Some(gbps * 1e9),
            status: VerdictStatus::Pass,
            reason: "ok".into(),
            app_bytes: 1 << 30,
            data_path: None,
            error: None,
        };
        RailResult {
            index: i,
            prefill: end("gpu-1", Some(format!("0000:{:02x}:00.0", 0x1a + 0x10 * i))),
            decode: end("gpu-2", None),
            alone: (gbps < 20.0).then(|| run.clone()),
            concurrent: run,
            line_rate_share: None,
            attribution: None,
            health: None,
            mismatches: Vec::new(),
            status: VerdictStatus::Pass,
        }
    }

    /// mlx5_2:1's reading with `cnps` CNPs handled and as many READ requests.
    fn port_reading(cnps: u64) -> icb_core::rails::nic_health::HealthSnapshot {
        use icb_core::rails::nic_health::{Driver, HealthSnapshot, PortHealth};
        let values = [
            ("rp_cnp_handled", cnps),
            ("rx_read_requests", cnps),
            ("out_of_sequence", 0),
        ];
        HealthSnapshot {
            ports: vec![PortHealth {
                device: "mlx5_2:1".into(),
                drivers: vec![Driver::IbCore, Driver::Mlx5],
                values: values.iter().map(|(n, v)| (n.to_string(), *v)).collect(),
                unreadable: Default::default(),
            }],
            unreadable: None,
        }
    }

    #[test]
    fn a_rails_report_keeps_each_rail_with_its_nics_status_and_finding_kinds() {
        use icb_core::model::{BandwidthUnit, VerdictStatus};
        use icb_core::rails::{RailFindingKind, RailPattern, judge::judge_rails};
        let mut report: icb_core::PairReport =
            serde_json::from_str(include_str!("../../core/tests/fixtures/pair_report.json")).unwrap();
        let mut rows: Vec<_> = (0..4).map(|i| rail(i, if i == 2 { 11.8 } else { 45.0 })).collect();
        // Rail 3's NIC health was read on neither side: the sweep keeps "not read", never ok.
        let none = icb_core::rails::nic_health::HealthSnapshot::unread("no agent");
        rows[3].health = Some(icb_core::rails::nic_health::rail::RailHealth::read(
            icb_core::rails::Phase::Concurrent,
            ("mlx5_3:1", "mlx5_3:1"),
            (&none, &none),
            (&none, &none),
        ));
        // Rail 2's prefill NIC counted CNPs (and the READ requests every RDMA rail counts).
        rows[2].health = Some(icb_core::rails::nic_health::rail::RailHealth::read(
            icb_core::rails::Phase::Alone,
            ("mlx5_2:1", "mlx5_2:1"),
            (&port_reading(0), &port_reading(0)),
            (&port_reading(120), &port_reading(0)),
        ));
        report.rails = Some(Box::new(judge_rails(
            RailPattern::Aligned,
            rows,
            0.2,
            BandwidthUnit::GBps,
        )));
        let out = Outcome::from_report(&report);
        let rails = out.rails();
        assert_eq!(rails.len(), 4);
        let slow = &rails[2];
        assert_eq!(slow.status, VerdictStatus::Fail);
        assert!(slow.findings.contains(&RailFindingKind::BelowMedian), "{slow:?}");
        assert!(slow.bad() && !rails[0].bad());
        assert_eq!((slow.bandwidth_bps, slow.alone_bps), (Some(11.8e9), Some(11.8e9)));
        assert_eq!(rails[3].health.as_deref(), Some("not read"));
        let moved = crate::MovedCounters {
            prefill: vec![("rp_cnp_handled".into(), 120)],
            decode: vec![],
        };
        assert_eq!(slow.counters, Some(moved), "the CNPs, not the request counters");
        assert_eq!(rails[3].counters, None, "nothing read: nothing moved");
        assert_eq!(
            rails[0].health, None,
            "no health in the pair report: none in the sweep's"
        );
        assert_eq!(slow.prefill.pci.as_deref(), Some("0000:3a:00.0"));
        assert_eq!(slow.prefill.key(), "0000:3a:00.0");
        // Without a PCI address the NIC's name is its key.
        assert_eq!((slow.decode.nic.as_str(), slow.decode.key()), ("mlx5_2", "mlx5_2"));
        // A pair measured without rails keeps none, and writes none.
        report.rails = None;
        let plain = Outcome::from_report(&report);
        assert!(plain.rails().is_empty());
        assert!(!serde_json::to_string(&plain).unwrap().contains("\"rails\""));
    }
}
