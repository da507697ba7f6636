//! icb-gate: the pre-benchmark gate, one verdict before anyone publishes disaggregated numbers.
//!
//! A gate runs three steps under one budget — `probe env` on the recipe, `probe node` on the
//! nodes the bench pods landed on, then the pair — and rolls every finding up into one
//! [`GateReport`] (`ic-bench.gate/v1`). [`run_gate`] owns the policy: the budget, what a signal
//! does at each step, the order, and that a report exists on every path (pass, fail, over budget,
//! a setup error, interrupted — a signalled gate never passes). The steps themselves sit behind
//! [`GateSteps`]: the Kubernetes implementation ([`kube::KubeGate`], with [`rails`] for
//! `--rails`) creates pods; the tests script them
//! (`tests/scripted.rs`), so every way a gate can end is tested without root or a cluster, as
//! `icb_pair`'s fake launcher does for the pair.
#![forbid(unsafe_code)]

pub mod conditions;
pub mod emit;
pub mod findings;
pub mod flags;
pub mod kube;
pub mod kv;
pub mod pair_env;
pub mod rails;

use icb_core::model::{Finding, GateReport, GateVerdict, PairReport};
use std::time::Duration;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

/// Why a step gave no result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StepError {
    /// A setup problem (cluster, recipe, bench pods): the gate's verdict is `error`. The text
    /// names what to fix.
    Setup(String),
    /// The step saw the signal and cleaned up what it created; the text says what.
    Interrupted(String),
}

/// What preparing the bench pods found: where they will run and what they were modelled on.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Prepared {
    /// The nodes to probe, each once (prefill's first).
    pub nodes: Vec<String>,
    /// `(side, source)`: the recipe's template or the running pod each bench pod copies.
    pub modelled_on: Vec<(String, String)>,
    pub notes: Vec<String>,
}

/// The pair's outcome as the gate needs it.
#[derive(Debug, Clone, PartialEq)]
pub enum PairEnd {
    /// A judged report (pass, warn or fail: the gate turns failures into findings).
    Judged(Box<PairReport>),
    /// The pair could not run because of what the bench pods were modelled on (the recipe's
    /// own environment broke UCX): a failing finding of the gate, not a setup error.
    Finding(Finding),
    /// Interrupted after cleanup; the cases measured before it, when any, as evidence.
    Interrupted {
        cleanup: String,
        partial: Option<Box<PairReport>>,
    },
}

/// The gate's steps. Each watches `cancel` and cleans up what it created before it returns
/// [`StepError::Interrupted`]; `run_gate` never drops a step that may have created something,
/// except at the budget (`deadline`), which every step is also given.
#[allow(async_fn_in_trait)]
pub trait GateSteps {
    /// `probe env` on the recipe (local, read-only): its findings. `None` without a recipe.
    fn probe_env(&mut self) -> Result<Option<Vec<Finding>>, StepError>;
    /// Reads the targets and models the bench pods (creates nothing).
    async fn prepare(&mut self, deadline: Instant) -> Result<Prepared, StepError>;
    /// `probe node` on every node at once: findings per node (a node that could not be probed
    /// is a warning finding, not an error).
    async fn probe_nodes(
        &mut self,
        nodes: &[String],
        deadline: Instant,
        cancel: &CancellationToken,
    ) -> Result<Vec<Finding>, StepError>;
    /// The pair, within `deadline`.
    async fn pair(&mut self, deadline: Instant, cancel: &CancellationToken) -> Result<PairEnd, StepError>;
}

/// What the gate is asked to do.
#[derive(Debug, Clone)]
pub struct GatePlan {
    /// Bound on the whole gate.
    pub budget: Duration,
    /// `false` with `--no-node-probe` (where probe pods are not allowed).
    pub probe_nodes: bool,
    /// Said after "interrupted by": which signal stopped it (the binary's handler knows).
    pub signal_name: fn() -> &'static str,
    /// What the gate judges against, stated in its report on every path.
    pub criteria: Option<icb_core::model::Criteria>,
}

/// Why the steps stopped before the verdict.
enum Stop {
    OverBudget(String),
    Setup(String),
    Interrupted(String),
}

impl From<StepError> for Stop {
    fn from(e: StepError) -> Self {
        match e {
            StepError::Setup(why) => Stop::Setup(why),
            StepError::Interrupted(what) => Stop::Interrupted(what),
        }
    }
}

/// Runs the gate's steps through `steps` and returns its report, on every path. `report.verdict`
/// decides the exit code (`GateVerdict::exit_code`).
pub async fn run_gate<S: GateSteps>(plan: &GatePlan, steps: &mut S, cancel: &CancellationToken) -> GateReport {
    let started = Instant::now();
    let mut report = GateReport::new();
    report.criteria = plan.criteria.clone();
    let end = drive(plan, steps, cancel, &mut report, started).await;
    match end {
        Ok(()) => report.conclude(),
        Err(Stop::OverBudget(running)) => report.stop(
            GateVerdict::Error,
            format!(
                "over the --budget of {}s while {running} still ran; raise --budget",
                plan.budget.as_secs()
            ),
        ),
        Err(Stop::Setup(why)) => report.stop(GateVerdict::Error, why),
        Err(Stop::Interrupted(cleaned)) => report.stop(GateVerdict::Interrupted, cleaned),
    }
    // A signal wins over whatever the steps concluded: a signalled gate never passes.
    if cancel.is_cancelled() && report.verdict != GateVerdict::Interrupted {
        report.stop(GateVerdict::Interrupted, String::new());
    }
    if report.verdict == GateVerdict::Interrupted {
        let cleaned = std::mem::take(&mut report.reason);
        report.reason = format!("interrupted by {}: no verdict", (plan.signal_name)());
        if !cleaned.is_empty() {
            report.reason = format!("{}; {cleaned}", report.reason);
        }
    }
    report.wall_s = started.elapsed().as_secs_f64();
    report
}

async fn drive<S: GateSteps>(
    plan: &GatePlan,
    steps: &mut S,
    cancel: &CancellationToken,
    report: &mut GateReport,
    started: Instant,
) -> Result<(), Stop> {
    let deadline = started + plan.budget;
    // 1. probe env (local and quick: no budget check inside it).
    let t = Instant::now();
    if let Some(findings) = steps.probe_env()? {
        report.findings.extend(findings);
        report.steps.push(("probe env".into(), t.elapsed().as_secs_f64()));
    }
    if cancel.is_cancelled() {
        return Err(Stop::Interrupted(String::new()));
    }
    // Preparing creates nothing: a signal or the budget can just drop it.
    let prepared = tokio::select! {
        r = steps.prepare(deadline) => r?,
        _ = cancel.cancelled() => return Err(Stop::Interrupted(String::new())),
        _ = tokio::time::sleep_until(deadline) => return Err(Stop::OverBudget("preparing the bench pods".into())),
    };
    report.notes.extend(prepared.notes);
    report.modelled_on.extend(prepared.modelled_on);
    // 2. probe node on every node at once.
    if plan.probe_nodes {
        let t = Instant::now();
        let found = tokio::time::timeout_at(deadline, steps.probe_nodes(&prepared.nodes, deadline, cancel)).await;
        report.steps.push(("probe node".into(), t.elapsed().as_secs_f64()));
        match found {
            Ok(findings) => report.findings.extend(findings?),
            Err(_) => {
                return Err(Stop::OverBudget(format!("probe node on {}", prepared.nodes.join(", "))));
            }
        }
    }
    if cancel.is_cancelled() {
        return Err(Stop::Interrupted(String::new()));
    }
    // 3. the pair, with what is left of the budget.
    if Instant::now() >= deadline {
        return Err(Stop::OverBudget(
            "nothing of the pair (the probes used the budget)".into(),
        ));
    }
    let t = Instant::now();
    let end = steps.pair(deadline, cancel).await;
    report.steps.push(("pair".into(), t.elapsed().as_secs_f64()));
    match end {
        Ok(PairEnd::Judged(pair)) => {
            report.add_pair(*pair);
            Ok(())
        }
        Ok(PairEnd::Finding(finding)) => {
            report.findings.push(finding);
            Ok(())
        }
        Ok(PairEnd::Interrupted { cleanup, partial }) => {
            if let Some(partial) = partial {
                let mut pair = *partial;
                let why = format!("interrupted by {}", (plan.signal_name)());
                icb_core::verdict::mark_interrupted(&mut pair, &why);
                report.pair = Some(pair);
            }
            Err(Stop::Interrupted(cleanup))
        }
        Err(StepError::Setup(why)) if Instant::now() >= deadline => Err(Stop::OverBudget(format!("the pair ({why})"))),
        Err(e) => Err(e.into()),
    }
}
