//! What a per-rank run gathered so far, kept where the `pair` process can still read it once a
//! signal cancels the run (the coordinating future is dropped then): the ranks' records once
//! every rank said hello, each measured repetition as it completes, the warm-up count. A local
//! coordinator updates it directly; `ic-bench kv-coordinate` prints each step as one
//! [`PROGRESS`] line, which the `pair` process reads back into the same state. An interrupted
//! run's partial report is assembled from it.

use super::coordinator::PROGRESS;
use super::rank_report::{RankRecord, RepTimes};
use icb_pair::PairError;
use serde::{Deserialize, Serialize};

/// One step of the coordinator's progress.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Progress {
    /// Every rank said hello: their records (engine metadata left out: only the ranks need it).
    Ranks { records: Vec<RankRecord> },
    /// One more measured repetition, after `warmup` warm-up ones.
    Measured { warmup: u64, rep: RepTimes },
}

/// Where a coordinator hands each step of its progress (a write that fails ends the run).
pub type ProgressSink<'a> = dyn FnMut(Progress) -> Result<(), PairError> + Send + 'a;

impl Progress {
    /// The step as the coordinator's output line (`icb-kv-progress JSON`, no newline).
    pub fn to_line(&self) -> Result<String, PairError> {
        serde_json::to_string(self)
            .map(|json| format!("{PROGRESS}{json}"))
            .map_err(|e| PairError::Setup(format!("internal: the KV progress line: {e}")))
    }

    /// A coordinator's output line as a step: `None` when it is not a progress line, an error
    /// naming the line's start when it is one that does not parse.
    pub fn from_line(line: &str) -> Option<Result<Progress, PairError>> {
        let json = line.strip_prefix(PROGRESS)?;
        Some(serde_json::from_str(json).map_err(|e| {
            let start: String = json.chars().take(60).collect();
            PairError::Setup(format!(
                "the KV coordinator's progress line does not parse ({e}): {start:?}"
            ))
        }))
    }
}

/// The records and measured repetitions gathered so far.
#[derive(Debug, Clone, Default)]
pub struct PartialKv {
    pub records: Vec<RankRecord>,
    pub reps: Vec<RepTimes>,
    pub warmup: u64,
}

impl PartialKv {
    pub fn apply(&mut self, step: Progress) {
        match step {
            Progress::Ranks { records } => self.records = records,
            Progress::Measured { warmup, rep } => {
                self.warmup = warmup;
                self.reps.push(rep);
                tracing::info!("measured KV repetition {}", self.reps.len());
            }
        }
    }
}

/// Applies each step to `partial` (shared with whoever reads it after a cancel).
pub fn into_shared(partial: &std::sync::Mutex<PartialKv>) -> impl FnMut(Progress) -> Result<(), PairError> + Send + '_ {
    move |step| {
        partial
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .apply(step);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use icb_core::protocol::kv_rank::{RankId, RankSide};

    fn record(side: RankSide, rank: u32) -> RankRecord {
        RankRecord::new(
            RankId { side, rank },
            40 + rank,
            Default::default(),
            String::new(),
            4096,
        )
    }

    /// The records, then two repetitions, each through its line: the state holds them all, in
    /// order, with the warm-up count.
    #[test]
    fn progress_lines_rebuild_what_the_coordinator_gathered() {
        let steps = [
            Progress::Ranks {
                records: vec![record(RankSide::Prefill, 0), record(RankSide::Decode, 0)],
            },
            Progress::Measured {
                warmup: 2,
                rep: RepTimes {
                    ranks: vec![(
                        RankId {
                            side: RankSide::Decode,
                            rank: 0,
                        },
                        7,
                        vec![1],
                        vec![900],
                    )],
                },
            },
            Progress::Measured {
                warmup: 2,
                rep: RepTimes {
                    ranks: vec![(
                        RankId {
                            side: RankSide::Decode,
                            rank: 0,
                        },
                        9,
                        vec![2],
                        vec![800],
                    )],
                },
            },
        ];
        let mut partial = PartialKv::default();
        for step in steps {
            let line = step.to_line().unwrap();
            assert!(line.starts_with(PROGRESS) && !line.contains('\n'), "{line}");
            partial.apply(Progress::from_line(&line).expect("a progress line").unwrap());
        }
        let ids: Vec<_> = partial.records.iter().map(|r| (r.id.side, r.id.rank, r.pid)).collect();
        assert_eq!(ids, [(RankSide::Prefill, 0, 40), (RankSide::Decode, 0, 40)]);
        assert_eq!(partial.warmup, 2);
        let starts: Vec<u64> = partial.reps.iter().map(|r| r.ranks[0].1).collect();
        assert_eq!(starts, [7, 9]);
    }

    /// Other output is not progress; a progress line cut short or of an unknown event is a
    /// one-line error naming it.
    #[test]
    fn a_garbled_progress_line_is_a_one_line_error() {
        assert!(Progress::from_line("icb-kv-listening 4000").is_none());
        assert!(Progress::from_line("some warning from the engine").is_none());
        for bad in [
            format!("{PROGRESS}{{\"event\":\"measured\",\"warmup\":2,\"rep\":{{\"ranks\":[[{{\"si"),
            format!("{PROGRESS}{{\"event\":\"finished\"}}"),
            format!("{PROGRESS}not json"),
        ] {
            let Some(Err(PairError::Setup(e))) = Progress::from_line(&bad) else {
                panic!("{bad}: not an error");
            };
            assert!(
                e.starts_with("the KV coordinator's progress line does not parse"),
                "{e}"
            );
            assert!(!e.contains('\n'), "{e}");
        }
    }
}
