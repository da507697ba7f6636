//! What a run's settings may be: the limits both sides enforce, and the benchmark-only controls
//! read from the environment.

use crate::error::EngineError;
use icb_core::RunSettings;

/// Checks settings against the limits both sides enforce, so front ends can refuse bad values
/// before starting anything (the peer checks them again: nothing it receives is trusted).
pub fn validate(s: &RunSettings) -> Result<(), EngineError> {
    let bad = |m: String| Err(EngineError::Settings(m));
    if s.tests.is_empty() || s.memory.is_empty() || s.sizes.is_empty() {
        return bad("nothing to run: give at least one test, memory pair and size".into());
    }
    if let Some(&z) = s
        .sizes
        .iter()
        .find(|&&z| z == 0 || z > crate::messages::MAX_MESSAGE_SIZE)
    {
        return bad(format!("message size {z} is outside 1 B … 16 GiB"));
    }
    if s.window == 0 || s.window > crate::messages::MAX_WINDOW {
        return bad(format!(
            "window {} is outside 1 … {}",
            s.window,
            crate::messages::MAX_WINDOW
        ));
    }
    let t_ok = |t: f64| t.is_finite() && t > 0.0 && t <= 3600.0;
    if let Some(b) = s.blocks
        && (b == 0 || b > crate::messages::MAX_BLOCKS)
    {
        return bad(format!("{b} blocks is outside 1 … {}", crate::messages::MAX_BLOCKS));
    }
    if let Some(shape) = s.plan.iter().find(|c| {
        c.blocks
            .is_some_and(|b| b == 0 || b > crate::messages::MAX_BLOCKS || !c.test.is_rma())
    }) {
        return bad(format!(
            "{} with {} blocks: blocks are 1 … {} and for put_bw/get_bw only",
            shape.test,
            shape.blocks.unwrap_or(0),
            crate::messages::MAX_BLOCKS
        ));
    }
    if let Some(r) = s.stop
        && !(r.rel_half_width > 0.0
            && r.rel_half_width < 1.0
            && r.confidence > 0.5
            && r.confidence < 1.0
            && r.round_s > 0.0
            && r.round_s <= 60.0
            && r.min_rounds >= 2)
    {
        return bad(format!(
            "stop rule {r:?}: the bound and confidence must be in (0, 1), rounds ≥ 2 of (0, 60] s"
        ));
    }
    if !t_ok(s.min_time_s) || !t_ok(s.max_time_s) || s.min_time_s > s.max_time_s {
        return bad(format!(
            "min time {} s / max time {} s: both must be in (0, 3600] with min ≤ max",
            s.min_time_s, s.max_time_s
        ));
    }
    Ok(())
}

/// Benchmark-only controls, read from the environment on purpose (no CLI flag: they exist for
/// `scripts/bench-ucx` to compare methodology with ucx_perftest, not for a verdict). Whatever
/// they change is recorded in the report's settings. `IC_BENCH_UNTOUCHED_BUFFERS=1`: move
/// buffers that were never written, like perftest (nothing is verified). `IC_BENCH_WINDOWS=1,8,32,128`:
/// auto-tune the window over these candidates. `IC_BENCH_FIXED_STOP=1`: no adaptive stop, each case
/// runs exactly its minimum iterations (and minimum time), as perftest's `-n` does.
pub(crate) fn apply_bench_controls(
    settings: &mut RunSettings,
    var: impl Fn(&str) -> Option<String>,
) -> Result<(), EngineError> {
    if let Some(v) = var("IC_BENCH_UNTOUCHED_BUFFERS") {
        settings.untouched_buffers = match v.trim() {
            "1" | "true" | "yes" => true,
            "" | "0" | "false" | "no" => false,
            other => {
                return Err(EngineError::Settings(format!(
                    "IC_BENCH_UNTOUCHED_BUFFERS={other}: use 1 or 0"
                )));
            }
        };
    }
    if let Some(v) = var("IC_BENCH_FIXED_STOP") {
        match v.trim() {
            "1" | "true" | "yes" => settings.stop = None,
            "" | "0" | "false" | "no" => {}
            other => {
                return Err(EngineError::Settings(format!(
                    "IC_BENCH_FIXED_STOP={other}: use 1 or 0"
                )));
            }
        }
    }
    if let Some(v) = var("IC_BENCH_WINDOWS").filter(|v| !v.trim().is_empty()) {
        let mut windows = Vec::new();
        for part in v.split(',') {
            match part.trim().parse::<u32>() {
                Ok(w) if (1..=crate::messages::MAX_WINDOW).contains(&w) => windows.push(w),
                _ => {
                    return Err(EngineError::Settings(format!(
                        "IC_BENCH_WINDOWS={v}: give windows between 1 and {}, e.g. 1,8,32,128",
                        crate::messages::MAX_WINDOW
                    )));
                }
            }
        }
        settings.window_candidates = windows;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use icb_core::TestKind;

    #[test]
    fn bench_controls_come_from_the_environment_and_bad_values_are_one_line_errors() {
        let mut s = RunSettings::verdict_profile();
        apply_bench_controls(&mut s, |_| None).unwrap();
        assert!(!s.untouched_buffers && s.window_candidates.is_empty());
        let env = |k: &str| match k {
            "IC_BENCH_UNTOUCHED_BUFFERS" => Some("1".to_string()),
            "IC_BENCH_WINDOWS" => Some("1, 8,32,128".to_string()),
            _ => None,
        };
        apply_bench_controls(&mut s, env).unwrap();
        assert!(s.untouched_buffers);
        assert_eq!(s.window_candidates, vec![1, 8, 32, 128]);
        let e = apply_bench_controls(&mut s, |k| (k == "IC_BENCH_WINDOWS").then(|| "8,x".into())).unwrap_err();
        assert!(
            e.to_string().contains("IC_BENCH_WINDOWS=8,x") && !e.to_string().contains('\n'),
            "{e}"
        );
        let e = apply_bench_controls(&mut s, |k| (k == "IC_BENCH_UNTOUCHED_BUFFERS").then(|| "maybe".into()));
        assert!(e.is_err());
        // The fixed stop: exactly the minimum iterations, as perftest's -n.
        assert!(s.stop.is_some());
        apply_bench_controls(&mut s, |k| (k == "IC_BENCH_FIXED_STOP").then(|| "1".into())).unwrap();
        assert!(s.stop.is_none());
        let e = apply_bench_controls(&mut s, |k| (k == "IC_BENCH_FIXED_STOP").then(|| "sure".into())).unwrap_err();
        assert!(e.to_string().contains("IC_BENCH_FIXED_STOP=sure"), "{e}");
    }

    #[test]
    fn validate_refuses_bad_blocks_and_stop_rules() {
        let mut s = RunSettings::verdict_profile();
        validate(&s).unwrap();
        s.plan.push(icb_core::CaseShape::blocks(TestKind::TagBw, 8, 4));
        assert!(validate(&s).is_err());
        let mut s = RunSettings::full_curve();
        s.blocks = Some(0);
        assert!(validate(&s).is_err());
        let mut s = RunSettings::verdict_profile();
        s.stop = Some(icb_core::StopRule {
            rel_half_width: 0.0,
            ..icb_core::StopRule::DEFAULT
        });
        assert!(validate(&s).is_err());
    }
}
