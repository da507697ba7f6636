//! In-place runs are bounded for production pods: each side gets at most `--side-timeout` of
//! transfers, the cases are fitted into it, and buffers stay at or under 256 MiB.

use icb_core::model::RunSettings;
use std::time::Duration;

/// The largest buffer an in-place run registers (per side, per case).
pub const MAX_BUFFER: u64 = 256 * 1024 * 1024;
/// Sizes when `--sizes` is not given: enough to see latency and bandwidth, little time and memory.
pub const DEFAULT_SIZES: &[u64] = &[8, 64 * 1024, 1024 * 1024, 16 * 1024 * 1024];
/// The share of `--side-timeout` the cases may use (the rest: UCX start-up and wire-up).
const MEASURE_SHARE: f64 = 0.7;
/// Below this per-case time a measurement means nothing.
const MIN_CASE_TIME_S: f64 = 0.02;

/// Why the cases cannot be run in place; the message names the flag to change.
#[derive(Debug, thiserror::Error)]
pub enum FitError {
    #[error("--sizes: {0} bytes is over in-place mode's 256 MiB buffer bound: use sizes up to 256MiB")]
    BufferTooLarge(u64),
    #[error(
        "{cases} cases do not fit in --side-timeout {secs}s: give fewer --tests/--sizes/--memory or raise --side-timeout"
    )]
    TooManyCases { cases: usize, secs: u64 },
}

/// Fits `settings` into the side budget and the buffer bound; the notes say what changed.
/// `keep_cases`: the user chose the sizes (or the engine's own plan is bounded already);
/// otherwise in-place mode's own small curve replaces the profile's cases.
pub fn fit_settings(
    settings: &mut RunSettings,
    keep_cases: bool,
    side_timeout: Duration,
) -> Result<Vec<String>, FitError> {
    let mut notes = Vec::new();
    if !keep_cases {
        settings.plan.clear();
        settings.sizes = DEFAULT_SIZES.to_vec();
    }
    let shapes = settings.case_list();
    if let Some((big, _)) = shapes
        .iter()
        .find(|(c, _)| c.size.saturating_mul(u64::from(c.blocks.unwrap_or(1))) > MAX_BUFFER)
    {
        return Err(FitError::BufferTooLarge(big.size));
    }
    let cases = shapes.len();
    let per_case = side_timeout.as_secs_f64() * MEASURE_SHARE / cases as f64;
    if per_case < MIN_CASE_TIME_S {
        return Err(FitError::TooManyCases {
            cases,
            secs: side_timeout.as_secs(),
        });
    }
    if settings.max_time_s > per_case {
        settings.max_time_s = per_case;
        settings.min_time_s = settings.min_time_s.min(per_case);
        notes.push(format!(
            "in-place: {cases} cases fitted into --side-timeout {}s: at most {per_case:.2}s each",
            side_timeout.as_secs()
        ));
    }
    Ok(notes)
}

#[cfg(test)]
mod tests {
    use super::*;
    use icb_core::{BandwidthUnit, MemoryPair, TestKind};

    fn settings() -> RunSettings {
        RunSettings {
            tests: vec![TestKind::TagBw, TestKind::TagLat],
            sizes: vec![8],
            memory: vec![MemoryPair::HOST_HOST],
            warmup_iterations: 1,
            min_iterations: 1,
            min_time_s: 0.2,
            max_time_s: 5.0,
            window: 1,
            unit: BandwidthUnit::GBps,
            require_cuda: false,
            stop: None,
            plan: Vec::new(),
            blocks: None,
            window_candidates: Vec::new(),
            untouched_buffers: false,
            cuda_alloc: Default::default(),
        }
    }

    #[test]
    fn settings_are_fitted_into_the_side_budget() {
        let mut s = settings();
        let notes = fit_settings(&mut s, false, Duration::from_secs(15)).unwrap();
        assert_eq!(s.sizes, DEFAULT_SIZES);
        // 2 tests × 4 sizes: 15 s × 0.7 / 8 per case.
        assert!((s.max_time_s - 15.0 * 0.7 / 8.0).abs() < 1e-9, "{}", s.max_time_s);
        assert!(s.min_time_s <= s.max_time_s);
        assert_eq!(notes.len(), 1);
        let mut big = settings();
        big.sizes = vec![512 * 1024 * 1024];
        assert!(matches!(
            fit_settings(&mut big, true, Duration::from_secs(15)),
            Err(FitError::BufferTooLarge(_))
        ));
        let mut many = settings();
        many.sizes = (0..1000).collect();
        let err = fit_settings(&mut many, true, Duration::from_secs(15)).unwrap_err();
        assert!(matches!(err, FitError::TooManyCases { cases: 2000, secs: 15 }), "{err}");
    }
}
