//! The bulk row (issue 42): the paged request's bytes moved once more between the same ranks,
//! each peer's bytes as ONE contiguous descriptor, on fresh ranks of the same engine, operation,
//! memory and sides. What separates the two rows is only the paging (the descriptor count and the
//! scatter over the buffer), so the bulk request is the wire ceiling the paged one is measured
//! against: `paged_over_bulk` is the paged rate over the bulk one (CollectiveX's `kv-transfer`
//! suite reports the same pair of figures for its engines).
//!
//! Every peer's block starts at 0 of its prefill rank's buffer (a source may be read by several
//! decode ranks at once: replicas) and, on the decode side, right after the blocks of that decode
//! rank's earlier peers, so a gather's blocks never overlap at their destination and each is
//! verified against its source as in the paged run. The run is bounded as the TCP control is:
//! one warm-up and at least three measured requests, stopping once 0.3 s passed after those.

use super::control::KvRuns;
use super::{KvOp, KvPlan, KvRow};
use icb_core::{KvBulk, KvLayout, KvOutcome, KvRowCheck, KvRowTimes, KvSide};
use icb_pair::{Interrupted, PairError, PairOutcome};
use std::collections::HashMap;
use tokio_util::sync::CancellationToken;

/// Every row of `plan` as one contiguous descriptor of the same bytes (see the module's comment).
pub fn bulk_rows(plan: &KvPlan) -> Vec<KvRow> {
    let g = plan.request.geometry();
    let mut decode_filled: HashMap<u32, u64> = HashMap::new();
    plan.rows
        .iter()
        .map(|row| {
            let bytes = row.layout.bytes();
            let filled = decode_filled.entry(row.decode_rank).or_insert(0);
            let decode = KvSide {
                offset: *filled,
                stride: bytes,
                buffer_bytes: g.decode_rank_bytes,
            };
            *filled += bytes;
            let prefill = KvSide {
                offset: 0,
                stride: bytes,
                buffer_bytes: g.prefill_rank_bytes,
            };
            let (initiator, target) = match plan.op {
                KvOp::Read => (decode, prefill),
                KvOp::Write => (prefill, decode),
            };
            KvRow {
                layout: KvLayout {
                    count: 1,
                    len: bytes,
                    initiator,
                    target,
                },
                ..row.clone()
            }
        })
        .collect()
}

/// The bulk run's plan: the paged plan's engine, operation, memory and deadlines with the rows of
/// [`bulk_rows`], no descriptor sweep, no `--max-kv-ms`, bounded as the TCP control is.
pub fn bulk_plan(plan: &KvPlan) -> KvPlan {
    let mut bulk = plan.short_extra_run();
    bulk.rows = bulk_rows(plan);
    bulk
}

/// The how-manieth run the bulk one is ([`KvRuns::run`]; the TCP control is 1): on Kubernetes
/// its rank pods are `<run>-c2`.
pub const BULK_RUN: u32 = 2;

/// After a complete paged run (`outcome`) of a plan that asks for it, the bulk run on fresh
/// ranks, its row put into the report's `kv.bulk` (a bulk run that failed: the row with its
/// figures not known and why). An interruption during it ends as [`PairError::Interrupted`]
/// carrying the paged run's report as its evidence.
pub async fn add_bulk<R: KvRuns>(
    plan: &KvPlan,
    runs: &mut R,
    outcome: &mut PairOutcome,
    cancel: &CancellationToken,
) -> Result<(), PairError> {
    if !plan.bulk || outcome.report.partial.is_some() {
        return Ok(());
    }
    let Some(paged) = outcome.report.kv.as_deref() else {
        return Ok(());
    };
    let row = match runs.run(&bulk_plan(plan), BULK_RUN, cancel, &mut |_| {}).await {
        Ok(o) => {
            if !o.cleanup.is_empty() {
                outcome.cleanup = format!("{}; bulk: {}", outcome.cleanup, o.cleanup);
            }
            match o.report.kv.as_deref() {
                Some(kv) => bulk_of(kv, paged),
                None => bulk_not_measured(paged, "the bulk run's report has no KV section"),
            }
        }
        Err(PairError::Interrupted(i)) => return Err(PairError::Interrupted(Interrupted::after(outcome, i))),
        Err(e) => bulk_not_measured(paged, &e.to_string()),
    };
    tracing::info!(
        "bulk row: p50 {:?} ms, paged/bulk {:?}",
        row.times.request_ms_p50,
        row.paged_over_bulk
    );
    if let Some(kv) = outcome.report.kv.as_mut() {
        kv.bulk = Some(row);
    }
    Ok(())
}

/// The bulk row of a finished bulk run's KV section, against the paged request it is the
/// ceiling of.
pub fn bulk_of(kv: &KvOutcome, paged: &KvOutcome) -> KvBulk {
    KvBulk {
        descriptors_per_request: kv.descriptors_per_request,
        bytes_moved_per_request: kv.bytes_moved_per_request,
        times: KvRowTimes::of(kv),
        paged_over_bulk: paged_over_bulk(paged, kv),
        check: row_check(kv),
    }
}

/// How a row run on fresh ranks ended (the bulk row's, the other operation's): verified, its
/// data paths, the first peer's failure.
pub(super) fn row_check(kv: &KvOutcome) -> KvRowCheck {
    KvRowCheck {
        verified: all_verified(kv),
        data_paths: distinct_data_paths(kv),
        failure: kv.peers.iter().find_map(|p| p.failure.clone()),
    }
}

/// The data paths a run's initiators reported, distinct, in peer order (the bulk row's, the
/// bursts', the other operation's).
pub(super) fn distinct_data_paths(kv: &KvOutcome) -> Vec<String> {
    let mut data_paths: Vec<String> = Vec::new();
    for path in kv.peers.iter().filter_map(|p| p.data_path.clone()) {
        if !data_paths.contains(&path) {
            data_paths.push(path);
        }
    }
    data_paths
}

/// Whether every peer of a run arrived intact at its destination (none: not known, so not).
pub(super) fn all_verified(kv: &KvOutcome) -> bool {
    !kv.peers.is_empty() && kv.peers.iter().all(|p| p.verified)
}

/// The paged request's rate over the bulk one: the bulk p50 over the paged p50, known only when
/// both moved the same bytes and both were measured.
fn paged_over_bulk(paged: &KvOutcome, bulk: &KvOutcome) -> Option<f64> {
    if paged.bytes_moved_per_request != bulk.bytes_moved_per_request {
        return None;
    }
    let paged_ms = paged.request_ms_p50.filter(|ms| *ms > 0.0)?;
    let bulk_ms = bulk.request_ms_p50.filter(|ms| *ms > 0.0)?;
    Some(bulk_ms / paged_ms)
}

/// A bulk row that measured nothing: its figures not known, and why.
pub fn bulk_not_measured(paged: &KvOutcome, why: &str) -> KvBulk {
    KvBulk {
        descriptors_per_request: paged.peers.len() as u64,
        bytes_moved_per_request: paged.bytes_moved_per_request,
        times: KvRowTimes::default(),
        paged_over_bulk: None,
        check: KvRowCheck::failed(why),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use icb_kv::{KvDtype, KvRequest, KvShape};

    fn plan(model: &str, isl: u64, (a, b): (u32, u32), op: KvOp) -> KvPlan {
        let shape = KvShape {
            isl,
            page_size: 16,
            kv_dtype: KvDtype::Bf16,
            prefill_tp: a,
            decode_tp: b,
            max_rank_bytes: None,
        };
        let request = KvRequest::new(icb_kv::builtin(model).unwrap(), shape).unwrap();
        let pair = icb_pair::PairPlan::new(icb_core::RunSettings::full_curve(), Default::default());
        KvPlan::new(pair, request, op)
    }

    /// Llama-3.1-70B TP8 → TP4 at 64 tokens: each of the 8 reads is 640 × 4096 B = 2.5 MiB; decode
    /// rank 1 gathers prefill ranks 2 and 3, so its second block lands 2.5 MiB into its buffer.
    #[test]
    fn a_gather_lands_each_peer_after_the_last_at_its_decode_rank() {
        let paged = plan("llama-3.1-70b", 64, (8, 4), KvOp::Read);
        let rows = bulk_rows(&paged);
        assert_eq!(rows.len(), paged.rows.len());
        for (b, p) in rows.iter().zip(&paged.rows) {
            assert_eq!((b.decode_rank, b.prefill_rank), (p.decode_rank, p.prefill_rank));
            assert_eq!((b.layout.count, b.layout.len), (1, 640 * 4096));
            assert_eq!(b.layout.bytes(), p.layout.bytes());
            assert!(b.layout.is_consistent(), "{b:?}");
            // READ: the decode rank posts; the source is the start of the prefill buffer.
            assert_eq!(b.layout.target.offset, 0);
            assert_eq!(b.layout.target.buffer_bytes, p.layout.target.buffer_bytes);
            assert_eq!(b.layout.initiator.buffer_bytes, p.layout.initiator.buffer_bytes);
        }
        let offsets: Vec<u64> = rows.iter().map(|r| r.layout.initiator.offset).collect();
        let half = 640 * 4096;
        assert_eq!(offsets, [0, half, 0, half, 0, half, 0, half]);
        // WRITE swaps the sides: the prefill rank posts from its buffer's start.
        let write = bulk_rows(&plan("llama-3.1-70b", 64, (8, 4), KvOp::Write));
        assert_eq!(write[3].layout.initiator.offset, 0);
        assert_eq!(write[3].layout.target.offset, half);
        assert!(write.iter().all(|r| r.layout.is_consistent()));
    }

    /// Qwen3-235B-A22B (4 KV heads) TP2 → TP8: four decode ranks read each prefill rank (head
    /// replicas), each its own 1-head slice; the sources overlap, the destinations never do.
    #[test]
    fn replicas_read_the_same_source_into_their_own_buffers() {
        let paged = plan("qwen3-235b-a22b", 32, (2, 8), KvOp::Read);
        let rows = bulk_rows(&paged);
        assert_eq!(rows.len(), 8);
        assert!(rows.iter().all(|r| r.layout.is_consistent() && r.layout.count == 1));
        assert!(rows.iter().all(|r| r.layout.initiator.offset == 0));
        let plan = bulk_plan(&paged);
        assert!(plan.sweep.is_empty() && plan.max_kv_ms.is_none() && !plan.bulk);
        assert_eq!(plan.pair.settings.warmup_iterations, 1);
        assert_eq!(plan.engine, paged.engine);
        assert_eq!(plan.op, paged.op);
    }

    fn peer(d: u32, p: u32, bytes: u64, p50: f64, path: &str) -> icb_core::KvPeer {
        icb_core::KvPeer {
            decode_rank: d,
            prefill_rank: p,
            descriptors: 1,
            descriptor_bytes: bytes,
            bytes,
            request_ms_p50: Some(p50),
            request_ms_p99: Some(p50 * 2.0),
            post_ms: None,
            bandwidth_bps: None,
            repetitions: 3,
            verified: true,
            data_path: Some(path.into()),
            failure: None,
        }
    }

    /// Llama-3.1-8B TP2 → TP1 at 64 tokens: two reads of 4 MiB. The paged request took 4 ms, the
    /// bulk one 1 ms: the paged request reached 1/4 of the ceiling, which moved 8 MiB in 1 ms
    /// (8.388608 GB/s).
    #[test]
    fn the_bulk_row_is_the_ceiling_the_paged_request_is_measured_against() {
        let paged_plan = plan("llama-3.1-8b", 64, (2, 1), KvOp::Read);
        let mb4 = 4 << 20;
        let mut paged = super::super::report::outcome(
            &paged_plan,
            vec![peer(0, 0, mb4, 3.0, "cma/memory"), peer(0, 1, mb4, 4.0, "cma/memory")],
        );
        paged.request_ms_p50 = Some(4.0);
        let bulk_plan = bulk_plan(&paged_plan);
        let mut bulk = super::super::report::outcome(
            &bulk_plan,
            vec![peer(0, 0, mb4, 1.0, "cma/memory"), peer(0, 1, mb4, 0.5, "sysv/memory")],
        );
        bulk.request_ms_p50 = Some(1.0);
        bulk.repetitions = Some(3);
        let row = bulk_of(&bulk, &paged);
        assert_eq!(row.descriptors_per_request, 2);
        assert_eq!(row.bytes_moved_per_request, 8 << 20);
        assert_eq!(row.times.request_ms_p50, Some(1.0));
        assert_eq!(row.times.repetitions, Some(3));
        assert!((row.times.bandwidth_bps.unwrap() - 8.388608e9).abs() < 1.0, "{row:?}");
        assert_eq!(row.paged_over_bulk, Some(0.25));
        assert!(row.check.verified && row.check.failure.is_none());
        assert_eq!(row.check.data_paths, ["cma/memory", "sysv/memory"]);
        // A block that did not arrive intact: not verified; a bulk run of other bytes or one not
        // measured: no ratio (not known, never 1).
        bulk.peers[1].verified = false;
        assert!(!bulk_of(&bulk, &paged).check.verified);
        bulk.bytes_moved_per_request += 1;
        assert_eq!(bulk_of(&bulk, &paged).paged_over_bulk, None);
        bulk.bytes_moved_per_request -= 1;
        bulk.request_ms_p50 = None;
        let row = bulk_of(&bulk, &paged);
        assert_eq!((row.paged_over_bulk, row.times.bandwidth_bps), (None, None));
        let failed = bulk_not_measured(&paged, "kv-rank d0 exited early");
        assert_eq!(failed.check.failure.as_deref(), Some("kv-rank d0 exited early"));
        assert!(!failed.check.verified && failed.times.request_ms_p50.is_none());
    }
}
