//! icb-sweep: qualification of many nodes at once, without the I/O.
//!
//! `ic-bench sweep` measures node pairs with the pair pipeline (one `run_pair` per pair, pairs of
//! a round concurrently); this crate decides everything around that and is tested without a
//! cluster: which pairs run in which round ([`schedule`]: all-pairs round-robin tournament, ring,
//! bipartite pools, intra-node, and a linear-cost ring + k random perfect matchings for large
//! clusters), which nodes the results blame ([`score`]: per-node median, median-absolute-deviation
//! outliers, transport failures, a second pass that re-pairs each suspect with two nodes that
//! passed, and unschedulable kept apart from bad fabric), and the results file ([`results`]:
//! `ic-bench.sweep/v1`, rewritten atomically after every pair, read back by `--resume`, whose criteria merging is [`resume`]), and how
//! a sweep runs ([`run`]: the passes, stops and verdicts around a [`run::PairRunner`] that
//! measures one pair; the Kubernetes runner is `icb-sweep-kube`'s, the tests' a script), and which
//! node verdicts become node labels ([`labels`], with the reason annotated beside them), and the
//! node-pair matrix that schedulers read ([`matrix`]). How the
//! results are shown (table, JSON, JUnit, Prometheus text, the HTML report) is `icb-report`'s,
//! behind the same exporter trait as pair and probe reports; this crate never renders.
#![forbid(unsafe_code)]

pub mod fleet;
pub mod labels;
pub mod matrix;
pub mod nic;
pub mod outcome;
pub mod outliers;
pub mod rails;
pub mod results;
pub mod resume;
pub mod run;
pub mod schedule;
pub mod score;

pub use icb_core::model::Criteria;
pub use rails::{MovedCounters, NodeRail, RailNic, RailSummary, bad_rails_annotation};
pub use results::{LatencyPoint, Outcome, PairResult, ResultsFileError, SizePoint, StopReason, Stopped, SweepResults};
pub use run::{PairEnd, PairRunner, Pass, SecondPass, Step, SweepEnd, SweepEnding, SweepObserver, SweepRun, run_sweep};
pub use schedule::{Pair, Round, Schedule};
pub use score::{BadRail, NodeStatus, NodeVerdict};
