//! The `pair --kv-shape` section: the request in TTFT terms, one row per peer (decode rank ←
//! prefill rank: descriptors, bytes, time per request, post time, bandwidth, data path,
//! verified), then the descriptor-count sweep when it ran. Fits 100 columns.

use crate::format::View;
use crate::table::new_table;
use crate::wrap::push_wrapped;
use icb_core::KvOutcome;
use icb_core::model::BandwidthUnit;
use icb_core::units::{format_bandwidth, format_size};

fn ms(v: Option<f64>) -> String {
    v.map_or_else(|| "-".into(), |v| format!("{v:.3}"))
}

fn bw(v: Option<f64>, unit: BandwidthUnit) -> String {
    v.map_or_else(|| "-".into(), |v| format_bandwidth(v, unit))
}

/// The section, placed after the cases' table.
pub fn render(kv: &KvOutcome, unit: BandwidthUnit, view: View) -> String {
    let mut out = String::new();
    push_wrapped(
        &mut out,
        &format!(
            "KV transfer ({} {}, page {} tokens, {}): {} of KV per request, {} moved, {} descriptors; request = slowest peer{}",
            kv.op,
            if kv.op == "read" { "by the decode ranks" } else { "by the prefill ranks" },
            kv.page_size,
            kv.kv_dtype,
            format_size(kv.kv_bytes_per_request),
            format_size(kv.bytes_moved_per_request),
            kv.descriptors_per_request,
            kv.slowest_over_median
                .map_or_else(String::new, |r| format!(", slowest/median {r:.2}"))
        ),
        view,
    );
    let mut t = new_table(
        vec![
            "Decode ← prefill",
            "Descriptors",
            "Bytes",
            "p50 / p99 (ms)",
            "Post (ms)",
            "Bandwidth",
            "Data path",
            "Verified",
        ],
        view,
    );
    for p in &kv.peers {
        t.add_row(vec![
            format!("{} ← {}", p.decode_rank, p.prefill_rank),
            format!("{} × {}", p.descriptors, format_size(p.descriptor_bytes)),
            format_size(p.bytes),
            format!("{} / {}", ms(p.request_ms_p50), ms(p.request_ms_p99)),
            ms(p.post_ms),
            bw(p.bandwidth_bps, unit),
            p.data_path.clone().unwrap_or_else(|| "-".into()),
            match (&p.failure, p.verified) {
                (Some(f), _) => f.clone(),
                (None, true) => "yes".into(),
                (None, false) => "no".into(),
            },
        ]);
    }
    out.push_str(&t.to_string());
    out.push('\n');
    if !kv.descriptor_sweep.is_empty() {
        out.push_str("descriptor-count sweep (one peer pair, the model's block size):\n");
        let mut s = new_table(
            vec!["Descriptors", "Block", "Request p50 (ms)", "Post (ms)", "Post share", "Bandwidth"],
            view,
        );
        for p in &kv.descriptor_sweep {
            s.add_row(vec![
                p.descriptors.to_string(),
                format_size(p.descriptor_bytes),
                ms(p.request_ms_p50),
                ms(p.post_ms),
                p.post_share.map_or_else(|| "-".into(), |v| format!("{:.0} %", v * 100.0)),
                bw(p.bandwidth_bps, unit),
            ]);
        }
        out.push_str(&s.to_string());
        out.push('\n');
    }
    out
}
