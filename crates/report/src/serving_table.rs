//! `probe serving`'s figures: one row per engine series on the report's basis (per transfer, per
//! rank, per node pair; GB/s = 10^9), with the fabric's figure for the same shape beside it; and
//! the same figures as Prometheus gauges.

use crate::format::View;
use crate::prometheus::{FloatFamily, labels};
use crate::table::new_table;
use crate::wrap::{keep_whole, push_wrapped};
use icb_core::serving::ServingReport;
use icb_core::units::format_size;
use prometheus_client::registry::Registry;

fn num(v: Option<f64>, digits: usize) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{v:.digits$}"))
}

/// The labels that tell series apart in a table (the model name and the like are in the JSON).
const SHOWN: [&str; 5] = ["tp_rank", "engine", "instance", "hostname", "agent_name"];

fn short_series(series: &str) -> String {
    let kept: Vec<&str> = series
        .split(',')
        .filter(|kv| kv.split_once('=').is_some_and(|(k, _)| SHOWN.contains(&k)))
        .collect();
    if kept.is_empty() || !series.contains('=') {
        series.to_string()
    } else {
        kept.join(",")
    }
}

/// The section, placed after the checks' table: six columns, so 80 columns hold it.
pub fn render(s: &ServingReport, view: View) -> String {
    let mut out = String::new();
    push_wrapped(&mut out, &format!("engine figures ({})", s.basis), view);
    let mut t = new_table(
        vec![
            "Engine series",
            "Bytes/transfer",
            "Descs",
            "ms (post)",
            "GB/s rank / pair",
            "Fabric GB/s (engine %)",
        ],
        view,
    );
    for f in &s.engines {
        let series = if view.wide {
            f.series.clone()
        } else {
            short_series(&f.series)
        };
        t.add_row(vec![
            format!("{} {series}\n{:.0} transfers", f.engine, f.transfers),
            f.bytes_per_transfer
                .map_or_else(|| "-".into(), |b| format_size(b.round() as u64)),
            num(f.descriptors_per_transfer, 0),
            format!("{} ({})", num(f.transfer_ms, 2), num(f.post_ms, 3)),
            format!("{} / {}", num(f.rank_gbps, 2), num(f.pair_gbps, 2)),
            f.fabric.as_ref().map_or_else(
                || "-".into(),
                |b| format!("{:.2} ({:.0} %)", b.latest_gbps, 100.0 * b.engine_ratio),
            ),
        ]);
    }
    // The longest word of each column stays whole ("nixl-telemetry", "(1.000)", "190.7").
    keep_whole(&mut t, &[(0, 18), (1, 9), (2, 6), (3, 9), (4, 8), (5, 9)]);
    out.push_str(&format!("{t}\n"));
    out
}

/// `icbench_probe_serving_gbps{engine,series,scope="rank"|"pair"|"fabric"}` and
/// `icbench_probe_serving_engine_ratio{engine,series}`.
pub fn prometheus(registry: &mut Registry, s: &ServingReport) {
    let gbps = FloatFamily::default();
    let ratio = FloatFamily::default();
    registry.register(
        "serving_gbps",
        "probe serving: an engine's KV transfer rate in GB/s (10^9): one rank, the node pair, or ic-bench's fabric figure for the same shape",
        gbps.clone(),
    );
    registry.register(
        "serving_engine_ratio",
        "probe serving: the engine's rank rate over the fabric's for the same pair and KV shape",
        ratio.clone(),
    );
    for f in &s.engines {
        let series = |scope: &str| {
            labels(&[
                ("engine", f.engine.clone()),
                ("series", f.series.clone()),
                ("scope", scope.into()),
            ])
        };
        for (scope, v) in [
            ("rank", f.rank_gbps),
            ("pair", f.pair_gbps),
            ("fabric", f.fabric.as_ref().map(|b| b.latest_gbps)),
        ] {
            if let Some(v) = v {
                gbps.get_or_create(&series(scope)).set(v);
            }
        }
        if let Some(b) = &f.fabric {
            ratio
                .get_or_create(&labels(&[("engine", f.engine.clone()), ("series", f.series.clone())]))
                .set(b.engine_ratio);
        }
    }
}
