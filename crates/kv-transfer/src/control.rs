//! `pair --kv-shape --control tcp` (issue 35): after the measured ranks, the same geometry once
//! more on fresh ranks on the same sides, with UCX forced to TCP in every rank's process
//! (`UCX_TLS=tcp`, which NIXL's UCX reads as well). It is caught when every peer's data path (each
//! initiator rank's own report, classified as everywhere else) is carried by TCP; not caught, the
//! run is inconclusive. Caught, its per-rank rate replaces the assumed 1 GB/s of the "over TCP it
//! would be" estimate, and a fast main path must beat it by the plain pair's margin.
//!
//! The control is bounded by its repetitions, not by its shape: it keeps every rank, every peer
//! and every descriptor layout of the main run (so every rank's data path is classified, and its
//! figure compares a whole request with a whole request of the same bytes), and runs one warm-up
//! and at least three measured requests, stopping once 0.3 s passed after those three. Its cost is
//! the ranks' start-up plus about four requests at TCP speed: under 2 s for a test geometry here;
//! a request of gigabytes costs a few seconds per request, which is what such a request costs
//! over TCP and what the estimate is about.

use super::KvPlan;
use super::report::TcpRate;
use icb_core::model::{ControlKind, ControlResult, PairReport};
use icb_core::verdict::controls::{control_not_run, judge_tcp_control_as};
use icb_pair::{Interrupted, PairError, PairOutcome};
use tokio_util::sync::CancellationToken;

/// Runs a KV plan on ranks of its own, on the sides the seam places them: the main run and then
/// each control ([`run_kv_with_controls`]). `run` is the how-manieth run after the first (0: the
/// main run), for a seam that names what it creates per run (Kubernetes pods: `<run>-c<n>`).
#[allow(async_fn_in_trait)]
pub trait KvRuns {
    async fn run(
        &mut self,
        plan: &KvPlan,
        run: u32,
        cancel: &CancellationToken,
        progress: &mut super::KvProgress<'_>,
    ) -> Result<PairOutcome, PairError>;
}

/// The TCP control's plan: the main plan's rows and deadlines, no descriptor sweep and no
/// `--max-kv-ms`, one warm-up and a few repetitions (see the module's comment), every rank with
/// `TLS=tcp` (or, for a test, [`icb_pair::controls::TEST_CONTROL_TLS_ENV`]'s value).
pub fn tcp_control_plan(plan: &KvPlan) -> KvPlan {
    let mut control = plan.short_extra_run();
    let tls = std::env::var(icb_pair::controls::TEST_CONTROL_TLS_ENV).unwrap_or_else(|_| "tcp".into());
    control.pair.ucx_config.retain(|(k, _)| k != "TLS");
    control.pair.ucx_config.push(("TLS".into(), tls));
    control
}

/// The main run, then the bulk row ([`super::bulk`]), the bursts ([`super::bursts`]) and the
/// other operation ([`super::directions`]) when the plan asks for them, then (when the
/// main run ended with a complete report and `kinds` asks for it) the TCP control on fresh
/// ranks, its result put into the report's `controls` and the report judged again ([`apply_tcp_control`]). Other kinds are not KV controls: `pair` refuses them before
/// anything runs. An interruption during the control ends as [`PairError::Interrupted`] carrying
/// the main run's report as its evidence.
pub async fn run_kv_with_controls<R: KvRuns>(
    kinds: &[ControlKind],
    plan: &KvPlan,
    runs: &mut R,
    cancel: &CancellationToken,
    progress: &mut super::KvProgress<'_>,
) -> Result<PairOutcome, PairError> {
    let mut outcome = runs.run(plan, 0, cancel, progress).await?;
    super::bulk::add_bulk(plan, runs, &mut outcome, cancel).await?;
    super::bursts::add_bursts(plan, runs, &mut outcome, cancel).await?;
    super::directions::add_other_op(plan, runs, &mut outcome, cancel).await?;
    if !kinds.contains(&ControlKind::Tcp) || outcome.report.partial.is_some() {
        return Ok(outcome);
    }
    let control = tcp_control_plan(plan);
    let result = match runs.run(&control, 1, cancel, &mut |_| {}).await {
        Ok(o) => {
            if !o.cleanup.is_empty() {
                outcome.cleanup = format!("{}; tcp control: {}", outcome.cleanup, o.cleanup);
            }
            judge_kv_tcp_control(&o.report, &outcome.report)
        }
        // The main run finished: its report is the evidence to write out.
        Err(PairError::Interrupted(i)) => return Err(PairError::Interrupted(Interrupted::after(&outcome, i))),
        Err(e) => control_not_run(ControlKind::Tcp, &e.to_string()),
    };
    tracing::info!("control tcp: caught={} ({})", result.caught, result.detail);
    apply_tcp_control(&mut outcome.report, plan.rows.len(), result);
    Ok(outcome)
}

/// The busiest rank's rate in one request of `report` (bytes/s): its bytes over the request's
/// p50, the basis the TCP estimate is on.
fn request_rate(report: &PairReport) -> Option<f64> {
    let kv = report.kv.as_ref()?;
    let secs = kv.request_ms_p50.filter(|ms| *ms > 0.0)? / 1e3;
    Some(super::report::busiest_rank_bytes(&kv.peers) as f64 / secs)
}

/// Judges the control's report: caught when every case it measured (one per peer, each with its
/// initiator rank's data path) is classified as carried by TCP; its figure and the main run's
/// are a whole request's rate (the busiest rank's bytes over the request's p50), since the KV
/// request, not one peer, is what the fast path must beat TCP at.
pub fn judge_kv_tcp_control(control: &PairReport, main: &PairReport) -> ControlResult {
    let case = match main.kv.as_ref() {
        Some(kv) => format!(
            "KV {} request, {} peer{}, {} descriptors",
            kv.op,
            kv.peers.len(),
            if kv.peers.len() == 1 { "" } else { "s" },
            kv.descriptors_per_request
        ),
        None => "KV request".into(),
    };
    judge_tcp_control_as(control, case, request_rate(control), request_rate(main))
}

/// Puts the TCP control's result into the report and judges it again: a caught control's rate
/// becomes the TCP estimate's ("measured by the TCP control"), one not caught (or not run)
/// leaves it assumed and makes the run inconclusive, and a fast path under the plain pair's
/// margin over the control warns (`icb_core::verdict::controls::apply`).
pub fn apply_tcp_control(report: &mut PairReport, rows: usize, result: ControlResult) {
    let rate = match result.bandwidth_bps {
        Some(bps) if result.caught && bps > 0.0 => TcpRate::Measured(bps),
        _ => TcpRate::Assumed,
    };
    report.controls.retain(|c| c.kind != ControlKind::Tcp);
    report.controls.push(result);
    super::rank_report::judge_kv(report, rows, rate);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rank_report::{Frame, RankRecord, RepTimes, assemble};
    use crate::{KvOp, ranks::rank_plans};
    use icb_core::model::{Endpoint, Locality, Placement, VerdictStatus};
    use icb_core::protocol::kv_rank::RankSide;
    use icb_core::{MemoryPair, TransportClass};
    use std::time::Duration;

    const GET_CMA: &str = "{proto|cb|init} get into host memory length 4096 zero-copy cma/memory";
    const GET_TCP: &str = "{proto|cb|init} get into host memory length 4096 software emulation tcp/lo";

    /// Llama-3.1-8B, 32 tokens, TP1 → TP1: one peer moving 32 layers × K/V × 2 blocks = 128
    /// descriptors of 8 heads × 128 × 16 tokens × 2 B = 32 KiB: 4 MiB per request (the busiest
    /// rank's bytes).
    fn plan() -> KvPlan {
        let shape = icb_kv::KvShape {
            isl: 32,
            page_size: 16,
            kv_dtype: icb_kv::KvDtype::Bf16,
            prefill_tp: 1,
            decode_tp: 1,
            max_rank_bytes: None,
        };
        let request = icb_kv::KvRequest::new(icb_kv::builtin("llama-3.1-8b").unwrap(), shape).unwrap();
        let pair = icb_pair::PairPlan::new(icb_core::RunSettings::full_curve(), Default::default());
        KvPlan::new(pair, request, KvOp::Read)
    }

    /// The per-rank report of a run whose initiator saw `info` and whose every request took
    /// `request_ms`.
    fn report(info: &str, request_ms: f64) -> PairReport {
        let plan = plan();
        let plans = rank_plans(&plan, "", Duration::from_secs(10));
        let records: Vec<RankRecord> = plans
            .iter()
            .map(|p| {
                let mut r = RankRecord::new(p.id, 1, Default::default(), String::new(), 0);
                if p.initiator {
                    r.data_path = Some(icb_core::classify::classify(Some(info), &[], MemoryPair::HOST_HOST));
                }
                if p.id.side == RankSide::Decode {
                    r.blocks_verified = p.peers.iter().map(|q| q.layout.count).sum();
                }
                r
            })
            .collect();
        let initiator = plans.iter().find(|p| p.initiator).unwrap().id;
        let ns = (request_ms * 1e6) as u64;
        let reps = vec![
            RepTimes {
                ranks: vec![(initiator, 0, vec![1_000], vec![ns])],
            };
            5
        ];
        let frame = Frame {
            tool: icb_core::ToolInfo {
                name: "ic-bench".into(),
                version: "0".into(),
                git_commit: String::new(),
                ucx_headers: String::new(),
            },
            started_at: String::new(),
            placement: Placement {
                locality: Locality::SameHost,
                mode: "local".into(),
                prefill: Endpoint::default(),
                decode: Endpoint::default(),
            },
            expectation: plan.pair.expectation.resolve(Locality::SameHost).unwrap(),
            elapsed: Duration::from_secs(1),
            checked: true,
        };
        assemble(&plan, frame, &plans, &records, &[], (&reps, 1)).unwrap()
    }

    fn kv(report: &PairReport) -> &icb_core::KvOutcome {
        report.kv.as_deref().unwrap()
    }

    /// Issue 35: without a control the estimate is the busiest rank's 4 MiB at the assumed
    /// 1 GB/s and says so; a caught control's 10 ms request (0.42 GB/s) becomes the estimate,
    /// said to be measured, and the cma path 10x faster keeps its pass.
    #[test]
    fn a_caught_control_measures_the_tcp_estimate() {
        let mut main = report(GET_CMA, 1.0);
        assert_eq!(main.verdict.status, VerdictStatus::Pass, "{:?}", main.verdict);
        assert!((kv(&main).tcp_estimate_ms - 4.194304).abs() < 1e-9);
        assert!(
            kv(&main)
                .summary
                .ends_with("over TCP it would be ~4.2 ms (assumed 1 GB/s)")
        );
        let result = judge_kv_tcp_control(&report(GET_TCP, 10.0), &main);
        assert!(result.caught, "{result:?}");
        assert_eq!(result.seen_as, [TransportClass::RmaEmulated]);
        assert_eq!(result.case, "KV read request, 1 peer, 128 descriptors");
        assert!((result.bandwidth_bps.unwrap() - 4194304.0 / 0.010).abs() < 1.0);
        assert!((result.speedup().unwrap() - 10.0).abs() < 1e-9);
        apply_tcp_control(&mut main, 1, result);
        let kv = kv(&main);
        assert!((kv.tcp_estimate_ms - 10.0).abs() < 1e-9, "{}", kv.tcp_estimate_ms);
        assert!(
            kv.summary
                .ends_with("over TCP it would be ~10.0 ms (0.42 GB/s measured by the TCP control)"),
            "{}",
            kv.summary
        );
        assert_eq!(main.verdict.status, VerdictStatus::Pass, "{:?}", main.verdict);
        assert!(main.verdict.reason.starts_with(&kv.summary), "{}", main.verdict.reason);
        assert_eq!(main.controls.len(), 1);
    }

    /// A control seen as cma (UCX_TLS not obeyed, or a blind detector): not caught, the run is
    /// inconclusive with the plain pair's line, and the estimate stays the assumed one.
    #[test]
    fn a_control_not_seen_as_tcp_makes_the_run_inconclusive() {
        let mut main = report(GET_CMA, 1.0);
        let result = judge_kv_tcp_control(&report(GET_CMA, 1.0), &main);
        assert!(!result.caught);
        apply_tcp_control(&mut main, 1, result);
        assert_eq!(main.verdict.status, VerdictStatus::Inconclusive);
        assert!(
            main.verdict
                .reason
                .starts_with("inconclusive: transport detection could not see a forced TCP fallback on this pair: "),
            "{}",
            main.verdict.reason
        );
        assert!(kv(&main).summary.ends_with("(assumed 1 GB/s)"), "{}", kv(&main).summary);
        // One that could not run at all is not caught either.
        let mut main = report(GET_CMA, 1.0);
        apply_tcp_control(
            &mut main,
            1,
            control_not_run(ControlKind::Tcp, "the pods did not start"),
        );
        assert_eq!(main.verdict.status, VerdictStatus::Inconclusive);
    }

    /// A cma path whose request is not 1.25x faster than the TCP control's warns as the plain
    /// pair does; its estimate is the control's own request.
    #[test]
    fn a_fast_path_no_faster_than_the_tcp_control_warns() {
        let mut main = report(GET_CMA, 1.0);
        let result = judge_kv_tcp_control(&report(GET_TCP, 1.1), &main);
        assert!(result.caught);
        apply_tcp_control(&mut main, 1, result);
        assert_eq!(main.verdict.status, VerdictStatus::Warn, "{:?}", main.verdict);
        assert!(
            main.verdict.reason.contains("path is no faster than forced TCP"),
            "{}",
            main.verdict.reason
        );
        assert!((kv(&main).tcp_estimate_ms - 1.1).abs() < 1e-9);
    }

    /// The control's plan: the same rows, no sweep, no budget, a few repetitions, TLS forced.
    #[test]
    fn the_control_plan_keeps_the_rows_and_forces_tcp() {
        let mut main = plan();
        main.sweep = vec![1, 10];
        main.max_kv_ms = Some(5.0);
        let c = tcp_control_plan(&main);
        assert_eq!(c.rows, main.rows);
        assert!(c.sweep.is_empty() && c.max_kv_ms.is_none());
        assert_eq!(c.pair.settings.warmup_iterations, 1);
        assert!(c.pair.settings.max_time_s <= 0.3);
        let tls: Vec<_> = c.pair.ucx_config.iter().filter(|(k, _)| k == "TLS").collect();
        assert_eq!(tls.len(), 1);
        let plans = rank_plans(&c, "", Duration::from_secs(1));
        assert!(plans.iter().all(|p| p.ucx_config == c.pair.ucx_config));
    }
}
