//! The sweep's progress on stderr: [`StderrObserver`] is `icb_sweep::run`'s observer (a bar on a
//! terminal, one line per finished pair otherwise: `progress::SweepProgress`). The pair runner
//! is `icb_sweep::kube::Sweeper`.

use super::progress::SweepProgress;
use icb_report::sweep_progress::last_pair;
use icb_sweep::results::SweepResults;
use icb_sweep::run::{SecondPass, Step, SweepObserver};

/// The sweep's progress on stderr: one `SweepProgress` per pass, the second pass's plan in one
/// line.
#[derive(Default)]
pub struct StderrObserver {
    progress: Option<SweepProgress>,
}

impl SweepObserver for StderrObserver {
    fn pass_started(&mut self, pass: u8, pairs: usize, rounds: usize) {
        self.progress = Some(SweepProgress::start(pass, pairs, rounds));
    }

    fn round(&mut self, _pass: u8, round: usize, pairs: usize) {
        if let Some(p) = &self.progress {
            p.round(round, pairs);
        }
    }

    fn pair(&mut self, results: &SweepResults, step: &Step) {
        if let (Some(p), Some((done, notable))) = (&self.progress, last_pair(results, step)) {
            p.pair(&done, notable);
        }
    }

    fn pass_ended(&mut self, _pass: u8) {
        self.progress = None;
    }

    fn second_pass(&mut self, plan: &SecondPass) {
        if let Some(line) = icb_report::sweep_progress::second_pass_line(plan) {
            eprintln!("ic-bench: {line}");
        }
    }
}
