//! The rails of `pair --rails` in the machine formats: one JUnit testcase per rail (its verdict,
//! the finding that names it), and Prometheus gauges per rail labelled with both ends' NIC name
//! and PCI address, so a dashboard can follow one physical port across runs.

use crate::junit::status_for;
use crate::prometheus::{FloatFamily, IntFamily, labels, verdict_value};
use icb_core::model::{BandwidthUnit, Status, VerdictStatus};
use icb_core::rails::nic_health::rail::RailHealth;
use icb_core::rails::{RailResult, RailsOutcome};
use icb_core::units::format_bandwidth;
use prometheus_client::registry::{Registry, Unit};
use quick_junit::TestCase;

fn rail_labels(row: &RailResult) -> Vec<(&'static str, String)> {
    vec![
        ("rail", row.index.to_string()),
        ("prefill_node", row.prefill.node.clone()),
        ("prefill_nic", row.prefill.nic.name.clone()),
        ("prefill_pci", row.prefill.nic.pci.clone().unwrap_or_default()),
        ("decode_node", row.decode.node.clone()),
        ("decode_nic", row.decode.nic.name.clone()),
        ("decode_pci", row.decode.nic.pci.clone().unwrap_or_default()),
    ]
}

/// One testcase per rail, failing with the first finding about it.
pub(crate) fn junit_cases(rails: &RailsOutcome, unit: BandwidthUnit) -> Vec<TestCase> {
    rails
        .rails
        .iter()
        .map(|row| {
            let finding = rails.findings.iter().find(|f| f.rail == Some(row.index));
            let status = match row.status {
                VerdictStatus::Fail => Status::Fail,
                VerdictStatus::Warn => Status::Warn,
                VerdictStatus::Pass => Status::Ok,
                VerdictStatus::Interrupted => Status::Skipped,
                // Not a pass: a JUnit failure, as the contract says.
                VerdictStatus::Inconclusive => Status::Fail,
            };
            let reason = finding.map_or_else(|| row.concurrent.reason.clone(), |f| f.text.clone());
            let fix = finding.and_then(|f| f.fix.as_deref());
            let mut tc = TestCase::new(
                icb_core::rails::judge::rail_name(row),
                status_for(status, &reason, fix, row.concurrent.data_path.as_deref()),
            );
            tc.set_classname("ic-bench.pair.rail");
            if let Some(bw) = row.concurrent.bandwidth_bps {
                tc.add_property(("bandwidth", format_bandwidth(bw, unit).as_str()));
            }
            if let Some(bw) = row.alone.as_ref().and_then(|a| a.bandwidth_bps) {
                tc.add_property(("bandwidth_alone", format_bandwidth(bw, unit).as_str()));
            }
            if let Some(h) = &row.health {
                tc.add_property(("nic_health", h.cell().as_str()));
            }
            if status == Status::Warn {
                tc.set_system_out(format!("warn: {reason}"));
            }
            tc
        })
        .collect()
}

/// `icbench_rail_bandwidth`, `icbench_rail_bandwidth_alone`, `icbench_rail_status`,
/// `icbench_rail_own_nic_share` (the share of the rail's bytes its own NICs counted, the lower
/// of the two sides) and `icbench_rails_aggregate`.
pub(crate) fn prometheus(registry: &mut Registry, rails: &RailsOutcome, run: &[(&'static str, String)]) {
    let bandwidth = FloatFamily::default();
    let alone = FloatFamily::default();
    let share = FloatFamily::default();
    let status = IntFamily::default();
    let aggregate = FloatFamily::default();
    let health = IntFamily::default();
    let bps = || Unit::Other("bytes_per_second".to_string());
    registry.register_with_unit(
        "rail_bandwidth",
        "Bandwidth of one rail with all rails running",
        bps(),
        bandwidth.clone(),
    );
    registry.register_with_unit(
        "rail_bandwidth_alone",
        "Bandwidth of one rail running alone",
        bps(),
        alone.clone(),
    );
    registry.register(
        "rail_own_nic_share",
        "Share of a rail's bytes counted on its own NICs (the lower side; 1 = all)",
        share.clone(),
    );
    registry.register(
        "rail_status",
        "Verdict of one rail: 0 pass, 1 warn, 2 fail",
        status.clone(),
    );
    registry.register(
        "rail_nic_counter_delta",
        "What one error or congestion counter of a rail end's NIC port moved over its phase (absent: not read)",
        health.clone(),
    );
    registry.register_with_unit(
        "rails_aggregate",
        "Sum of the rails' bandwidth, all at once",
        bps(),
        aggregate.clone(),
    );
    for row in &rails.rails {
        let mut ls: Vec<(&str, String)> = run.to_vec();
        ls.extend(rail_labels(row));
        let ls = labels(&ls);
        if let Some(b) = row.concurrent.bandwidth_bps {
            bandwidth.get_or_create(&ls).set(b);
        }
        if let Some(b) = row.alone.as_ref().and_then(|a| a.bandwidth_bps) {
            alone.get_or_create(&ls).set(b);
        }
        status.get_or_create(&ls).set(verdict_value(row.status));
        if let Some(h) = &row.health {
            health_gauges(&health, run, row, h);
        }
        let own = |side: &icb_core::rails::SideAttribution, dev: &str| {
            (side.status == icb_core::rails::AttributionStatus::Counted)
                .then(|| side.devices.iter().find(|d| d.device == dev).map_or(0.0, |d| d.share))
        };
        if let Some(a) = &row.attribution
            && let (Some(p), Some(d)) = (
                own(&a.prefill, &row.prefill.counter_device),
                own(&a.decode, &row.decode.counter_device),
            )
        {
            share.get_or_create(&ls).set(p.min(d));
        }
    }
    aggregate.get_or_create(&labels(run)).set(rails.aggregate_bps);
}

/// One `rail_nic_counter_delta` per read congestion, loss or link-fault counter of each end
/// (zero included: read and still); a counter not read has none.
fn health_gauges(family: &IntFamily, run: &[(&'static str, String)], row: &RailResult, h: &RailHealth) {
    use icb_core::rails::nic_health::Indicates;
    for (side, end) in [("prefill", &h.prefill), ("decode", &h.decode)] {
        let Some(d) = &end.deltas else { continue };
        for what in [Indicates::Congestion, Indicates::Loss, Indicates::LinkFault] {
            for (counter, by) in d.read_of(what) {
                let mut ls: Vec<(&str, String)> = run.to_vec();
                ls.extend(rail_labels(row));
                ls.extend([
                    ("side", side.to_string()),
                    ("port", end.device.clone()),
                    ("counter", counter),
                ]);
                family
                    .get_or_create(&labels(&ls))
                    .set(i64::try_from(by).unwrap_or(i64::MAX));
            }
        }
    }
}
