//! `pair --kv-shape`: one model's KV transfer between prefill TP `a` and decode TP `b`, as the
//! cases carry it ([`KvLayout`]) and as the report says it ([`KvOutcome`]); and where a
//! multi-block case's blocks sit in a buffer ([`BlockLayout`], not serialized).

use serde::{Deserialize, Serialize};

/// Where a request's descriptors sit in one side's buffer: descriptor `i` starts at
/// `offset + i × stride`; the buffer holds `buffer_bytes` (the rank's whole KV for the request).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct KvSide {
    pub offset: u64,
    pub stride: u64,
    pub buffer_bytes: u64,
}

impl KvSide {
    /// Descriptor `i`'s offset.
    pub fn at(&self, i: u64) -> u64 {
        self.offset + i * self.stride
    }
}

/// One rank-to-rank read of a KV geometry: `count` descriptors of `len` bytes, laid out on the
/// initiator and on the target as each side's buffer holds them (a decode rank's blocks hold
/// more heads than a prefill rank's, or fewer). The source is filled with the pattern at its own
/// offsets; the destination's block `i` must hold the source's bytes of block `i`, and every byte
/// outside the blocks must stay as it was.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct KvLayout {
    pub count: u64,
    pub len: u64,
    pub initiator: KvSide,
    pub target: KvSide,
}

impl KvLayout {
    /// `count` blocks of `len` bytes, the same place on both sides, each followed by a 64-byte
    /// gap (the descriptor sweep: many descriptors, none adjacent, little memory).
    pub fn spaced(len: u64, count: u64) -> KvLayout {
        let stride = len.next_multiple_of(64) + 64;
        let side = KvSide {
            offset: 0,
            stride,
            buffer_bytes: stride * count,
        };
        KvLayout {
            count,
            len,
            initiator: side,
            target: side,
        }
    }

    /// Bytes one request moves.
    pub fn bytes(&self) -> u64 {
        self.count.saturating_mul(self.len)
    }

    /// Whether every block lies inside both buffers and no two blocks overlap.
    pub fn is_consistent(&self) -> bool {
        let fits = |s: &KvSide| {
            self.count > 0
                && self.len > 0
                && s.stride >= self.len
                && s.offset
                    .checked_add(s.stride.saturating_mul(self.count - 1))
                    .and_then(|last| last.checked_add(self.len))
                    .is_some_and(|end| end <= s.buffer_bytes)
        };
        fits(&self.initiator) && fits(&self.target)
    }
}

/// Where the blocks of a KV-shaped transfer sit in one buffer: `count` blocks of `block` bytes,
/// one every `stride` bytes (`stride` ≥ `block`; the gaps keep the blocks non-contiguous). Not
/// part of the JSON: the engines' buffers (icb-memory) and the control protocol's bounds use it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockLayout {
    pub block: usize,
    pub stride: usize,
    pub count: usize,
}

impl BlockLayout {
    /// One contiguous block of `len` bytes.
    pub fn single(len: usize) -> Self {
        BlockLayout {
            block: len,
            stride: len,
            count: 1,
        }
    }

    /// `count` blocks of `block` bytes, each starting on a page and followed by at least one
    /// page of gap, so no two blocks are adjacent in memory; `None` when it overflows.
    pub fn spaced(block: usize, count: usize) -> Option<Self> {
        const PAGE: usize = 4096;
        let stride = block.checked_next_multiple_of(PAGE)?.checked_add(PAGE)?;
        stride.checked_mul(count)?;
        Some(BlockLayout { block, stride, count })
    }

    /// Bytes the buffer must hold.
    pub fn span(&self) -> usize {
        self.stride * self.count
    }

    /// Byte offset of block `i`.
    pub fn offset(&self, i: usize) -> usize {
        i * self.stride
    }
}

/// The whole `--kv-shape` run: the request, its per-request times and every peer's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KvOutcome {
    pub model: String,
    pub isl: u64,
    pub page_size: u32,
    pub kv_dtype: String,
    pub prefill_tp: u32,
    pub decode_tp: u32,
    /// The model's layers (issue 42, CollectiveX's `layers`); absent in reports from before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub layers: Option<u32>,
    /// `read` (decode pulls) or `write` (prefill pushes).
    pub op: String,
    /// The request's KV, each head counted once, in whole blocks.
    pub kv_bytes_per_request: u64,
    /// What every peer moved together for one request.
    pub bytes_moved_per_request: u64,
    /// Over all peers for one request.
    pub descriptors_per_request: u64,
    /// The request ends when its slowest peer does: per repetition percentile, the slowest
    /// peer's (ms).
    pub request_ms_p50: Option<f64>,
    pub request_ms_p99: Option<f64>,
    /// The same repetitions' p95, fastest and slowest (ms; issue 42, CollectiveX's `p95`, `min`,
    /// `max`): `synchronised` runs only, absent in reports from before them.
    #[serde(flatten)]
    pub spread: KvSpread,
    /// The slowest peer's p50 over the median peer's p50.
    pub slowest_over_median: Option<f64>,
    /// What the same request would take over a TCP fallback: the busiest rank's bytes at
    /// [`TCP_FALLBACK_BPS`] (ms).
    pub tcp_estimate_ms: f64,
    /// `--max-kv-ms`, when given.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_kv_ms: Option<f64>,
    pub peers: Vec<KvPeer>,
    /// The descriptor-count sweep (`--kv-descriptor-sweep`), when run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub descriptor_sweep: Vec<KvSweepPoint>,
    /// The TTFT line of the verdict.
    pub summary: String,
    /// The per-rank model: one process per rank (`ranks`), every repetition started on every
    /// rank together, so `request_ms_*` is a request's end-to-end time (first post of any rank
    /// to last completion of any rank) and each peer's times run from that same start. Absent
    /// (false): one process pair per read, each timed alone (files before it read as that).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub synchronised: bool,
    /// Synchronised repetitions measured (after the warm-up ones), per-rank model only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repetitions: Option<u64>,
    /// One record per rank process, per-rank model only.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ranks: Vec<KvRank>,
    /// The bulk row (issue 42): the same bytes between the same ranks as one contiguous
    /// descriptor per peer, the wire ceiling the paged request is measured against. Absent in
    /// reports from before it and where the main run ended early.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bulk: Option<KvBulk>,
    /// The cold path (issue 42): what the first request on fresh ranks paid, preparation
    /// included, beside the warm `request_ms_p50`. Per-rank model only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cold: Option<KvCold>,
    /// Bursts of requests in flight together (issue 42): per burst size, the aggregate rate and
    /// each request's completion within the burst, and the frontier between them. Absent in
    /// reports from before it, where the main run ended early, and in `gate`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bursts: Option<KvBursts>,
    /// Push and pull in one run (issue 42): the other operation's request on fresh ranks, and
    /// which operation the recipe's KV connector uses. Absent where it did not run (reports from
    /// before it, a main run that ended early, `gate`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub directions: Option<KvDirections>,
}

/// Push and pull of the same request in one run: the main run is `op`, this is the other.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KvDirections {
    /// The other operation's run (`write` where the main run read, `read` where it wrote).
    pub other: KvOpRow,
    /// The operation the recipe's KV connector uses (`read` or `write`); absent: not known (no
    /// `--recipe`, or a connector whose direction ic-bench does not know).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connector_op: Option<String>,
    /// Why: the connector the recipe names and where its direction comes from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connector: Option<String>,
}

/// One operation's request on fresh ranks of the same engine, memory and sides, bounded as the
/// bulk row is (one warm-up, at least three synchronised repetitions).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KvOpRow {
    /// `read` (decode pulls) or `write` (prefill pushes).
    pub op: String,
    /// Its request's times and rate, written flat.
    #[serde(flatten)]
    pub times: KvRowTimes,
    /// Whether its blocks arrived intact, over which paths, or why it measured nothing; flat.
    #[serde(flatten)]
    pub check: KvRowCheck,
}

/// The request figures a row run on fresh ranks shares with the main run (the bulk row, the
/// other operation), written flat in the row so the JSON keys are the main run's.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct KvRowTimes {
    /// Per request, end to end over every rank (ms); absent when not measured.
    pub request_ms_p50: Option<f64>,
    pub request_ms_p99: Option<f64>,
    /// Its p95, fastest and slowest request (ms), as the main run's.
    #[serde(flatten)]
    pub spread: KvSpread,
    /// Synchronised repetitions measured (after the warm-up).
    pub repetitions: Option<u64>,
    /// `bytes_moved_per_request` over `request_ms_p50` (bytes/s, all peers together).
    pub bandwidth_bps: Option<f64>,
}

impl KvRowTimes {
    /// The figures of a finished run's KV section: a p50 of zero or less is not a measurement,
    /// and the rate is known only with a p50.
    pub fn of(kv: &KvOutcome) -> KvRowTimes {
        let p50 = kv.request_ms_p50.filter(|ms| *ms > 0.0);
        KvRowTimes {
            request_ms_p50: p50,
            request_ms_p99: kv.request_ms_p99,
            spread: kv.spread,
            repetitions: kv.repetitions,
            bandwidth_bps: p50.map(|ms| kv.bytes_moved_per_request as f64 / (ms / 1e3)),
        }
    }
}

/// How a row run on fresh ranks ended, written flat after its figures.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct KvRowCheck {
    /// Every block arrived intact at its destination.
    pub verified: bool,
    /// The data paths its initiators reported, distinct, in peer order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub data_paths: Vec<String>,
    /// Why it measured nothing, if it did not (its figures are then not known).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
}

impl KvRowCheck {
    /// A run that measured nothing: not verified, and why.
    pub fn failed(why: &str) -> KvRowCheck {
        KvRowCheck {
            verified: false,
            data_paths: Vec::new(),
            failure: Some(why.to_string()),
        }
    }
}

/// The burst run: fresh ranks of the same engine, operation, memory and sides whose destination
/// buffers hold `requests` copies of the request (each its own blocks, verified), posting the
/// first `requests` of them together per repetition, for each burst size in turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KvBursts {
    /// One row per burst size measured, ascending.
    pub sizes: Vec<KvBurst>,
    /// The frontier: the smallest burst size whose aggregate rate reaches 90 % of the best
    /// measured; past it, more requests in flight add completion time (p95), not bandwidth.
    /// Absent when no size was measured.
    pub frontier: Option<u32>,
    /// Why the sizes stop where they do (memory, the run's time budget), when they stop below 64.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bounded_by: Option<String>,
    /// Every copy of every block arrived intact at its destination.
    pub verified: bool,
    /// The data paths the burst ranks' initiators reported, distinct, in peer order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub data_paths: Vec<String>,
    /// Why the burst run measured nothing, if it did not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
}

/// One burst size: `requests` whole requests posted together on every rank, timed from the
/// burst's first post (any rank) to each request's last completion (any rank).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KvBurst {
    /// Requests in flight together.
    pub requests: u32,
    /// Bursts measured (after one warm-up burst).
    pub repetitions: u64,
    /// The burst's end to end over its repetitions, p50 and p95 (nearest rank, ms).
    pub burst_ms_p50: f64,
    pub burst_ms_p95: f64,
    /// `requests × bytes_moved_per_request` over `burst_ms_p50` (bytes/s).
    pub aggregate_bps: f64,
    /// Each request's completion within its burst (ms from the burst's start), pooled over the
    /// repetitions: p50 and p95 (nearest rank).
    pub request_ms_p50: f64,
    pub request_ms_p95: f64,
    /// The fastest and slowest burst, and the first and last request's completion (ms; issue
    /// 42, CollectiveX's `min`/`max`); absent in reports from before them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst_ms_min: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub burst_ms_max: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_ms_min: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub request_ms_max: Option<f64>,
}

/// A request time's spread besides its p50 and p99 (ms), over the same repetitions: p95 (nearest
/// rank), the fastest and the slowest. Written flat beside `request_ms_p50` as
/// `request_ms_p95`, `request_ms_min`, `request_ms_max`; each absent where not measured.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct KvSpread {
    #[serde(default, rename = "request_ms_p95", skip_serializing_if = "Option::is_none")]
    pub p95: Option<f64>,
    #[serde(default, rename = "request_ms_min", skip_serializing_if = "Option::is_none")]
    pub min: Option<f64>,
    #[serde(default, rename = "request_ms_max", skip_serializing_if = "Option::is_none")]
    pub max: Option<f64>,
}

/// The cold path of a per-rank run: every rank's preparation once it had its peers' addresses
/// (UCX: endpoints and remote keys; NIXL: the peers' metadata loaded and the transfer requests
/// with their descriptor lists created), then the first request (the first warm-up repetition),
/// end to end as the measured ones. The buffers' registration comes before and is not in it (an
/// engine registers its KV cache once, at start-up, not per request).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KvCold {
    /// From the coordinator sending the peers' addresses to the last rank's "prepared" (ms).
    pub prepare_ms: f64,
    /// The first request's end to end (ms).
    pub first_request_ms: f64,
    /// `prepare_ms + first_request_ms`: what a request on fresh ranks paid.
    pub cold_ms: f64,
    /// `cold_ms` over the warm `request_ms_p50` (absent when that is not known).
    pub cold_over_warm: Option<f64>,
}

impl KvOutcome {
    /// The request's p50 (ms) when it is slower than the same bytes over a TCP fallback (its
    /// `tcp_estimate_ms`): the one comparison the pair's warning and the gate's finding share.
    pub fn p50_slower_than_tcp(&self) -> Option<f64> {
        self.request_ms_p50.filter(|p50| *p50 > self.tcp_estimate_ms)
    }
}

/// The bulk row: every peer's bytes of the paged request as one contiguous descriptor, on fresh
/// ranks of the same engine, operation, memory and sides (so what separates the two rows is the
/// paging: descriptor count and scatter), repetitions synchronised as the paged ones are.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KvBulk {
    /// One per peer.
    pub descriptors_per_request: u64,
    /// What every peer moved together for one request: the paged request's bytes.
    pub bytes_moved_per_request: u64,
    /// The bulk request's times and rate, written flat.
    #[serde(flatten)]
    pub times: KvRowTimes,
    /// The paged request's rate over the bulk one (the bulk p50 over the paged p50, same bytes):
    /// 1.0 is the wire ceiling, 0.25 a paged request at a quarter of it.
    pub paged_over_bulk: Option<f64>,
    /// Whether every peer's block arrived intact, over which paths, or why it measured nothing.
    #[serde(flatten)]
    pub check: KvRowCheck,
}

/// One rank process of the per-rank model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KvRank {
    /// `prefill` or `decode`.
    pub side: String,
    pub rank: u32,
    /// The rank's own pid (inside its PID namespace, for pods).
    pub pid: u32,
    /// The process the coordinator started for it, as the coordinator's host numbers it (local
    /// ranks; one per rank).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub launched_pid: Option<u32>,
    pub host: String,
    /// Whether it posted the requests (decode ranks for READ, prefill ranks for WRITE).
    pub initiator: bool,
    /// Its KV buffer, registered once for the whole run.
    pub buffer_bytes: u64,
    /// How many peer ranks it exchanged blocks with.
    pub peers: u32,
    /// Bytes it moved (sent or received) per request.
    pub bytes: u64,
    /// Initiators: mean time in its engine's post calls per request (NIXL's post, or issuing
    /// the UCX engine's blocks and flush), all peers together (ms).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub post_ms: Option<f64>,
    /// Its bytes over the request's p50 (bytes/s).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bandwidth_bps: Option<f64>,
    /// `cma/memory`, `rc_mlx5/mlx5_0:1`: what UCX's tables show for its requests (initiators).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub data_path: Option<String>,
    /// Blocks it checked as a destination (0 for a source).
    pub blocks_verified: u64,
    /// Repetitions it took part in (every rank the same, or the run failed).
    pub repetitions: u64,
    /// The CPUs it ran on, as the kernel lists them (`0-55,112-167`): its own affinity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpus: Option<String>,
    /// The NUMA node its CPUs lie on, where they lie on one (pinned there, or unpinned on a
    /// one-node machine).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub numa_node: Option<u32>,
    /// Why it runs there (`NUMA node 1 of GPU5`, `unpinned: one NUMA node …`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_placement: Option<String>,
}

/// The TCP fallback a KV estimate assumes per rank: 1 GB/s, the low end of the 1–3 GB/s a
/// TCP fallback gives (docs/platform notes; observed failures run at 0.3–0.5 GB/s).
pub const TCP_FALLBACK_BPS: f64 = 1e9;

/// One peer pair: a decode rank and the prefill rank it reads from (or that writes to it).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KvPeer {
    pub decode_rank: u32,
    pub prefill_rank: u32,
    pub descriptors: u64,
    pub descriptor_bytes: u64,
    pub bytes: u64,
    /// Per request (ms), over the repetitions.
    pub request_ms_p50: Option<f64>,
    pub request_ms_p99: Option<f64>,
    /// Mean time in NIXL's post call per request (ms); the rest of a request is the transfer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub post_ms: Option<f64>,
    pub bandwidth_bps: Option<f64>,
    pub repetitions: u64,
    /// Every block arrived intact on this peer's destination.
    pub verified: bool,
    pub data_path: Option<String>,
    /// Why the peer measured nothing, if it did not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
}

/// One point of the descriptor-count sweep: one request of `descriptors` blocks of the model's
/// block size between one pair of ranks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KvSweepPoint {
    pub descriptors: u64,
    pub descriptor_bytes: u64,
    pub request_ms_p50: Option<f64>,
    pub post_ms: Option<f64>,
    /// Mean post time over mean request time (capped at 1): where posting dominates.
    pub post_share: Option<f64>,
    pub bandwidth_bps: Option<f64>,
    pub verified: bool,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn times() -> KvRowTimes {
        KvRowTimes {
            request_ms_p50: Some(2.5),
            request_ms_p99: Some(3.0),
            spread: KvSpread {
                p95: Some(2.9),
                min: Some(2.0),
                max: Some(3.1),
            },
            repetitions: Some(5),
            bandwidth_bps: Some(1e9),
        }
    }

    fn check() -> KvRowCheck {
        KvRowCheck {
            verified: true,
            data_paths: vec!["cma/memory".into()],
            failure: None,
        }
    }

    /// The shared figures are written flat, in the keys and the order the rows had before they
    /// shared them (the JSON contract), and read back the same.
    #[test]
    fn the_rows_shared_figures_keep_their_flat_json_spelling() {
        let bulk = KvBulk {
            descriptors_per_request: 2,
            bytes_moved_per_request: 8,
            times: times(),
            paged_over_bulk: Some(0.25),
            check: check(),
        };
        let json = serde_json::to_string(&bulk).unwrap();
        let figures = r#""request_ms_p50":2.5,"request_ms_p99":3.0,"request_ms_p95":2.9,"request_ms_min":2.0,"request_ms_max":3.1,"repetitions":5,"bandwidth_bps":1000000000.0"#;
        let ended = r#""verified":true,"data_paths":["cma/memory"]"#;
        let want = format!(
            r#"{{"descriptors_per_request":2,"bytes_moved_per_request":8,{figures},"paged_over_bulk":0.25,{ended}}}"#
        );
        assert_eq!(json, want);
        assert_eq!(serde_json::from_str::<KvBulk>(&json).unwrap(), bulk);
        let row = KvOpRow {
            op: "write".into(),
            times: times(),
            check: check(),
        };
        let json = serde_json::to_string(&row).unwrap();
        assert_eq!(json, format!(r#"{{"op":"write",{figures},{ended}}}"#));
        assert_eq!(serde_json::from_str::<KvOpRow>(&json).unwrap(), row);
    }

    /// A row that measured nothing: its figures absent (`null` where the keys were always
    /// written), not verified, and why; absent figures read back as not known.
    #[test]
    fn a_row_that_measured_nothing_writes_null_figures_and_why() {
        let row = KvOpRow {
            op: "read".into(),
            times: KvRowTimes::default(),
            check: KvRowCheck::failed("kv-rank p1 exited early"),
        };
        let json = serde_json::to_string(&row).unwrap();
        let want = r#"{"op":"read","request_ms_p50":null,"request_ms_p99":null,"repetitions":null,"bandwidth_bps":null,"verified":false,"failure":"kv-rank p1 exited early"}"#;
        assert_eq!(json, want);
        let sparse = r#"{"op":"read","verified":false}"#;
        let read = serde_json::from_str::<KvOpRow>(sparse).unwrap();
        assert_eq!(read.times, KvRowTimes::default());
        assert!(read.check.failure.is_none() && read.check.data_paths.is_empty());
    }
}
