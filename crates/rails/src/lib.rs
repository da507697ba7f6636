//! Whole-node mode (`pair --rails`): every rail of a node pair at once, one rank process per rail
//! on each side (as TP ranks are), each pinned to its GPU, its NIC and its NUMA node's CPUs.
//!
//! The sequence, for any [`RailSeam`] (local namespaces, Kubernetes, a scripted fake in tests):
//! 1. snapshot both nodes' NIC counters, run every row of a round concurrently (each row is one
//!    [`run_pair`] with its own launcher), snapshot again: a round is the production shape;
//! 2. attribute each row's bytes from the counters ([`icb_core::rails::judge::attribute`]);
//! 3. run alone every row that was slow or misattributed concurrently (and all with
//!    [`AloneRuns::All`]), each between two snapshots, so that every counted byte is its own and
//!    contention is told from a bad rail;
//! 4. judge ([`icb_core::rails::judge::judge_rails`]) and roll the rows into one pair report.
//!
//! The aligned pattern is one round (rail i ↔ rail i); the cross pattern is K rounds, round r
//! pairing prefill rail i with decode rail (i + r) mod K, so each NIC carries one row at a time.

pub mod agent;
pub mod bare_metal;
pub mod choice;
pub mod controls;
pub mod cpus;
pub mod dra_roots;
pub mod info;
pub mod kube;
mod kube_devices;
mod kube_dra;
mod kube_rank;
pub mod kube_run;
pub mod local;
pub mod local_run;
mod partial;
mod plan;
pub mod remote;
pub mod remote_run;
mod report;
pub mod serve_run;

pub use choice::{
    Choice, LocalRailsFlags, LocalRailsTarget, NodeRail, RailFlagError, RailSite, read_selection, told_devices,
};
pub use controls::run_rails_with_controls;
pub use plan::{NodeRailInfo, RailPlanError, RailSelection, plan_rows};

use icb_core::protocol::CaseProgress;
use icb_core::rails::judge::{NodeRails, SideTraffic, attribute, judge_rails, needs_alone};
use icb_core::rails::nic_health::HealthSnapshot;
use icb_core::rails::nic_health::rail::{RailHealth, TargetEnd};
use icb_core::rails::nic_health::rules::RdmaOp;
use icb_core::rails::{Attribution, CounterSnapshot, Phase, RailEnd, RailPattern, RailResult, RailRun};
use icb_pair::launcher::{LaunchError, Launcher};
use icb_pair::plan::PairPlan;
use icb_pair::{PairError, PairOutcome, SideRole, run_pair};
use std::cell::RefCell;
use std::time::Instant;
use tokio_util::sync::CancellationToken;

/// Which rows run alone after the concurrent round.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum AloneRuns {
    /// Rows slower than the margin below the median, or whose bytes the counters put elsewhere.
    #[default]
    Suspects,
    /// Every row (then the report has aggregate ÷ Σ alone).
    All,
}

/// One row of the table: a prefill rail paired with a decode rail.
#[derive(Debug, Clone, PartialEq)]
pub struct RailRow {
    pub index: usize,
    /// Rows of one round run at once.
    pub round: usize,
    pub prefill: RailEnd,
    pub decode: RailEnd,
    /// What the two ends' NIC ports disagree on, read before the run (see `NodeRailInfo`'s
    /// readiness); becomes the row's `mismatches`.
    pub mismatches: Vec<icb_core::readiness::ReadinessMismatch>,
}

/// A rails run, decided once before anything starts.
#[derive(Debug, Clone)]
pub struct RailsPlan {
    /// What each row runs (settings, expectation, deadlines), as one pair.
    pub pair: PairPlan,
    pub rows: Vec<RailRow>,
    pub pattern: RailPattern,
    /// The relative rule: a row more than this fraction below the median fails.
    pub margin: f64,
    pub alone: AloneRuns,
}

/// Starts the rows' sides and reads the nodes' counters. Everything shared by the rows (the
/// namespaces, the nodes) belongs to the seam; each row's launcher removes only its own sides.
#[allow(async_fn_in_trait)]
pub trait RailSeam {
    type L: Launcher;

    /// A launcher whose two sides run pinned to this row's rail ends.
    fn launcher(&mut self, row: &RailRow) -> Result<Self::L, LaunchError>;

    /// Every readable NIC counter of one side's node, now.
    async fn counters(&mut self, side: SideRole) -> CounterSnapshot;

    /// Every RDMA port's error and congestion counters of one side's node, now (read beside
    /// [`RailSeam::counters`]). A seam that cannot read them says so: every rail's health is
    /// then "not read", never healthy.
    async fn health(&mut self, _side: SideRole) -> HealthSnapshot {
        HealthSnapshot::unread("this kind of run does not read the NICs' health counters yet")
    }

    /// Findings about the nodes made before the run (a DRA node's ResourceSlices against its
    /// PCI tree: `dra_roots`), added to the judged outcome. None by default.
    fn node_findings(&self) -> Vec<icb_core::rails::RailFinding> {
        Vec::new()
    }
}

/// The progress of one row's case.
pub type RailProgress<'a> = dyn FnMut(&RailRow, &CaseProgress) + 'a;

/// Runs every row, judges the node pair and returns one pair report with its `rails` section.
/// `cancel` stops the run at any step; each row's launcher cleans up its own sides, the caller
/// cleans up the seam.
pub async fn run_rails<S: RailSeam>(
    plan: &RailsPlan,
    seam: &mut S,
    cancel: &CancellationToken,
    progress: &mut RailProgress<'_>,
) -> Result<PairOutcome, PairError> {
    let started = Instant::now();
    let mut results: Vec<Option<RailResult>> = vec![None; plan.rows.len()];
    let mut outcomes: Vec<Option<PairOutcome>> = (0..plan.rows.len()).map(|_| None).collect();
    let rounds = plan.rows.iter().map(|r| r.round).max().map_or(0, |r| r + 1);
    for round in 0..rounds {
        let rows: Vec<&RailRow> = plan.rows.iter().filter(|r| r.round == round).collect();
        let phase = run_phase(plan, seam, &rows, &outcomes, cancel, progress).await?;
        for (row, (run, outcome, attribution, health)) in rows.iter().zip(phase) {
            results[row.index] = Some(RailResult {
                index: row.index,
                prefill: row.prefill.clone(),
                decode: row.decode.clone(),
                concurrent: run,
                alone: None,
                line_rate_share: None,
                attribution,
                health: Some(health),
                mismatches: row.mismatches.clone(),
                status: icb_core::model::VerdictStatus::Pass,
            });
            outcomes[row.index] = outcome;
        }
    }
    let mut rows: Vec<RailResult> = results.into_iter().flatten().collect();
    let alone: Vec<usize> = match plan.alone {
        AloneRuns::Suspects => needs_alone(&rows, plan.margin),
        AloneRuns::All => rows.iter().map(|r| r.index).collect(),
    };
    for index in alone {
        let row = &plan.rows[index];
        let mut phase = run_phase(plan, seam, &[row], &outcomes, cancel, progress).await?;
        let (run, _, attribution, health) = phase.remove(0);
        let result = &mut rows[index];
        result.alone = Some(run);
        if attribution.is_some() {
            result.attribution = attribution;
        }
        // The alone phase's counters are the rail's own, as its attribution is.
        result.health = Some(health);
    }
    let unit = plan.pair.settings.unit;
    let mut outcome = judge_rails(plan.pattern, rows, plan.margin, unit);
    icb_core::rails::judge::add_findings(&mut outcome, seam.node_findings());
    report::assemble(plan, outcome, outcomes, started.elapsed())
}

type RowRun = (RailRun, Option<PairOutcome>, Option<Attribution>, RailHealth);

/// One phase: the rows at once between two counter snapshots of each node. Stopped by `cancel`,
/// it ends in [`PairError::Interrupted`] with the partial report of every rail's cases so far
/// (`earlier`: the rows' finished runs of earlier phases, which an alone run does not replace).
async fn run_phase<S: RailSeam>(
    plan: &RailsPlan,
    seam: &mut S,
    rows: &[&RailRow],
    earlier: &[Option<PairOutcome>],
    cancel: &CancellationToken,
    progress: &mut RailProgress<'_>,
) -> Result<Vec<RowRun>, PairError> {
    let mut launchers = Vec::with_capacity(rows.len());
    for row in rows {
        launchers.push(seam.launcher(row).map_err(PairError::Launch)?);
    }
    let before = (
        seam.counters(SideRole::Prefill).await,
        seam.counters(SideRole::Decode).await,
    );
    let health_before = (
        seam.health(SideRole::Prefill).await,
        seam.health(SideRole::Decode).await,
    );
    let progress = RefCell::new(progress);
    // A rail compares its own two ports (`RailResult::mismatches`), not the whole nodes'.
    let row_plan = PairPlan {
        compare_readiness: false,
        ..plan.pair.clone()
    };
    let runs = futures::future::join_all(launchers.iter_mut().zip(rows).map(|(launcher, row)| {
        let (progress, row_plan) = (&progress, &row_plan);
        async move {
            let mut each = |p: &CaseProgress| (*progress.borrow_mut())(row, p);
            run_pair(row_plan, launcher, cancel, &mut each).await
        }
    }))
    .await;
    let after = (
        seam.counters(SideRole::Prefill).await,
        seam.counters(SideRole::Decode).await,
    );
    let health_after = (
        seam.health(SideRole::Prefill).await,
        seam.health(SideRole::Decode).await,
    );
    if cancel.is_cancelled() {
        let indices: Vec<usize> = rows.iter().map(|r| r.index).collect();
        return Err(partial::interrupted(&indices, &runs, earlier, plan.rows.len()));
    }
    let phase = if rows.len() == 1 {
        Phase::Alone
    } else {
        Phase::Concurrent
    };
    let traffic = |b: &CounterSnapshot, a: &CounterSnapshot| SideTraffic {
        traffic: b.traffic_until(a),
        unreadable: b.unreadable.iter().chain(&a.unreadable).cloned().collect(),
    };
    let seen = (traffic(&before.0, &after.0), traffic(&before.1, &after.1));
    let runs: Vec<(RailRun, Option<PairOutcome>)> = runs.into_iter().map(report::rail_run).collect();
    let phase_bytes: u64 = runs.iter().map(|(r, _)| r.app_bytes).sum();
    let nodes = (node_rails(plan, |r| &r.prefill), node_rails(plan, |r| &r.decode));
    Ok(rows
        .iter()
        .zip(runs)
        .map(|(row, (run, outcome))| {
            let attribution = (run.app_bytes > 0).then(|| Attribution {
                phase,
                app_bytes: run.app_bytes,
                prefill: attribute(&row.prefill, &nodes.0, &seen.0, run.app_bytes, phase_bytes, phase),
                decode: attribute(&row.decode, &nodes.1, &seen.1, run.app_bytes, phase_bytes, phase),
            });
            let mut health = RailHealth::read(
                phase,
                (&row.prefill.nic.port_name(), &row.decode.nic.port_name()),
                (&health_before.0, &health_before.1),
                (&health_after.0, &health_after.1),
            );
            if let Some((op, end)) = rdma_op(plan, &run) {
                health.check_rdma(op, end);
            }
            (run, outcome, attribution, health)
        })
        .collect())
}

/// The phase's one RDMA operation and the end its requests reach, for the attribution check:
/// every bandwidth case a get (the prefill side reads the decode side's memory: READ requests
/// reach the decode NIC) or every one a put (WRITEs land on the decode NIC), over an RDMA
/// transport. `None` for mixed operations (tag sends pick their own protocol) or another
/// transport: nothing to confirm.
fn rdma_op(plan: &RailsPlan, run: &RailRun) -> Option<(RdmaOp, TargetEnd)> {
    use icb_core::model::TestKind;
    // `rc_mlx5/mlx5_0:1,…`: every lane's transport must be RDMA.
    let lanes = run.data_path.as_deref()?;
    let rdma = |lane: &str| icb_core::fabric::ucx::is_rdma_transport(lane.split('/').next().unwrap_or(lane));
    if !lanes.split(',').all(rdma) {
        return None;
    }
    let mut bw = plan.pair.settings.tests.iter().filter(|t| t.is_bandwidth());
    let first = *bw.next()?;
    if bw.any(|t| *t != first) {
        return None;
    }
    match first {
        TestKind::GetBw => Some((RdmaOp::Read, TargetEnd::Decode)),
        TestKind::PutBw => Some((RdmaOp::Write, TargetEnd::Decode)),
        _ => None,
    }
}

/// Every rail of one side's node with its counter device.
fn node_rails(plan: &RailsPlan, end: impl Fn(&RailRow) -> &RailEnd) -> NodeRails {
    let mut devices: Vec<(usize, String)> = plan
        .rows
        .iter()
        .map(|r| (end(r).rail, end(r).counter_device.clone()))
        .collect();
    devices.sort();
    devices.dedup();
    NodeRails { devices }
}
