//! The `pair --kv-shape` section: the request in TTFT terms, one row per peer (decode rank ←
//! prefill rank: descriptors, bytes, time per request, post time, bandwidth, data path,
//! verified), then the descriptor-count sweep when it ran. Fits 100 columns.

use crate::format::View;
use crate::table::new_table;
use crate::wrap::{keep_whole, push_wrapped};
use icb_core::model::BandwidthUnit;
use icb_core::units::{format_bandwidth, format_size};
use icb_core::{KvBulk, KvBursts, KvCold, KvDirections, KvOutcome};

/// Milliseconds with three significant digits or more (0.004, 7.41, 27481): sub-millisecond
/// posts and multi-second requests both stay short enough for an 80-column table.
fn ms(v: Option<f64>) -> String {
    match v {
        None => "-".into(),
        Some(v) if v >= 100.0 => format!("{v:.0}"),
        Some(v) if v >= 1.0 => format!("{v:.2}"),
        Some(v) => format!("{v:.3}"),
    }
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
            "KV transfer ({} {}, page {} tokens, {}): {} of KV per request, {} moved, {} descriptors; {}{}",
            kv.op,
            if kv.op == "read" {
                "by the decode ranks"
            } else {
                "by the prefill ranks"
            },
            kv.page_size,
            kv.kv_dtype,
            format_size(kv.kv_bytes_per_request),
            format_size(kv.bytes_moved_per_request),
            kv.descriptors_per_request,
            request_rule(kv),
            kv.slowest_over_median
                .map_or_else(String::new, |r| format!(", slowest/median {r:.2}"))
        ),
        view,
    );
    out.push_str(&peers(kv, unit, view));
    if let Some(b) = &kv.bulk {
        push_wrapped(&mut out, &bulk_line(b, unit), view);
    }
    if let Some(c) = &kv.cold {
        push_wrapped(&mut out, &cold_line(c, kv.request_ms_p50), view);
    }
    if let Some(b) = &kv.bursts {
        out.push_str(&bursts(b, unit, view));
    }
    if let Some(d) = &kv.directions {
        push_wrapped(&mut out, &directions_line(kv, d, unit), view);
    }
    if !kv.descriptor_sweep.is_empty() {
        out.push_str("descriptor-count sweep (one peer pair, the model's block size):\n");
        out.push_str(&sweep(kv, unit, view));
    }
    out
}

/// The bulk row: the same bytes as one contiguous descriptor per peer, and the paged request's
/// share of that ceiling.
fn bulk_line(b: &KvBulk, unit: BandwidthUnit) -> String {
    let head = format!(
        "bulk (the same {} as {} contiguous descriptor{}, fresh ranks)",
        format_size(b.bytes_moved_per_request),
        b.descriptors_per_request,
        if b.descriptors_per_request == 1 { "" } else { "s" }
    );
    if let Some(why) = &b.check.failure {
        return format!("{head}: not measured: {why}");
    }
    let paths = if b.check.data_paths.is_empty() {
        "-".to_string()
    } else {
        b.check.data_paths.join(", ")
    };
    let ratio = b.paged_over_bulk.map_or_else(
        || "paged ÷ bulk not known".to_string(),
        |r| {
            format!(
                "paged ÷ bulk {r:.2} (the paged request at {:.0} % of this ceiling)",
                r * 100.0
            )
        },
    );
    format!(
        "{head}: {} / {} ms p50 / p99, {} over {paths}{}; {ratio}",
        ms(b.times.request_ms_p50),
        ms(b.times.request_ms_p99),
        bw(b.times.bandwidth_bps, unit),
        if b.check.verified { "" } else { ", NOT verified" },
    )
}

/// The cold path beside the warm p50: what the first request on fresh ranks paid.
fn cold_line(c: &KvCold, warm: Option<f64>) -> String {
    let ratio = c
        .cold_over_warm
        .map_or_else(String::new, |r| format!(", {r:.1}× the warm p50 ({} ms)", ms(warm)));
    format!(
        "cold path (fresh ranks): preparing {} ms + first request {} ms = {} ms{ratio}",
        ms(Some(c.prepare_ms)),
        ms(Some(c.first_request_ms)),
        ms(Some(c.cold_ms)),
    )
}

/// The burst run: one row per burst size, the frontier marked, then where its bytes went and
/// why its sizes stop where they do.
fn bursts(b: &KvBursts, unit: BandwidthUnit, view: View) -> String {
    let mut out = String::new();
    let head = "bursts (requests in flight together on fresh ranks, each timed from the burst's start)";
    if let Some(why) = &b.failure {
        push_wrapped(&mut out, &format!("{head}: not measured: {why}"), view);
        return out;
    }
    push_wrapped(
        &mut out,
        &format!(
            "{head}; frontier = the smallest burst at ≥ 90 % of the best aggregate: {}",
            b.frontier
                .map_or_else(|| "not known".into(), |f| format!("{f} in flight"))
        ),
        view,
    );
    let mut t = new_table(
        vec![
            "In flight",
            "Burst p50 ms",
            "Aggregate",
            "Request p50 / p95 ms",
            "Frontier",
        ],
        view,
    );
    for s in &b.sizes {
        t.add_row(vec![
            s.requests.to_string(),
            ms(Some(s.burst_ms_p50)),
            bw(Some(s.aggregate_bps), unit),
            format!("{} / {}", ms(Some(s.request_ms_p50)), ms(Some(s.request_ms_p95))),
            if b.frontier == Some(s.requests) {
                "◀".into()
            } else {
                String::new()
            },
        ]);
    }
    out.push_str(&format!("{t}\n"));
    let paths = if b.data_paths.is_empty() {
        "-".to_string()
    } else {
        b.data_paths.join(", ")
    };
    let bound = b
        .bounded_by
        .as_ref()
        .map_or_else(String::new, |why| format!("; stopped before {why}"));
    push_wrapped(
        &mut out,
        &format!(
            "bursts over {paths}, {}{bound}",
            if b.verified {
                "every copy verified"
            } else {
                "NOT verified"
            }
        ),
        view,
    );
    out
}

/// Push and pull in one run: the other operation's request beside this one's, and which one the
/// serving connector uses (from the recipe or the worker pods), or why that is not known.
fn directions_line(kv: &KvOutcome, d: &KvDirections, unit: BandwidthUnit) -> String {
    let o = &d.other;
    let other = match &o.check.failure {
        Some(why) => format!("{} not measured: {why}", o.op),
        None => format!(
            "{} {} ms p50, {} over {}{}",
            o.op,
            ms(o.times.request_ms_p50),
            bw(o.times.bandwidth_bps, unit),
            if o.check.data_paths.is_empty() {
                "-".to_string()
            } else {
                o.check.data_paths.join(", ")
            },
            if o.check.verified { "" } else { ", NOT verified" },
        ),
    };
    let connector = match (&d.connector_op, &d.connector) {
        (Some(op), Some(why)) => format!("the connector uses {op} ({why})"),
        (Some(op), None) => format!("the connector uses {op}"),
        // Since issue 42 the report says why; before it, only that.
        (None, Some(why)) => format!("the connector's operation {why}"),
        (None, None) => "the connector's operation not known (no --recipe, or a connector of unknown direction)".into(),
    };
    format!(
        "push and pull: {} {} ms p50 (above); {other} (fresh ranks); {connector}",
        kv.op,
        ms(kv.request_ms_p50)
    )
}

/// What a request's time is: per rank, the end to end of synchronised repetitions over one
/// process per rank; per read, the slowest read's.
fn request_rule(kv: &KvOutcome) -> String {
    if kv.synchronised {
        format!(
            "{} rank processes, request = first post to last completion over {} synchronised repetitions, peers timed from its start",
            kv.ranks.len(),
            kv.repetitions.unwrap_or(0)
        )
    } else {
        "request = slowest peer".into()
    }
}

/// One row per peer: `d1 ← p3` is decode rank 1 reading (or receiving) prefill rank 3's blocks.
fn peers(kv: &KvOutcome, unit: BandwidthUnit, view: View) -> String {
    let mut t = new_table(
        vec![
            "Peer",
            "Descriptors",
            "p50 / p99 ms",
            "Post ms",
            "BW",
            "Data path",
            "OK",
        ],
        view,
    );
    for p in &kv.peers {
        t.add_row(vec![
            format!("d{} ← p{}", p.decode_rank, p.prefill_rank),
            format!("{} × {}", p.descriptors, format_size(p.descriptor_bytes)),
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
    // "4096 × 16 KiB" and a data path such as "cuda_ipc/cuda" stay whole (padding included);
    // "OK" is whether every block arrived intact.
    let path = kv
        .peers
        .iter()
        .filter_map(|p| p.data_path.as_ref().map(|d| d.chars().count()))
        .max()
        .unwrap_or(1);
    let path = u16::try_from(path + 2).unwrap_or(u16::MAX).min(20);
    keep_whole(&mut t, &[(1, 15), (5, path)]);
    format!("{t}\n")
}

/// One row per descriptor count.
fn sweep(kv: &KvOutcome, unit: BandwidthUnit, view: View) -> String {
    let mut s = new_table(
        vec![
            "Descriptors",
            "Block",
            "Request p50 (ms)",
            "Post ms",
            "Post share",
            "Bandwidth",
        ],
        view,
    );
    for p in &kv.descriptor_sweep {
        s.add_row(vec![
            p.descriptors.to_string(),
            format_size(p.descriptor_bytes),
            ms(p.request_ms_p50),
            ms(p.post_ms),
            p.post_share
                .map_or_else(|| "-".into(), |v| format!("{:.0} %", v * 100.0)),
            bw(p.bandwidth_bps, unit),
        ]);
    }
    format!("{s}\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use icb_core::{KvPeer, KvRowCheck, KvRowTimes, KvSweepPoint};

    #[test]
    fn the_section_names_every_peer_and_fits_100_columns() {
        let peer = |d: u32, p: u32| KvPeer {
            decode_rank: d,
            prefill_rank: p,
            descriptors: 81_920,
            descriptor_bytes: 4096,
            bytes: 335_544_320,
            request_ms_p50: Some(7.412),
            request_ms_p99: Some(9.1),
            post_ms: Some(1.2),
            bandwidth_bps: Some(45e9),
            repetitions: 40,
            verified: true,
            data_path: Some("rc_mlx5/mlx5_0:1".into()),
            failure: None,
        };
        let kv = KvOutcome {
            model: "llama-3.1-70b".into(),
            isl: 8192,
            page_size: 16,
            kv_dtype: "bf16".into(),
            prefill_tp: 8,
            decode_tp: 4,
            layers: Some(80),
            op: "read".into(),
            kv_bytes_per_request: 2_684_354_560,
            bytes_moved_per_request: 2_684_354_560,
            descriptors_per_request: 655_360,
            request_ms_p50: Some(7.412),
            request_ms_p99: Some(9.1),
            spread: Default::default(),
            slowest_over_median: Some(1.0),
            tcp_estimate_ms: 671.1,
            max_kv_ms: None,
            peers: (0..8).map(|i| peer(i / 2, i)).collect(),
            descriptor_sweep: vec![KvSweepPoint {
                descriptors: 100_000,
                descriptor_bytes: 4096,
                request_ms_p50: Some(12.5),
                post_ms: Some(7.0),
                post_share: Some(0.56),
                bandwidth_bps: Some(30e9),
                verified: true,
            }],
            summary: String::new(),
            synchronised: false,
            repetitions: None,
            ranks: Vec::new(),
            bulk: None,
            bursts: None,
            directions: None,
            cold: None,
        };
        let view = View {
            width: 100,
            wide: false,
        };
        let text = render(&kv, BandwidthUnit::GBps, view);
        assert!(text.lines().all(|l| l.chars().count() <= 100), "{text}");
        assert!(text.contains("d3 ← p7"), "{text}");
        // At 100 columns nothing is cut; at 80 the headers still are whole words.
        for word in ["Descriptors", "OK", "rc_mlx5/mlx5_0:1", "81920 × 4 KiB", "7.41 / 9.10"] {
            assert!(text.contains(word), "{word} cut in:\n{text}");
        }
        let narrow = render(&kv, BandwidthUnit::GBps, View { width: 80, wide: false });
        assert!(narrow.lines().all(|l| l.chars().count() <= 80), "{narrow}");
        for word in ["Peer", "Descriptors", "Data path", "81920 × 4 KiB"] {
            assert!(narrow.contains(word), "{word} cut in:\n{narrow}");
        }
        assert!(text.contains("81920 × 4 KiB"), "{text}");
        assert!(text.contains("56 %"), "{text}");
        assert!(text.contains("request = slowest peer"), "{text}");
        // The per-rank model says what its request time is.
        let mut ranked = kv.clone();
        ranked.synchronised = true;
        ranked.repetitions = Some(12);
        let text = render(&ranked, BandwidthUnit::GBps, view);
        let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(
            flat.contains("0 rank processes, request = first post to last completion over 12 synchronised repetitions"),
            "{text}"
        );
        assert!(text.lines().all(|l| l.chars().count() <= 100), "{text}");
        assert!(!text.contains("bulk"), "{text}");
        // The bulk row: its figures and the paged request's share of it, within 100 columns.
        ranked.bulk = Some(KvBulk {
            descriptors_per_request: 8,
            bytes_moved_per_request: 2_684_354_560,
            times: KvRowTimes {
                request_ms_p50: Some(2.96),
                request_ms_p99: Some(3.5),
                spread: Default::default(),
                repetitions: Some(5),
                bandwidth_bps: Some(905e9),
            },
            paged_over_bulk: Some(0.4),
            check: KvRowCheck {
                verified: true,
                data_paths: vec!["rc_mlx5/mlx5_0:1".into()],
                failure: None,
            },
        });
        let text = render(&ranked, BandwidthUnit::GBps, view);
        assert!(text.lines().all(|l| l.chars().count() <= 100), "{text}");
        let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
        for part in [
            "bulk (the same 2.5 GiB as 8 contiguous descriptors, fresh ranks): 2.96 / 3.50 ms p50 / p99",
            "over rc_mlx5/mlx5_0:1; paged ÷ bulk 0.40 (the paged request at 40 % of this ceiling)",
        ] {
            assert!(flat.contains(part), "{part} not in:\n{text}");
        }
        let mut failed = ranked.clone();
        if let Some(b) = failed.bulk.as_mut() {
            b.check.failure = Some("kv-rank d0 exited early".into());
        }
        let text = render(&failed, BandwidthUnit::GBps, view);
        let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
        assert!(
            flat.contains("contiguous descriptors, fresh ranks): not measured: kv-rank d0 exited early"),
            "{text}"
        );
        // The cold path beside the warm p50 (7.41 ms): 12.5 + 9.1 = 21.6 ms, 2.9×.
        ranked.cold = Some(KvCold {
            prepare_ms: 12.5,
            first_request_ms: 9.1,
            cold_ms: 21.6,
            cold_over_warm: Some(21.6 / 7.412),
        });
        let text = render(&ranked, BandwidthUnit::GBps, view);
        assert!(text.lines().all(|l| l.chars().count() <= 100), "{text}");
        let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
        let line = "cold path (fresh ranks): preparing 12.50 ms + first request 9.10 ms = 21.60 ms, 2.9× the warm p50 (7.41 ms)";
        assert!(flat.contains(line), "{text}");
        the_bursts_fit_100_columns_with_their_frontier_marked(ranked, view);
    }

    /// Bursts of 1, 2 and 4 requests of 2.5 GiB: 4 in flight reach the frontier (the best
    /// aggregate), and the sizes stopped before 8 for the run's budget.
    fn the_bursts_fit_100_columns_with_their_frontier_marked(mut kv: KvOutcome, view: View) {
        let burst = |requests: u32, burst_ms: f64, p95: f64| icb_core::KvBurst {
            requests,
            repetitions: 4,
            burst_ms_p50: burst_ms,
            burst_ms_p95: burst_ms,
            aggregate_bps: f64::from(requests) * 2_684_354_560.0 / (burst_ms / 1e3),
            request_ms_p50: burst_ms * 0.75,
            request_ms_p95: p95,
            burst_ms_min: None,
            burst_ms_max: None,
            request_ms_min: None,
            request_ms_max: None,
        };
        kv.bursts = Some(KvBursts {
            sizes: vec![burst(1, 7.41, 7.41), burst(2, 9.0, 9.0), burst(4, 14.0, 13.9)],
            frontier: Some(4),
            bounded_by: Some("8 in flight: estimated past the burst run's 1.5 s".into()),
            verified: true,
            data_paths: vec!["rc_mlx5/mlx5_0:1".into()],
            failure: None,
        });
        let text = render(&kv, BandwidthUnit::GBps, view);
        assert!(text.lines().all(|l| l.chars().count() <= 100), "{text}");
        let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
        for part in [
            "frontier = the smallest burst at ≥ 90 % of the best aggregate: 4 in flight",
            "│ 4 ┆ 14.00 ┆ 766.96 GB/s ┆ 10.50 / 13.90 ┆ ◀ │",
            "bursts over rc_mlx5/mlx5_0:1, every copy verified; stopped before 8 in flight: estimated past",
        ] {
            assert!(flat.contains(part), "{part} not in:\n{text}");
        }
        if let Some(b) = kv.bursts.as_mut() {
            *b = not_measured("kv-rank d0 exited early");
        }
        let flat = render(&kv, BandwidthUnit::GBps, view)
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        assert!(
            flat.contains("each timed from the burst's start): not measured: kv-rank d0 exited early"),
            "{flat}"
        );
        the_other_operation_and_the_connectors_fit_100_columns(kv, view);
    }

    /// The main run read in 7.41 ms; the write took 9.26 ms (290 GB/s for 2.5 GiB); the recipe's
    /// vLLM NixlConnector reads.
    fn the_other_operation_and_the_connectors_fit_100_columns(mut kv: KvOutcome, view: View) {
        kv.op = "read".into();
        let mut d = KvDirections {
            other: icb_core::KvOpRow {
                op: "write".into(),
                times: KvRowTimes {
                    request_ms_p50: Some(9.26),
                    request_ms_p99: Some(9.9),
                    spread: Default::default(),
                    repetitions: Some(3),
                    bandwidth_bps: Some(290e9),
                },
                check: KvRowCheck {
                    verified: true,
                    data_paths: vec!["rc_mlx5/mlx5_0:1".into()],
                    failure: None,
                },
            },
            connector_op: Some("read".into()),
            connector: Some("vLLM kv_connector=NixlConnector: the decode worker reads".into()),
        };
        kv.directions = Some(d.clone());
        let text = render(&kv, BandwidthUnit::GBps, view);
        assert!(text.lines().all(|l| l.chars().count() <= 100), "{text}");
        let flat = text.split_whitespace().collect::<Vec<_>>().join(" ");
        let line = "push and pull: read 7.41 ms p50 (above); write 9.26 ms p50, 290.00 GB/s over rc_mlx5/mlx5_0:1 (fresh ranks); the connector uses read (vLLM kv_connector=NixlConnector: the decode worker reads)";
        assert!(flat.contains(line), "{text}");
        d.connector_op = None;
        d.connector = None;
        d.other.check.failure = Some("kv-rank p1 exited early".into());
        kv.directions = Some(d);
        let flat = render(&kv, BandwidthUnit::GBps, view)
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        assert!(flat.contains("(above); write not measured: kv-rank p1 exited early (fresh ranks); the connector's operation not known"), "{flat}");
        // Why it is not known, as the run said it.
        let mut why = kv.directions.clone().unwrap();
        why.connector = Some("not known: no KV connector named in the worker pods pod/d-0 (no --recipe)".into());
        kv.directions = Some(why);
        let flat = render(&kv, BandwidthUnit::GBps, view)
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        assert!(flat.contains("(fresh ranks); the connector's operation not known: no KV connector named in the worker pods pod/d-0 (no --recipe)"), "{flat}");
    }

    fn not_measured(why: &str) -> KvBursts {
        KvBursts {
            sizes: Vec::new(),
            frontier: None,
            bounded_by: None,
            verified: false,
            data_paths: Vec::new(),
            failure: Some(why.into()),
        }
    }
}
