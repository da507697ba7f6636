//! `pair --kv-shape`: a model's real KV transfer for one request, prefill TP `a` → decode TP `b`.
//!
//! One process per TP rank ([`ranks`], locally and on Kubernetes, NIXL or the UCX engine), `a + b`
//! in all, each owning its rank's KV buffer (registered once) and posting to every peer rank at
//! once (NIXL requests, or the UCX engine's RMA block lists); repetitions are barriers over every
//! rank, so a request's time is its end to end. Local ranks ([`local_ranks`]) run on a local
//! pair; on Kubernetes ([`kube_ranks`]) they are exec'd into two bench pods (whole-node pods on
//! two nodes, pods shaped by the device flags on one node, or pods modelled on worker pods), the
//! coordinator in the decode pod. Every rank runs on the CPUs `icb_rails::cpus` chooses from its
//! node's NUMA topology as its side sees it (its GPU's or NIC's node; unpinned on one node).
//!
//! The geometry's rank-to-rank reads are the plan's rows ([`KvRow`]); one pair report, whose
//! `kv` section says what the fabric adds to time-to-first-token ([`report`], `rank_report`).
//! The descriptor-count sweep, when asked, runs afterwards on one more pair ([`KvSeam`]).

pub mod bulk;
pub mod bursts;
pub mod control;
mod coordinator;
pub mod directions;
mod engine;
pub mod kube_ranks;
pub mod kube_runs;
pub mod local_ranks;
mod plan;
pub mod progress;
mod rank_report;
pub mod ranks;
mod report;
pub mod target;

pub use coordinator::{
    COORDINATED, ColdTimes, Coordinated, CoordinatorJob, LISTENING, PROGRESS, RepRule, coordinate,
    serve as serve_coordinator,
};
pub use engine::{KvEngine, NixlLoads};
pub use plan::{KvOp, KvRow, kv_rows, sweep_counts};
pub use rank_report::{RankRecord, RepTimes};
pub use report::{TcpRate, summary_line};
pub use target::{KubeKv, KvHost, KvPlace, KvTarget};

use icb_core::protocol::CaseProgress;
use icb_core::{CaseShape, KvLayout};
use icb_pair::launcher::{LaunchError, Launcher};
use icb_pair::plan::PairPlan;
use icb_pair::{Interrupted, PairError, PairOutcome, run_pair};
use std::time::Instant;
use tokio_util::sync::CancellationToken;

/// A `--kv-shape` run, decided before anything starts.
#[derive(Debug, Clone)]
pub struct KvPlan {
    /// Timing, memory pair and deadlines of every row (its cases are replaced per row).
    pub pair: PairPlan,
    pub request: icb_kv::KvRequest,
    pub op: KvOp,
    pub rows: Vec<KvRow>,
    /// `--max-kv-ms`: a request slower than this (p50) fails the verdict.
    pub max_kv_ms: Option<f64>,
    /// Descriptor counts of the sweep (empty: no sweep), at `sweep_block` bytes each.
    pub sweep: Vec<u64>,
    pub sweep_block: u64,
    /// The engine that moves the blocks: every rank runs it (the descriptor sweep's pair gets
    /// its engine from its launcher). A `pair` target's is decided when it runs
    /// ([`KvTarget::run`]).
    pub engine: icb_core::EngineKind,
    /// The bulk row ([`bulk`]): the same bytes as one contiguous descriptor per peer on fresh
    /// ranks after the paged run (`pair --kv-shape`; off in `gate`, whose budget is its own).
    pub bulk: bool,
    /// The burst run ([`bursts`]) after the paged run (`pair --kv-shape`; off in `gate`).
    pub bursts: bool,
    /// This run's burst sizes (the burst run's own plan; empty: one request at a time): its
    /// ranks hold the largest's copies of the request and measure each size in turn.
    pub in_flight: Vec<u32>,
    /// The most bytes one rank's buffer may hold ([`MAX_RANK_BYTES`], or on one host
    /// [`local_rank_limit`]): the burst sizes stop below it.
    pub rank_limit: u64,
    /// The other operation's run ([`directions`]) after the main one (`pair --kv-shape`; off in
    /// `gate`).
    pub both_ops: bool,
    /// The operation the serving KV connector uses, or why it is not known: `--recipe`'s, else
    /// (worker-pod targets) the workers' ([`directions::worker_connector`]); `None`: nothing read.
    pub connector: Option<directions::KvConnector>,
}

/// What a command's KV flags decide besides the request ([`KvPlan::with_options`]).
#[derive(Debug, Clone)]
pub struct KvOptions {
    /// `--kv-op`.
    pub op: KvOp,
    /// The engine every rank runs (NIXL wherever it loads, unless `--engine`), decided when the
    /// run starts.
    pub engine: KvEngine,
    /// `--max-kv-ms`.
    pub max_kv_ms: Option<f64>,
    /// `--kv-descriptor-sweep[=MAX]` (`None`: no sweep).
    pub sweep_max: Option<u64>,
    /// The most bytes one side of the sweep may hold ([`MAX_RANK_BYTES`], or on one host
    /// [`local_rank_limit`]): the sweep's counts stop below it.
    pub sweep_rank_bytes: u64,
    /// `--kv-extra-runs`: the runs after the paged one ([`KvExtraRuns::ALL`] for `pair`,
    /// [`KvExtraRuns::NONE`] in `gate`, whose budget covers the paged request only).
    pub extra: KvExtraRuns,
}

/// The runs `pair --kv-shape` makes after the paged one, each on fresh ranks: the bulk row
/// ([`bulk`]), the bursts ([`bursts`]) and the other operation ([`directions`]). Each costs about
/// as long as a short paged run (2-3 s here), so `--kv-extra-runs` lets a quick check leave them out.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KvExtraRuns {
    pub bulk: bool,
    pub bursts: bool,
    pub other_op: bool,
}

impl KvExtraRuns {
    pub const ALL: KvExtraRuns = KvExtraRuns {
        bulk: true,
        bursts: true,
        other_op: true,
    };
    pub const NONE: KvExtraRuns = KvExtraRuns {
        bulk: false,
        bursts: false,
        other_op: false,
    };
}

impl Default for KvExtraRuns {
    fn default() -> Self {
        KvExtraRuns::ALL
    }
}

/// A `--kv-extra-runs` value that names no run.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad --kv-extra-runs '{0}': give all, none, or a comma list of bulk, bursts, other-op")]
pub struct BadExtraRuns(pub String);

impl std::str::FromStr for KvExtraRuns {
    type Err = BadExtraRuns;

    /// `all`, `none`, or a comma list of `bulk`, `bursts`, `other-op` (each at most once).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.trim() {
            "all" => return Ok(KvExtraRuns::ALL),
            "none" => return Ok(KvExtraRuns::NONE),
            _ => {}
        }
        let mut runs = KvExtraRuns::NONE;
        for word in s.split(',').map(str::trim) {
            let slot = match word {
                "bulk" => &mut runs.bulk,
                "bursts" => &mut runs.bursts,
                "other-op" => &mut runs.other_op,
                _ => return Err(BadExtraRuns(s.to_string())),
            };
            if std::mem::replace(slot, true) {
                return Err(BadExtraRuns(s.to_string()));
            }
        }
        Ok(runs)
    }
}

impl KvPlan {
    /// A short run after this one on the same plan (the TCP control, the bulk row): no
    /// descriptor sweep, no bulk row of its own, no `--max-kv-ms`, one warm-up and bounded as
    /// every control is ([`icb_pair::controls::CONTROL_MAX_TIME_S`]).
    pub(crate) fn short_extra_run(&self) -> KvPlan {
        let mut extra = self.clone();
        extra.sweep.clear();
        extra.bulk = false;
        extra.bursts = false;
        extra.both_ops = false;
        extra.in_flight.clear();
        extra.max_kv_ms = None;
        let s = &mut extra.pair.settings;
        s.warmup_iterations = 1;
        s.max_time_s = icb_pair::controls::CONTROL_MAX_TIME_S;
        s.min_time_s = s.min_time_s.min(icb_pair::controls::CONTROL_MAX_TIME_S);
        extra
    }

    /// The memory pair every rank's buffer uses: the run's first (host→host when none is set).
    pub fn memory(&self) -> icb_core::MemoryPair {
        self.pair
            .settings
            .memory
            .first()
            .copied()
            .unwrap_or(icb_core::MemoryPair::HOST_HOST)
    }

    /// The plan of a command's KV flags: `pair --kv-shape` and `gate --kv-shape` both build it
    /// here (the rows of `request`, the engine, `--max-kv-ms`, the descriptor sweep).
    pub fn with_options(pair: PairPlan, request: icb_kv::KvRequest, options: &KvOptions) -> KvPlan {
        let mut plan = KvPlan::new(pair, request, options.op);
        plan.engine = options.engine.unless_nixl_loads();
        plan.max_kv_ms = options.max_kv_ms;
        plan.rank_limit = options.sweep_rank_bytes;
        plan.bulk = options.extra.bulk;
        plan.bursts = options.extra.bursts;
        plan.both_ops = options.extra.other_op;
        if let Some(max) = options.sweep_max {
            plan.sweep = sweep_counts(max, plan.sweep_block, options.sweep_rank_bytes);
        }
        plan
    }

    /// A plan for every read of `request`'s geometry.
    pub fn new(pair: PairPlan, request: icb_kv::KvRequest, op: KvOp) -> KvPlan {
        let rows = kv_rows(request.geometry(), op);
        let sweep_block = rows.first().map_or(4096, |r| r.layout.len);
        KvPlan {
            pair,
            request,
            op,
            rows,
            max_kv_ms: None,
            sweep: Vec::new(),
            sweep_block,
            engine: icb_core::EngineKind::Nixl,
            bulk: true,
            bursts: true,
            in_flight: Vec::new(),
            rank_limit: MAX_RANK_BYTES,
            both_ops: true,
            connector: None,
        }
    }

    /// The pair the sweep runs: one case per descriptor count.
    pub fn sweep_plan(&self) -> PairPlan {
        let cases = self
            .sweep
            .iter()
            .map(|&n| CaseShape::kv(self.op.test(), KvLayout::spaced(self.sweep_block, n)))
            .collect();
        self.with_cases(cases)
    }

    fn with_cases(&self, cases: Vec<CaseShape>) -> PairPlan {
        let mut pair = self.pair.clone();
        pair.settings.tests = vec![self.op.test()];
        pair.settings.sizes = cases.iter().map(|c| c.size).collect();
        pair.settings.plan = cases;
        pair.settings.blocks = None;
        pair.settings.window_candidates.clear();
        pair.settings.memory.truncate(1);
        // Filling, registering and verifying a rank's buffer takes time of its own: a second
        // per 20 MB on top of the cases' budget (a debug build on a loaded 2-core machine).
        let buffers: u64 = pair
            .settings
            .plan
            .iter()
            .filter_map(|c| c.kv)
            .map(|k| k.initiator.buffer_bytes + k.target.buffer_bytes)
            .sum();
        let deadline = PairPlan::deadline_for(&pair.settings) + std::time::Duration::from_secs(buffers / 20_000_000);
        pair.deadline = pair.deadline.max(deadline);
        pair
    }
}

/// Starts the descriptor sweep's pair: its initiator runs as the launcher's prefill side
/// (`connect`), its target as the decode side (`serve`); the seam places them.
#[allow(async_fn_in_trait)]
pub trait KvSeam {
    type L: Launcher;

    async fn launcher(&mut self) -> Result<Self::L, LaunchError>;
}

/// The engine's cap on one buffer (16 GiB, `icb_engine::messages::MAX_MESSAGE_SIZE`).
pub const MAX_RANK_BYTES: u64 = 16 << 30;

/// What one rank's buffer may hold when every rank runs on this host: 80 % of the memory
/// available (`/proc/meminfo`) shared by `processes`, and never above [`MAX_RANK_BYTES`].
pub fn local_rank_limit(processes: usize) -> u64 {
    let available = std::fs::read_to_string("/proc/meminfo").ok().and_then(|t| {
        t.lines()
            .find_map(|l| l.strip_prefix("MemAvailable:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .map(|kb| kb * 1024)
    });
    match available {
        Some(bytes) => (bytes / 10 * 8 / processes.max(1) as u64).min(MAX_RANK_BYTES),
        None => MAX_RANK_BYTES,
    }
}

/// The progress of the descriptor sweep's cases (the ranks report none while they run).
pub type KvProgress<'a> = dyn FnMut(&CaseProgress) + 'a;

/// The descriptor-count sweep on one more pair, when the plan asks for it. Interrupted, it
/// returns the ranks' finished report (`ranks`) as the partial one, with the sweep's cases
/// measured before the signal.
async fn run_sweep<S: KvSeam>(
    plan: &KvPlan,
    seam: &mut S,
    cancel: &CancellationToken,
    progress: &mut KvProgress<'_>,
    ranks: &PairOutcome,
) -> Result<Option<Result<PairOutcome, PairError>>, PairError> {
    if plan.sweep.is_empty() {
        return Ok(None);
    }
    let launcher = tokio::select! {
        biased;
        _ = cancel.cancelled() => Err(PairError::Interrupted(Interrupted::default())),
        l = seam.launcher() => l.map_err(PairError::from),
    };
    let r = match launcher {
        Ok(mut launcher) => run_pair(&plan.sweep_plan(), &mut launcher, cancel, progress).await,
        Err(e) => Err(e),
    };
    if cancel.is_cancelled() {
        return Err(sweep_interrupted(plan, ranks, &r));
    }
    Ok(Some(r))
}

/// The ranks' report with the sweep's cases measured before the signal (a finished sweep's, or
/// those of its partial report), marked partial against every case planned; one cleanup.
fn sweep_interrupted(plan: &KvPlan, ranks: &PairOutcome, sweep: &Result<PairOutcome, PairError>) -> PairError {
    let swept = match sweep {
        Ok(o) => Some(&o.report),
        Err(PairError::Interrupted(Interrupted { partial, .. })) => partial.as_deref(),
        Err(_) => None,
    };
    let mut report = ranks.report.clone();
    if let Some(swept) = swept {
        add_sweep(&mut report, swept);
    }
    report.partial = Some(icb_core::model::PartialRun {
        reason: "interrupted".into(),
        planned_cases: plan.rows.len() + plan.sweep.len(),
    });
    let cleanup = [
        ranks.cleanup.clone(),
        Interrupted::cleanup_of(std::slice::from_ref(sweep)),
    ]
    .into_iter()
    .filter(|c| !c.is_empty())
    .collect::<Vec<_>>()
    .join("; sweep: ");
    PairError::Interrupted(Interrupted {
        cleanup,
        partial: Some(Box::new(report)),
    })
}

/// The sweep's cases after the ranks' ones, and its points in the `kv` section.
fn add_sweep(report: &mut icb_core::PairReport, sweep: &icb_core::PairReport) {
    report.cases.extend(sweep.cases.iter().cloned());
    if let Some(kv) = report.kv.as_mut() {
        kv.descriptor_sweep = report::sweep_points(&sweep.cases);
    }
}

/// The per-rank model ([`ranks`]), then the sweep through `seam`; one pair report.
pub async fn run_kv_ranks<R: ranks::RankSeam, S: KvSeam>(
    plan: &KvPlan,
    rank_seam: &mut R,
    seam: &mut S,
    tool: &icb_core::ToolInfo,
    cancel: &CancellationToken,
    progress: &mut KvProgress<'_>,
) -> Result<PairOutcome, PairError> {
    let started = Instant::now();
    let mut outcome = ranks::run_ranks(plan, rank_seam, tool, cancel).await?;
    if let Some(sweep) = run_sweep(plan, seam, cancel, progress, &outcome).await? {
        let sweep = sweep?;
        add_sweep(&mut outcome.report, &sweep.report);
        if !sweep.cleanup.is_empty() {
            outcome.cleanup = format!("{}; sweep: {}", outcome.cleanup, sweep.cleanup);
        }
    }
    outcome.report.duration_s = started.elapsed().as_secs_f64();
    Ok(outcome)
}

#[cfg(test)]
mod tests {
    use super::{BadExtraRuns, KvExtraRuns};

    #[test]
    fn extra_runs_read_all_none_or_a_list_and_refuse_anything_else_whole() {
        let read = |s: &str| s.parse::<KvExtraRuns>();
        assert_eq!(read("all"), Ok(KvExtraRuns::ALL));
        assert_eq!(read("none"), Ok(KvExtraRuns::NONE));
        let some = KvExtraRuns {
            bulk: true,
            bursts: false,
            other_op: true,
        };
        assert_eq!(read("bulk,other-op"), Ok(some));
        assert_eq!(read(" other-op , bulk "), Ok(some));
        for bad in ["", "bulk,", "bulk,bulk", "all,bulk", "burst", "none,bursts"] {
            assert_eq!(read(bad), Err(BadExtraRuns(bad.to_string())), "{bad:?}");
        }
        assert_eq!(
            BadExtraRuns("x".into()).to_string(),
            "bad --kv-extra-runs 'x': give all, none, or a comma list of bulk, bursts, other-op"
        );
        assert_eq!(KvExtraRuns::default(), KvExtraRuns::ALL);
    }
}
