//! The live line on stderr while cases run: `case 17/60 · tag_bw 64 KiB host→host · 4.59 GB/s ·
//! data path so far: rdma, cuda ipc`. Only when stderr is a terminal and `-q` was not given: a
//! log, a pipe or CI sees nothing extra (stdout never carries it).
//!
//! A sweep's progress ([`SweepProgress`]) runs for minutes to hours, so a log needs it too: a bar
//! on a terminal, one line per finished pair when stderr is not one (CronJob logs); `-q` silences
//! both. [`StderrObserver`] shows a sweep's passes through it (`icb_sweep::run`'s observer).

use crate::sweep_progress::{
    Notable, PairDone, SWEEP_BAR_TEMPLATE, last_pair, second_pass_line, sweep_bar_message, sweep_bar_room,
    sweep_pair_line,
};
use crate::text::PathsSoFar;
use icb_core::model::{BandwidthUnit, CaseResult};
use icb_sweep::results::SweepResults;
use icb_sweep::run::{SecondPass, Step, SweepObserver};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::{IsTerminal as _, Write as _};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

/// `-q/--quiet`, set once by `main` before any subcommand runs.
static QUIET: AtomicBool = AtomicBool::new(false);

pub fn set_quiet(quiet: bool) {
    QUIET.store(quiet, Ordering::Relaxed);
}

pub fn quiet() -> bool {
    QUIET.load(Ordering::Relaxed)
}

/// How many cases a run of `settings` has (what the prefill side counts too).
pub fn total_cases(settings: &icb_core::RunSettings) -> usize {
    settings.case_list().len()
}

/// Where the live lines draw: stderr, leaving the cursor at the start of the bar's line after
/// every frame. indicatif pads each line to the full width and leaves the cursor on the right
/// edge; Ctrl-C's `^C` echo there wraps to a new line, the bar then clears that one instead and
/// a stale copy stays above the interrupt message. At column 0 the echo lands on the bar itself,
/// which the clear removes.
fn stderr_target() -> ProgressDrawTarget {
    ProgressDrawTarget::term_like_with_hz(Box::new(BarStderr), 20)
}

/// stderr as indicatif's terminal (the same ANSI sequences its own sends), with the carriage
/// return after each frame (see [`stderr_target`]).
#[derive(Debug)]
struct BarStderr;

impl BarStderr {
    fn put(&self, s: &str) -> std::io::Result<()> {
        std::io::stderr().lock().write_all(s.as_bytes())
    }
}

impl indicatif::TermLike for BarStderr {
    fn width(&self) -> u16 {
        terminal_size::terminal_size_of(std::io::stderr()).map_or(80, |(w, _)| w.0)
    }

    fn height(&self) -> u16 {
        terminal_size::terminal_size_of(std::io::stderr()).map_or(24, |(_, h)| h.0)
    }

    fn move_cursor_up(&self, n: usize) -> std::io::Result<()> {
        if n == 0 {
            Ok(())
        } else {
            self.put(&format!("\x1b[{n}A"))
        }
    }

    fn move_cursor_down(&self, n: usize) -> std::io::Result<()> {
        if n == 0 {
            Ok(())
        } else {
            self.put(&format!("\x1b[{n}B"))
        }
    }

    fn move_cursor_right(&self, n: usize) -> std::io::Result<()> {
        if n == 0 {
            Ok(())
        } else {
            self.put(&format!("\x1b[{n}C"))
        }
    }

    fn move_cursor_left(&self, n: usize) -> std::io::Result<()> {
        if n == 0 {
            Ok(())
        } else {
            self.put(&format!("\x1b[{n}D"))
        }
    }

    fn write_line(&self, s: &str) -> std::io::Result<()> {
        self.put(&format!("{s}\n"))
    }

    fn write_str(&self, s: &str) -> std::io::Result<()> {
        self.put(s)
    }

    fn clear_line(&self) -> std::io::Result<()> {
        self.put("\r\x1b[2K")
    }

    /// indicatif flushes once, at the end of a frame.
    fn flush(&self) -> std::io::Result<()> {
        let mut err = std::io::stderr().lock();
        err.write_all(b"\r")?;
        err.flush()
    }
}

/// The live line of one run; does nothing when it must not draw.
pub struct CaseProgress {
    bar: Option<ProgressBar>,
    unit: BandwidthUnit,
    paths: PathsSoFar,
}

impl CaseProgress {
    /// Starts the line for `total` cases when stderr is a terminal and not `-q`.
    pub fn start(total: usize, unit: BandwidthUnit) -> Self {
        let draw = !quiet() && std::io::stderr().is_terminal();
        let bar = draw.then(|| {
            let bar = ProgressBar::with_draw_target(Some(total as u64), stderr_target());
            // `wide_msg` takes what the terminal has left and is cut there: the line never wraps.
            let style = ProgressStyle::with_template("{spinner} {elapsed:>4} case {pos}/{len} {wide_msg}")
                .unwrap_or_else(|_| ProgressStyle::default_spinner());
            bar.set_style(style);
            bar.set_message("starting both sides…");
            bar.enable_steady_tick(Duration::from_millis(250));
            bar
        });
        CaseProgress {
            bar,
            unit,
            paths: PathsSoFar::default(),
        }
    }

    /// Case `index` of `total` (1-based) has finished.
    pub fn case(&mut self, index: usize, total: usize, c: &CaseResult) {
        let Some(bar) = &self.bar else { return };
        self.paths.add(c);
        bar.set_length(total as u64);
        bar.set_position(index as u64);
        bar.set_message(self.paths.progress_text(c, self.unit));
    }

    /// Removes the line, so the report that follows starts on a clean terminal.
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

impl Drop for CaseProgress {
    fn drop(&mut self) {
        self.finish();
    }
}

/// A sweep pass's progress on stderr: an indicatif bar on a terminal (pairs done/total, round,
/// ETA, failures so far, the last pair; failed pairs stay printed above it), one line per
/// finished pair otherwise ([`sweep_pair_line`]), nothing with `-q`.
pub struct SweepProgress {
    bar: Option<ProgressBar>,
    lines: bool,
    pass: u8,
    rounds: usize,
}

impl SweepProgress {
    /// Starts the progress of pass `pass`: `total` pairs in `rounds` rounds.
    pub fn start(pass: u8, total: usize, rounds: usize) -> Self {
        let terminal = std::io::stderr().is_terminal();
        Self::start_on(pass, total, rounds, !quiet() && terminal, !quiet() && !terminal)
    }

    fn start_on(pass: u8, total: usize, rounds: usize, bar: bool, lines: bool) -> Self {
        let bar = bar.then(|| {
            let bar = ProgressBar::with_draw_target(Some(total as u64), stderr_target());
            let style = ProgressStyle::with_template(SWEEP_BAR_TEMPLATE)
                .unwrap_or_else(|_| ProgressStyle::default_bar())
                .progress_chars("=> ");
            bar.set_style(style);
            bar.set_prefix(format!("pass {pass} round 0/{rounds}"));
            bar.set_message("starting the first round…");
            bar.enable_steady_tick(Duration::from_millis(250));
            bar
        });
        SweepProgress {
            bar,
            lines,
            pass,
            rounds,
        }
    }

    /// Round `round` (1-based) of this pass has started with `pairs` pairs.
    pub fn round(&self, round: usize, pairs: usize) {
        if let Some(bar) = &self.bar {
            bar.set_prefix(format!("pass {} round {round}/{}", self.pass, self.rounds));
            if bar.position() == 0 {
                bar.set_message(format!("{pairs} pairs running"));
            }
        }
    }

    /// A pair has finished.
    pub fn pair(&self, p: &PairDone, notable: Notable) {
        if let Some(bar) = &self.bar {
            match notable {
                Notable::Failed => bar.println(format!("✗ {}: {}", p.pair, p.outcome)),
                Notable::Other => bar.println(format!("! {}: {}", p.pair, p.outcome)),
                Notable::No => {}
            }
            bar.set_position(p.done as u64);
            let width = terminal_size::terminal_size_of(std::io::stderr()).map_or(80, |(w, _)| w.0);
            bar.set_message(sweep_bar_message(p, sweep_bar_room(width, self.rounds, p.total)));
        } else if self.lines {
            eprintln!("{}", sweep_pair_line(p));
        }
    }

    /// Removes the bar, so what follows starts on a clean line.
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}

impl Drop for SweepProgress {
    fn drop(&mut self) {
        self.finish();
    }
}

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
        if let Some(line) = second_pass_line(plan) {
            eprintln!("ic-bench: {line}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quiet_or_no_terminal_draws_no_bar() {
        let p = SweepProgress::start_on(1, 4, 2, false, false);
        assert!(p.bar.is_none() && !p.lines);
        let p = SweepProgress::start_on(1, 4, 2, false, true);
        assert!(p.bar.is_none() && p.lines);
    }
}
