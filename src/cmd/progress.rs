//! The live line on stderr while cases run: `case 17/60 · tag_bw 64 KiB host→host · 4.59 GB/s ·
//! data path so far: rdma, cuda ipc`. Only when stderr is a terminal and `-q` was not given: a
//! log, a pipe or CI sees nothing extra (stdout never carries it).
//!
//! A sweep's progress ([`SweepProgress`]) runs for minutes to hours, so a log needs it too: a bar
//! on a terminal, one line per finished pair when stderr is not one (CronJob logs); `-q` silences
//! both.

use icb_core::model::{BandwidthUnit, CaseResult, TransportClass};
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
    paths: Vec<TransportClass>,
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
            paths: Vec::new(),
        }
    }

    /// Case `index` of `total` (1-based) has finished.
    pub fn case(&mut self, index: usize, total: usize, c: &CaseResult) {
        let Some(bar) = &self.bar else { return };
        if let Some(t) = &c.transport
            && !self.paths.contains(&t.data_path.class)
        {
            self.paths.push(t.data_path.class);
        }
        bar.set_length(total as u64);
        bar.set_position(index as u64);
        bar.set_message(describe(c, self.unit, &self.paths));
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

/// `tag_bw 64 KiB host→host · 4.59 GB/s · data path so far: tcp, shared memory`.
fn describe(c: &CaseResult, unit: BandwidthUnit, paths: &[TransportClass]) -> String {
    use icb_report::text::{case_head, case_value};
    let mut s = format!("· {} · {}", case_head(c), case_value(c, unit));
    if !paths.is_empty() {
        let names: Vec<&str> = paths.iter().map(|p| p.as_str()).collect();
        s.push_str(&format!(" · data path so far: {}", names.join(", ")));
    }
    s
}

/// One finished pair of a sweep, as the progress shows it.
#[derive(Debug, Clone, PartialEq)]
pub struct PairDone<'a> {
    /// 1: the schedule; 2: the second pass.
    pub pass: u8,
    /// Pairs of this pass finished, this one included, and planned.
    pub done: usize,
    pub total: usize,
    /// The round this pair ran in (1-based) and the rounds of this pass.
    pub round: usize,
    pub rounds: usize,
    /// `node-1→node-4`.
    pub pair: &'a str,
    /// `pass (rdma, 22.01 GB/s)`, `fail (tcp, 1.00 GB/s)`, `unschedulable: …`.
    pub outcome: &'a str,
    pub seconds: f64,
    /// Pairs of this pass that are bad so far (failed, nothing measured, or slow against the
    /// pairs so far), this one included.
    pub failures: usize,
    pub eta: Option<Duration>,
}

/// Whether a finished pair stays printed above the bar: bad pairs (`✗`: failed or slow) and
/// pairs that say nothing about the fabric (`!`: unschedulable) do; good pairs only move the bar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Notable {
    No,
    Failed,
    Other,
}

/// The line a finished pair gets when stderr is not a terminal (CronJob logs, CI): everything on
/// one line, so `grep`, `kubectl logs` and log shippers see whole records.
/// `ic-bench: sweep pass 1 [3/12] round 2/6 node-1→node-4: fail (tcp, 1.00 GB/s) in 14.5s; 1 failed or slow so far; ETA 2m30s`
pub fn sweep_pair_line(p: &PairDone) -> String {
    format!(
        "ic-bench: sweep pass {} [{}/{}] round {}/{} {}: {} in {:.1}s; {} failed or slow so far; ETA {}",
        p.pass,
        p.done,
        p.total,
        p.round,
        p.rounds,
        p.pair,
        p.outcome,
        p.seconds,
        p.failures,
        p.eta.map_or_else(|| "unknown".to_string(), short_duration),
    )
}

/// The sweep bar: fixed-width fields first, then a message fitted to what is left of the line
/// ([`sweep_bar_room`]), so nothing is cut at the terminal's edge.
const SWEEP_BAR_TEMPLATE: &str = "{spinner} {elapsed:>4} {prefix} [{bar:12}] {pos}/{len} · {msg}";

/// Columns left for the message on a `width`-column terminal: the template's fixed parts
/// (spinner, elapsed, `pass P round R/N`, the bar, `done/total`) at their widest, and one column
/// spare so the cursor never wraps.
pub fn sweep_bar_room(width: u16, rounds: usize, total: usize) -> usize {
    let digits = |n: usize| n.to_string().len();
    let prefix = "pass 1 round ".len() + 2 * digits(rounds) + 1;
    let fixed = 1 + 1 + 4 + 1 + prefix + 1 + 14 + 1 + 2 * digits(total) + 1 + 3;
    usize::from(width).saturating_sub(fixed + 1)
}

/// `ETA 2m30s · 1 bad · node-1→node-4: fail (tcp, 1.00 GB/s)`, cut with `…` to `room` columns;
/// the ETA and the bad count come first so they are never the part cut.
pub fn sweep_bar_message(p: &PairDone, room: usize) -> String {
    let text = format!(
        "ETA {} · {} bad · {}: {}",
        p.eta.map_or_else(|| "?".to_string(), short_duration),
        p.failures,
        p.pair,
        p.outcome
    );
    if text.chars().count() <= room {
        return text;
    }
    let mut cut: String = text.chars().take(room.saturating_sub(1)).collect();
    cut.push('…');
    cut
}

/// Time left at the rate so far: `elapsed` for `done` of `total` pairs (pairs of a round run
/// at once, so the rate already counts the concurrency). `None` before the first pair.
pub fn sweep_eta(elapsed: Duration, done: usize, total: usize) -> Option<Duration> {
    (done > 0).then(|| elapsed.mul_f64(total.saturating_sub(done) as f64 / done as f64))
}

pub use icb_report::text::short_duration;

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

#[cfg(test)]
mod tests {
    use super::*;

    fn done<'a>(outcome: &'a str, eta: Option<Duration>) -> PairDone<'a> {
        PairDone {
            pass: 1,
            done: 3,
            total: 12,
            round: 2,
            rounds: 6,
            pair: "node-1→node-4",
            outcome,
            seconds: 14.46,
            failures: 1,
            eta,
        }
    }

    #[test]
    fn a_finished_pair_is_one_whole_log_line() {
        let line = sweep_pair_line(&done("fail (tcp, 1.00 GB/s)", Some(Duration::from_secs(150))));
        assert_eq!(
            line,
            "ic-bench: sweep pass 1 [3/12] round 2/6 node-1→node-4: fail (tcp, 1.00 GB/s) in 14.5s; 1 failed or slow so far; ETA 2m30s"
        );
        assert!(!line.contains('\n'));
        let unknown = sweep_pair_line(&done("pass (rdma, 22.00 GB/s)", None));
        assert!(unknown.ends_with("; 1 failed or slow so far; ETA unknown"), "{unknown}");
    }

    #[test]
    fn the_sweep_bar_fits_100_columns_and_keeps_eta_and_bad_count() {
        let long = PairDone {
            pair: "gpu-node-a100-0017.rack-3.example.internal→gpu-node-a100-0018.rack-3.example.internal",
            ..done("fail (tcp, 1.00 GB/s)", Some(Duration::from_secs(3720)))
        };
        let room = sweep_bar_room(100, 990, 490_545);
        let msg = sweep_bar_message(&long, room);
        // The widest fixed part: spinner, elapsed, prefix, bar and counts at their widest.
        let fixed = "⠁ 1h02 pass 1 round 990/990 [============] 490545/490545 · ";
        assert!(fixed.chars().count() + msg.chars().count() < 100, "{fixed}{msg}");
        assert!(msg.starts_with("ETA 1h02m · 1 bad · gpu-node"), "{msg}");
        assert!(msg.ends_with('…'), "{msg}");
        let short = sweep_bar_message(&done("pass (rdma, 22.00 GB/s)", None), sweep_bar_room(120, 6, 12));
        assert_eq!(short, "ETA ? · 1 bad · node-1→node-4: pass (rdma, 22.00 GB/s)");
    }

    #[test]
    fn eta_is_the_rate_so_far_times_what_is_left() {
        assert_eq!(sweep_eta(Duration::from_secs(30), 0, 12), None);
        // 3 pairs in 45 s (a round of 3 at once): 9 left take 135 s.
        assert_eq!(
            sweep_eta(Duration::from_secs(45), 3, 12),
            Some(Duration::from_secs(135))
        );
        assert_eq!(sweep_eta(Duration::from_secs(45), 12, 12), Some(Duration::ZERO));
    }

    #[test]
    fn durations_read_short() {
        assert_eq!(short_duration(Duration::from_millis(44_600)), "45s");
        assert_eq!(short_duration(Duration::from_secs(185)), "3m05s");
        assert_eq!(short_duration(Duration::from_secs(3720)), "1h02m");
    }

    #[test]
    fn quiet_or_no_terminal_draws_no_bar() {
        let p = SweepProgress::start_on(1, 4, 2, false, false);
        assert!(p.bar.is_none() && !p.lines);
        let p = SweepProgress::start_on(1, 4, 2, false, true);
        assert!(p.bar.is_none() && p.lines);
    }
}
