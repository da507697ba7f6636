//! From the per-rank model's records to one pair report: a request's time is each synchronised
//! repetition's end to end (the earliest start of any initiator to the last completion of any
//! peer); each peer's time runs from that same start, so the slowest-peer/median ratio compares
//! peers inside one request. One case per peer (rank-to-rank exchange) keeps the report's shape:
//! the table, the exports and the verdict rules read it as any pair report.

use super::report::{TcpRate, busiest_rank_bytes, outcome, peer, summary_line, tcp_warning, verdict};
use super::{KvOp, KvPlan};
use icb_core::model::{
    CaseEngine, CaseResult, CaseStatus, CheckVerdict, Expectation, LatencyStats, Measurement, PairReport, Placement,
    Status, Verdict, VerdictStatus,
};
use icb_core::protocol::kv_rank::{RankId, RankPlan, RankSide};
use icb_core::{Direction, KvRank, KvSpread, PeerInfo, ToolInfo, TransportEvidence};
use icb_pair::PairError;
use std::time::Duration;

/// What one rank said about itself over the run.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct RankRecord {
    pub id: RankId,
    pub pid: u32,
    pub peer: PeerInfo,
    pub metadata: String,
    pub buffer_addr: u64,
    pub blocks_verified: u64,
    pub verify_error: Option<String>,
    pub data_path: Option<TransportEvidence>,
    /// The CPUs it said it runs on.
    pub cpus: Vec<u32>,
    /// Its GPU buffer's allocation, as it said in its hello.
    pub cuda_alloc: Option<icb_core::CudaAllocation>,
}

impl RankRecord {
    pub fn new(id: RankId, pid: u32, peer: PeerInfo, metadata: String, buffer_addr: u64) -> RankRecord {
        RankRecord {
            id,
            pid,
            peer,
            metadata,
            buffer_addr,
            blocks_verified: 0,
            verify_error: None,
            data_path: None,
            cpus: Vec::new(),
            cuda_alloc: None,
        }
    }
}

/// One measured repetition: per initiator, its start (Unix ns) and per peer its post and
/// completion times (ns from its start).
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct RepTimes {
    pub ranks: Vec<(RankId, u64, Vec<u64>, Vec<u64>)>,
}

impl RepTimes {
    fn start(&self) -> u64 {
        self.ranks.iter().map(|r| r.1).min().unwrap_or(0)
    }

    /// First post of any rank to last completion of any peer (ns).
    pub(super) fn request_ns(&self) -> u64 {
        let end = self
            .ranks
            .iter()
            .map(|(_, s, _, done)| s + done.iter().copied().max().unwrap_or(0))
            .max()
            .unwrap_or(0);
        end.saturating_sub(self.start())
    }

    /// One initiator's peer `j`: its completion from the request's start, and its post time.
    fn peer_ns(&self, id: RankId, j: usize) -> Option<(u64, u64)> {
        let (_, s, post, done) = self.ranks.iter().find(|r| r.0 == id)?;
        Some((s + done.get(j)? - self.start(), *post.get(j)?))
    }
}

/// The report's frame: what the coordinator knows beyond the ranks.
pub struct Frame {
    pub tool: ToolInfo,
    pub started_at: String,
    pub placement: Placement,
    pub expectation: Expectation,
    pub elapsed: Duration,
    /// Whether every destination checked its blocks (an interrupted run's never did: its
    /// blocks are then not verified, which is no failure either).
    pub checked: bool,
}

/// Why an interrupted run's case is not verified.
const NOT_CHECKED: &str = "not verified: interrupted before the destination checked its blocks";
/// An interrupted run's case verdict where its initiator never said which data path it took.
const DATA_PATH_NOT_REPORTED: &str = "data path not known: interrupted before the rank reported it";

/// Microsecond statistics of nanosecond samples (nearest rank).
fn stats_us(ns: &[u64]) -> Option<LatencyStats> {
    let mut v: Vec<f64> = ns.iter().map(|&n| n as f64 / 1e3).collect();
    v.sort_by(f64::total_cmp);
    let at = |q: f64| v[((q * v.len() as f64).ceil() as usize).clamp(1, v.len()) - 1];
    (!v.is_empty()).then(|| LatencyStats {
        min: v[0],
        mean: v.iter().sum::<f64>() / v.len() as f64,
        p50: at(0.5),
        p90: at(0.9),
        p99: at(0.99),
        p999: at(0.999),
        max: v[v.len() - 1],
    })
}

/// The requests' p95 (nearest rank, as `stats_us`' percentiles), fastest and slowest (ms).
pub(super) fn spread_ms(ns: &[u64]) -> KvSpread {
    let mut v = ns.to_vec();
    v.sort_unstable();
    // Through microseconds as `stats_us` goes, so the same repetition gives the same float in
    // both (a p95 that is the p99's sample must not round above it).
    let ms = |n: &u64| *n as f64 / 1e3 / 1e3;
    let p95 = ((0.95 * v.len() as f64).ceil() as usize).clamp(1, v.len().max(1)) - 1;
    KvSpread {
        p95: v.get(p95).map(ms),
        min: v.first().map(ms),
        max: v.last().map(ms),
    }
}

/// `cma/memory`: the lanes of an evidence.
fn lanes(t: &TransportEvidence) -> String {
    let l: Vec<String> = t
        .data_path
        .transports
        .iter()
        .map(|l| format!("{}/{}", l.transport, l.device))
        .collect();
    if l.is_empty() {
        t.data_path.class.to_string()
    } else {
        l.join(",")
    }
}

/// Every peer's case, the `kv` section with its per-rank records, and the verdict.
pub fn assemble(
    plan: &KvPlan,
    frame: Frame,
    plans: &[RankPlan],
    records: &[RankRecord],
    launched: &[Option<u32>],
    (reps, warmup): (&[RepTimes], u64),
) -> Result<PairReport, PairError> {
    let checked = frame.checked;
    let cases = plan
        .rows
        .iter()
        .map(|row| row_case(plan, row, plans, records, (reps, warmup), frame.checked))
        .collect::<Result<Vec<_>, _>>()?;
    let peers = plan
        .rows
        .iter()
        .zip(&cases)
        .map(|(row, c)| peer(row, Some(c)))
        .collect();
    let mut kv = outcome(plan, peers);
    let request: Vec<u64> = reps.iter().map(RepTimes::request_ns).collect();
    let stats = stats_us(&request);
    kv.request_ms_p50 = stats.as_ref().map(|s| s.p50 / 1e3);
    kv.request_ms_p99 = stats.as_ref().map(|s| s.p99 / 1e3);
    kv.spread = spread_ms(&request);
    kv.synchronised = true;
    kv.repetitions = Some(reps.len() as u64);
    kv.ranks = rank_records(plans, records, reps, kv.request_ms_p50);
    for (r, pid) in kv.ranks.iter_mut().zip(launched) {
        r.launched_pid = *pid;
    }
    let side_peer = |side| {
        records
            .iter()
            .find(|r| r.id == RankId { side, rank: 0 })
            .map(|r| r.peer.clone())
            .unwrap_or_default()
    };
    let mut settings = plan.pair.settings.clone();
    settings.tests = vec![plan.op.test()];
    settings.plan = plan.rows.iter().map(|r| r.case(plan.op)).collect();
    settings.sizes = settings.plan.iter().map(|c| c.size).collect();
    let mut placement = frame.placement;
    placement.mode = format!(
        "{} · {} KV ranks, one process each, {} KV peers",
        placement.mode,
        plans.len(),
        plan.rows.len()
    );
    let mut report = PairReport {
        schema: icb_core::PAIR_SCHEMA.into(),
        tool: frame.tool,
        started_at: frame.started_at,
        duration_s: frame.elapsed.as_secs_f64(),
        placement,
        server: side_peer(RankSide::Decode),
        client: side_peer(RankSide::Prefill),
        settings,
        expectation: frame.expectation,
        cases,
        verdict: Verdict {
            status: VerdictStatus::Pass,
            reason: String::new(),
            hint: None,
            data_paths: Vec::new(),
        },
        warnings: Vec::new(),
        partial: None,
        ucx_profile: None,
        rails: None,
        kv: None,
        baseline: None,
        controls: Vec::new(),
        readiness: None,
    };
    report.kv = Some(Box::new(kv));
    judge_kv(&mut report, plan.rows.len(), TcpRate::Assumed);
    if !checked {
        // Not UCX's silence: the ranks were stopped before they said which path they took.
        for c in report.cases.iter_mut().filter(|c| c.transport.is_none()) {
            c.verdict = Some(CheckVerdict {
                status: Status::Warn,
                reason: DATA_PATH_NOT_REPORTED.into(),
                hint: None,
                finding: None,
            });
        }
    }
    Ok(report)
}

/// The KV report's verdict: its rows judged as any pair's cases (the first `rows` cases; the
/// descriptor sweep's, appended after, are not part of it), then the request's verdict in TTFT
/// terms with its TCP estimate at `rate`, then the controls ([`icb_core::verdict::controls`]).
/// Judged again once a TCP control measured the rate, so the estimate, the summary, the warning
/// and the verdict all speak of the same figure.
pub(super) fn judge_kv(report: &mut PairReport, rows: usize, rate: TcpRate) {
    let Some(mut kv) = report.kv.take() else {
        return;
    };
    let old_warning = tcp_warning(&kv);
    kv.tcp_estimate_ms = rate.estimate_ms(busiest_rank_bytes(&kv.peers));
    kv.summary = summary_line(&kv, rate);
    let rows = rows.min(report.cases.len());
    let mut judged = PairReport {
        cases: report.cases[..rows].to_vec(),
        controls: Vec::new(),
        ..report.clone()
    };
    icb_core::verdict::judge(&mut judged);
    report.cases[..rows].clone_from_slice(&judged.cases);
    let data_paths = std::mem::take(&mut judged.verdict.data_paths);
    report.verdict = Verdict {
        data_paths,
        ..verdict(&kv, judged.verdict.status, &judged.verdict)
    };
    if let Some(old) = old_warning {
        report.warnings.retain(|w| *w != old);
    }
    report.warnings.extend(tcp_warning(&kv));
    report.kv = Some(kv);
    icb_core::verdict::controls::apply(report);
}

/// A KV case's GPU memory: the run's mode, and the legacy-IPC capability combined over the
/// two ranks' buffers as their hellos said it. `None` when neither rank holds GPU memory.
fn case_allocation(plan: &KvPlan, ranks: &[Option<&RankRecord>]) -> Option<icb_core::CudaAllocation> {
    let sides: Vec<icb_core::LegacyIpc> = ranks
        .iter()
        .flatten()
        .filter_map(|r| r.cuda_alloc)
        .map(|a| a.legacy_ipc)
        .collect();
    (!sides.is_empty()).then(|| icb_core::CudaAllocation {
        mode: plan.pair.settings.cuda_alloc,
        legacy_ipc: icb_core::LegacyIpc::combine(sides),
    })
}

/// One peer's case: its completion times from each request's start, its post times, whether
/// its destination rank checked every block, and its initiator's data path.
fn row_case(
    plan: &KvPlan,
    row: &super::KvRow,
    plans: &[RankPlan],
    records: &[RankRecord],
    (reps, warmup): (&[RepTimes], u64),
    checked: bool,
) -> Result<CaseResult, PairError> {
    let memory = plan.memory();
    let direction = match plan.op {
        KvOp::Read => Direction::Read,
        KvOp::Write => Direction::Write,
    };
    let record = |id: RankId| records.iter().find(|r| r.id == id);
    let decode = RankId {
        side: RankSide::Decode,
        rank: row.decode_rank,
    };
    let prefill = RankId {
        side: RankSide::Prefill,
        rank: row.prefill_rank,
    };
    let (initiator, other) = match plan.op {
        KvOp::Read => (decode, prefill),
        KvOp::Write => (prefill, decode),
    };
    let j = plans
        .iter()
        .find(|p| p.id == initiator)
        .and_then(|p| p.peers.iter().position(|q| q.peer == other))
        .ok_or_else(|| PairError::Setup(format!("internal: no plan for {initiator} ← {other}")))?;
    let samples: Vec<(u64, u64)> = reps.iter().filter_map(|r| r.peer_ns(initiator, j)).collect();
    let done: Vec<u64> = samples.iter().map(|s| s.0).collect();
    let dest = record(decode);
    let expected_blocks: u64 = plans
        .iter()
        .find(|p| p.id == decode)
        .map_or(0, |p| p.peers.iter().map(|q| q.layout.count).sum());
    let verify_error = match dest {
        _ if !checked => None,
        None => Some(format!("{decode} never reported")),
        Some(r) => r.verify_error.clone().or_else(|| {
            (r.blocks_verified != expected_blocks)
                .then(|| format!("{decode} checked {} blocks of {expected_blocks}", r.blocks_verified))
        }),
    };
    let bytes = row.layout.bytes();
    let list = stats_us(&done);
    let n = done.len() as u64;
    Ok(CaseResult {
        test: plan.op.test(),
        memory,
        size: row.layout.len,
        blocks: Some(u32::try_from(row.layout.count).unwrap_or(u32::MAX)),
        status: if verify_error.is_none() && n == reps.len() as u64 && n > 0 {
            CaseStatus::Measured
        } else {
            CaseStatus::Failed
        },
        reason: verify_error
            .clone()
            .or_else(|| (!checked).then(|| NOT_CHECKED.to_string())),
        measurement: Some(Measurement {
            warmup_iterations: warmup,
            iterations: n,
            elapsed_s: done.iter().sum::<u64>() as f64 / 1e9,
            bytes: bytes * n,
            warmup_bytes: Some(bytes * warmup),
            bandwidth_bps: list
                .as_ref()
                .filter(|l| l.p50 > 0.0)
                .map(|l| bytes as f64 / (l.p50 / 1e6)),
            latency_us: None,
            window: 1,
            verified: checked && verify_error.is_none(),
            precision: None,
            list_latency_us: list,
            window_trials: Vec::new(),
            post_us: (n > 0).then(|| samples.iter().map(|s| s.1).sum::<u64>() as f64 / n as f64 / 1e3),
        }),
        transport: record(initiator).and_then(|r| r.data_path.clone()),
        verdict: None,
        run_by: CaseEngine {
            engine: plan.engine,
            direction: Some(direction),
        },
        rail: None,
        cuda_alloc: case_allocation(plan, &[record(initiator), record(other)]),
        nic_health: None,
    })
}

/// One record per rank process: what it held, moved, posted and verified.
fn rank_records(plans: &[RankPlan], records: &[RankRecord], reps: &[RepTimes], p50_ms: Option<f64>) -> Vec<KvRank> {
    plans
        .iter()
        .map(|p| {
            let r = records.iter().find(|r| r.id == p.id);
            let bytes: u64 = p.peers.iter().map(|q| q.layout.bytes()).sum();
            let posts: Vec<u64> = reps
                .iter()
                .filter_map(|rep| rep.ranks.iter().find(|x| x.0 == p.id).map(|x| x.2.iter().sum()))
                .collect();
            KvRank {
                side: p.id.side.as_str().into(),
                rank: p.id.rank,
                pid: r.map_or(0, |r| r.pid),
                launched_pid: None,
                host: r.map(|r| r.peer.hostname.clone()).unwrap_or_default(),
                initiator: p.initiator,
                buffer_bytes: p.buffer_bytes,
                peers: p.peers.len() as u32,
                bytes,
                post_ms: (!posts.is_empty()).then(|| posts.iter().sum::<u64>() as f64 / posts.len() as f64 / 1e6),
                bandwidth_bps: p50_ms.filter(|&ms| ms > 0.0).map(|ms| bytes as f64 / (ms / 1e3)),
                data_path: r.and_then(|r| r.data_path.as_ref()).map(lanes),
                blocks_verified: r.map_or(0, |r| r.blocks_verified),
                repetitions: reps.len() as u64,
                cpus: r
                    .filter(|r| !r.cpus.is_empty())
                    .map(|r| icb_probe::numa::format_cpulist(&r.cpus)),
                numa_node: p.cpus.as_ref().and_then(|c| c.numa_node),
                cpu_placement: p.cpus.as_ref().map(|c| c.reason.clone()),
            }
        })
        .collect()
}

/// The cold path of a run: the ranks' preparation plus the first request, beside the warm p50.
pub(super) fn cold_path(cold: &super::coordinator::ColdTimes, warm_ms: Option<f64>) -> icb_core::KvCold {
    let prepare_ms = cold.prepare_ns as f64 / 1e6;
    let first_request_ms = cold.first.request_ns() as f64 / 1e6;
    let cold_ms = prepare_ms + first_request_ms;
    icb_core::KvCold {
        prepare_ms,
        first_request_ms,
        cold_ms,
        cold_over_warm: warm_ms.filter(|w| *w > 0.0).map(|w| cold_ms / w),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(side: RankSide, rank: u32) -> RankId {
        RankId { side, rank }
    }

    /// Two decode ranks start 1 ms apart; the second's last peer completes 5 ms after its own
    /// start: the request is 6 ms, and its peer's completion counts from the first start.
    #[test]
    fn a_request_runs_from_the_first_post_to_the_last_completion() {
        let rep = RepTimes {
            ranks: vec![
                (
                    id(RankSide::Decode, 0),
                    1_000_000,
                    vec![10, 20],
                    vec![2_000_000, 3_000_000],
                ),
                (id(RankSide::Decode, 1), 2_000_000, vec![30], vec![5_000_000]),
            ],
        };
        assert_eq!(rep.request_ns(), 6_000_000);
        assert_eq!(rep.peer_ns(id(RankSide::Decode, 1), 0), Some((6_000_000, 30)));
        assert_eq!(rep.peer_ns(id(RankSide::Decode, 0), 1), Some((3_000_000, 20)));
        assert_eq!(rep.peer_ns(id(RankSide::Decode, 0), 2), None);
        let s = stats_us(&[3_000, 1_000, 2_000, 4_000]).unwrap();
        assert_eq!((s.min, s.p50, s.p99, s.max, s.mean), (1.0, 2.0, 4.0, 4.0, 2.5));
        assert!(stats_us(&[]).is_none());
    }

    /// The spread CollectiveX's rows carry beside p50: p95 by nearest rank (the 19th of 20
    /// requests), the fastest and the slowest; nothing measured, nothing known.
    #[test]
    fn the_spread_is_p95_min_and_max_of_the_same_requests() {
        let ns: Vec<u64> = (1..=20).rev().map(|ms| ms * 1_000_000).collect();
        let s = spread_ms(&ns);
        assert_eq!((s.p95, s.min, s.max), (Some(19.0), Some(1.0), Some(20.0)));
        assert_eq!(spread_ms(&[]), KvSpread::default());
    }
}
