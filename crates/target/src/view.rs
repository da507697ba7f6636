//! What a `pair` run shows on stderr while it runs (`icb_pair::target::RunView`): one case bar
//! (pipeline targets; a KV run's cases counted as they end), a line per case of a rails run, and
//! in place only what is said (its sides print their own). The binary drives every target with it.

use crate::target::{PairTarget, RunView};
use icb_core::model::{BandwidthUnit, PairReport, RunSettings};
use icb_report::live::CaseProgress;

enum Shown {
    /// One bar over the cases the pipeline numbers.
    Bar(usize),
    /// One bar over this many cases, counted as they end (a KV run's ranks, sweep, control).
    Counted(usize),
    /// One line per case, named by its rail.
    RailLines,
    /// No bar: an in-place run.
    Said,
}

pub struct TerminalView {
    shown: Shown,
    unit: BandwidthUnit,
    bar: Option<CaseProgress>,
    done: usize,
}

impl TerminalView {
    pub fn of(target: &PairTarget, settings: &RunSettings) -> TerminalView {
        let shown = match target {
            PairTarget::Local(_) | PairTarget::Kube(_) => Shown::Bar(icb_report::live::total_cases(settings)),
            PairTarget::Kv(t) => Shown::Counted(t.cases()),
            PairTarget::LocalRails(_) | PairTarget::KubeRails(_) => Shown::RailLines,
            PairTarget::InPlace(_) => Shown::Said,
        };
        TerminalView {
            shown,
            unit: settings.unit,
            bar: None,
            done: 0,
        }
    }
}

impl RunView for TerminalView {
    fn starting(&mut self) {
        if let Shown::Bar(total) | Shown::Counted(total) = self.shown {
            self.bar = Some(CaseProgress::start(total, self.unit));
        }
    }

    fn case(&mut self, rail: Option<usize>, p: &icb_core::protocol::CaseProgress) {
        if let Some(rail) = rail {
            eprintln!("rail {rail}: {}", icb_report::text::case_line(&p.case, self.unit));
            return;
        }
        let Some(bar) = self.bar.as_mut() else { return };
        match self.shown {
            Shown::Counted(total) => {
                self.done += 1;
                bar.case(self.done, total, &p.case);
            }
            _ => bar.case(p.index, p.total, &p.case),
        }
    }

    fn say(&mut self, line: &str) {
        eprintln!("ic-bench: {line}");
    }

    /// Which UCX each side loaded; identical lines for the two sides read as one.
    fn ucx_loaded(&mut self, report: &PairReport) {
        for line in icb_report::text::ucx_loaded_lines(report) {
            eprintln!("ic-bench: in-place: {line}");
        }
    }
}

/// One line per case on stderr, named by its rail (`connect --rails`, which has no target).
pub fn rail_lines(unit: BandwidthUnit) -> impl FnMut(&icb_rails::RailRow, &icb_core::protocol::CaseProgress) {
    move |row, p| eprintln!("rail {}: {}", row.index, icb_report::text::case_line(&p.case, unit))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pipeline target gets one bar over every case, drawn once the sides start; a KV run's
    /// bar counts the cases as they end.
    #[test]
    fn a_pipeline_target_gets_one_bar_once_its_sides_start() {
        let settings = RunSettings::full_curve();
        let local = PairTarget::Local(icb_pair::local::LocalOptions::new("/bin/true".into()));
        let mut view = TerminalView::of(&local, &settings);
        let total = icb_report::live::total_cases(&settings);
        assert!(total > 0 && matches!(view.shown, Shown::Bar(n) if n == total));
        assert!(view.bar.is_none());
        view.starting();
        assert!(view.bar.is_some());
        assert_eq!(view.done, 0);
    }
}
