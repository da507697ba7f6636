//! The live line on stderr while cases run: `case 17/60 · tag_bw 64 KiB host→host · 4.59 GB/s ·
//! data path so far: rdma, cuda ipc`. Only when stderr is a terminal and `-q` was not given: a
//! log, a pipe or CI sees nothing extra (stdout never carries it).

use icb_core::model::{BandwidthUnit, CaseResult, CaseStatus, TransportClass};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal as _;
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
            let bar = ProgressBar::with_draw_target(Some(total as u64), ProgressDrawTarget::stderr());
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
    let mut s = format!("· {} {} {}", c.operation(), c.shape(), c.memory);
    match (c.status, &c.measurement) {
        (CaseStatus::Measured, Some(m)) => {
            if let Some(bps) = m.bandwidth_bps {
                let v = unit.from_bytes_per_s(bps);
                // Three significant digits below 1, so small-message rates do not all read 0.00.
                let decimals = if v > 0.0 && v < 1.0 {
                    (2 - v.log10().floor() as i32).clamp(2, 9) as usize
                } else {
                    2
                };
                s.push_str(&format!(" · {v:.decimals$} {}", unit.label()));
            } else if let Some(l) = &m.latency_us {
                s.push_str(&format!(" · p50 {:.2} µs", l.p50));
            }
        }
        (CaseStatus::Skipped, _) => s.push_str(" · skipped"),
        _ => s.push_str(" · failed"),
    }
    if !paths.is_empty() {
        let names: Vec<&str> = paths.iter().map(|p| p.as_str()).collect();
        s.push_str(&format!(" · data path so far: {}", names.join(", ")));
    }
    s
}
