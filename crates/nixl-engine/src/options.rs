//! What the NIXL engine is asked to do beyond the UCX engine's options.

use icb_core::{CaseShape, Direction, RunSettings, TestKind};
use icb_engine::RequestError;
use icb_engine::messages::MAX_WINDOW;
use std::path::PathBuf;

/// Descriptors per request when the caller gives none: one block, a 64-page and a 1024-page KV
/// transfer.
pub const DEFAULT_BATCHES: [u32; 3] = [1, 64, 1024];

/// NIXL-specific options, next to `icb_engine::ServeOptions` / `ConnectOptions` (whose `ucx`
/// field the NIXL engine ignores: NIXL brings its own UCX).
#[derive(Debug, Clone)]
pub struct NixlOptions {
    /// Directory holding `libnixl_capi.so` (else `IC_BENCH_NIXL_LIB`, NIXL's install locations,
    /// the Python wheel's directory, the dynamic linker).
    pub library_dir: Option<PathBuf>,
    /// Descriptors per request (connect side); each descriptor is one block of a size from
    /// `settings.sizes`.
    pub batches: Vec<u32>,
    /// READ and/or WRITE (connect side).
    pub directions: Vec<Direction>,
    /// UCX backend parameters replacing NIXL's plugin defaults (e.g. `("ucx_devices", "mlx5_0")`).
    pub backend_params: Vec<(String, String)>,
}

impl Default for NixlOptions {
    fn default() -> Self {
        NixlOptions {
            library_dir: None,
            batches: DEFAULT_BATCHES.to_vec(),
            directions: vec![Direction::Read, Direction::Write],
            backend_params: Vec::new(),
        }
    }
}

/// The NIXL engine's verdict cases (`--profile verdict` with no explicit cases): READ and WRITE
/// of KV-page-like descriptor lists — 16 KiB pages at 1, 64 and 1024 descriptors (one page, a
/// small and a large KV transfer) and 1 MiB blocks at 1 and 64 (the 64-descriptor request is held
/// to the bandwidth floor; one 1 MiB descriptor is too little in flight for a floor, see
/// `icb_core::verdict::MIN_MESSAGES_IN_FLIGHT_FOR_BANDWIDTH`, and is judged on its data path).
/// At most 64 MiB per request, so it fits any GPU and a small host.
pub fn verdict_plan() -> Vec<CaseShape> {
    const SHAPES: [(u64, u32); 5] = [
        (16 << 10, 1),
        (16 << 10, 64),
        (16 << 10, 1024),
        (1 << 20, 1),
        (1 << 20, 64),
    ];
    [Direction::Read, Direction::Write]
        .into_iter()
        .flat_map(|d| SHAPES.map(|(size, batch)| CaseShape::blocks(d.test_kind(), size, batch)))
        .collect()
}

/// Block sizes of the NIXL engine's full curve (`--profile full`), KV pages to large blocks.
pub const FULL_SIZES: [u64; 6] = [4 << 10, 16 << 10, 64 << 10, 256 << 10, 1 << 20, 4 << 20];

/// The full curve leaves out requests larger than this (size × descriptors), so that a default run
/// stays within a GPU's and a small host's memory; explicit `--sizes`/`--batches` are run as given.
pub const FULL_MAX_REQUEST: u64 = 256 << 20;

/// The full curve: every direction × [`FULL_SIZES`] × batch up to [`FULL_MAX_REQUEST`] per request.
pub fn full_plan(directions: &[Direction], batches: &[u32]) -> Vec<CaseShape> {
    let mut plan = Vec::new();
    for &d in directions {
        for size in FULL_SIZES {
            for &batch in batches {
                if size.saturating_mul(u64::from(batch)) <= FULL_MAX_REQUEST {
                    plan.push(CaseShape::blocks(d.test_kind(), size, batch));
                }
            }
        }
    }
    plan
}

/// The settings the NIXL engine runs: a `plan` of RMA shapes whose `blocks` is the request's
/// descriptor count. Settings with a plan are checked (READ/WRITE only); without one, the plan is
/// `nixl.directions` × `settings.sizes` × `nixl.batches`. `tests` then names the directions,
/// `blocks` and the window candidates are cleared (a NIXL request is one descriptor list).
/// Idempotent, so a launcher and the engine may both apply it.
pub fn nixl_settings(mut settings: RunSettings, nixl: &NixlOptions) -> Result<RunSettings, RequestError> {
    if settings.plan.is_empty() {
        if nixl.batches.is_empty() || nixl.directions.is_empty() {
            return Err(RequestError::Flags(
                "nothing to run: give at least one batch and one direction".into(),
            ));
        }
        for &d in &nixl.directions {
            for &size in &settings.sizes {
                for &batch in &nixl.batches {
                    settings.plan.push(CaseShape::blocks(d.test_kind(), size, batch));
                }
            }
        }
    }
    let mut tests = Vec::new();
    for shape in &settings.plan {
        if Direction::of_test(shape.test).is_none() {
            return Err(RequestError::Flags(format!(
                "the NIXL engine moves READ and WRITE descriptor lists, not {}: use get_bw (READ) or put_bw (WRITE)",
                shape.test
            )));
        }
        let batch = shape.blocks.unwrap_or(1);
        if batch == 0 || batch > MAX_WINDOW {
            return Err(RequestError::Flags(format!(
                "batch {batch} is outside 1 … {MAX_WINDOW} descriptors"
            )));
        }
        if !tests.contains(&shape.test) {
            tests.push(shape.test);
        }
    }
    settings.tests = tests;
    settings.blocks = None;
    settings.window_candidates.clear();
    Ok(settings)
}

#[cfg(test)]
mod tests {
    use super::*;
    use icb_core::TestKind;

    #[test]
    fn the_verdict_plan_reads_and_writes_kv_shaped_lists_within_64_mib() {
        let plan = verdict_plan();
        assert_eq!(plan.len(), 10);
        for d in [Direction::Read, Direction::Write] {
            let mine: Vec<_> = plan.iter().filter(|s| s.test == d.test_kind()).collect();
            assert_eq!(mine.len(), 5, "{d}");
            assert!(mine.iter().any(|s| s.size == 16 << 10 && s.blocks == Some(1024)));
        }
        assert!(
            plan.iter()
                .all(|s| s.size * u64::from(s.blocks.unwrap_or(1)) <= 64 << 20)
        );
    }

    #[test]
    fn the_full_plan_drops_requests_over_the_cap() {
        let plan = full_plan(&[Direction::Write], &DEFAULT_BATCHES);
        assert!(plan.iter().all(|s| s.test == TestKind::PutBw));
        // 4 KiB … 256 KiB × 1024 fit, 1 MiB and 4 MiB × 1024 do not; every size × 1 and × 64 fits.
        assert_eq!(plan.len(), 6 * 2 + 4);
        assert!(!plan.iter().any(|s| s.size == 1 << 20 && s.blocks == Some(1024)));
    }

    #[test]
    fn settings_without_a_plan_get_directions_sizes_and_batches() {
        let mut base = RunSettings::verdict_profile();
        base.plan.clear();
        base.sizes = vec![4096, 1 << 20];
        base.blocks = Some(8);
        let nixl = NixlOptions {
            batches: vec![1, 16],
            directions: vec![Direction::Read],
            ..Default::default()
        };
        let s = nixl_settings(base, &nixl).expect("valid");
        assert_eq!(s.tests, vec![TestKind::GetBw]);
        assert_eq!(s.blocks, None);
        assert_eq!(s.plan.len(), 4);
        assert_eq!(s.plan[1], CaseShape::blocks(TestKind::GetBw, 4096, 16));
        // Applying it again changes nothing.
        assert_eq!(nixl_settings(s.clone(), &nixl).expect("valid"), s);
    }

    #[test]
    fn tag_tests_and_oversized_batches_are_refused_with_the_fix() {
        let mut s = RunSettings::verdict_profile();
        let err = nixl_settings(s.clone(), &NixlOptions::default()).unwrap_err();
        assert!(matches!(err, RequestError::Flags(_)), "{err}");
        let err = err.to_string();
        assert!(err.contains("not tag_bw") && err.contains("put_bw (WRITE)"), "{err}");
        s.plan = vec![CaseShape::blocks(TestKind::PutBw, 8, MAX_WINDOW + 1)];
        let err = nixl_settings(s, &NixlOptions::default()).unwrap_err();
        assert!(err.to_string().contains("outside 1"), "{err}");
    }
}

/// Descriptors per request of the qualification commands (`gate`, `sweep`): one block, and a
/// KV-shaped list of 64.
pub const QUALIFICATION_BATCHES: [u32; 2] = [1, 64];

/// A qualification profile (gate, sweep) for the NIXL engine: its put/get tests become WRITE/READ
/// descriptor lists of [`QUALIFICATION_BATCHES`]; the tag tests, which NIXL does not do, are
/// dropped and named in the returned note. No put/get test at all is an error naming the fix.
pub fn qualification_settings(
    settings: RunSettings,
) -> Result<(RunSettings, Option<String>), crate::choice::EngineChoiceError> {
    let (rma, tag): (Vec<TestKind>, Vec<TestKind>) =
        settings.tests.iter().partition(|t| Direction::of_test(**t).is_some());
    if rma.is_empty() {
        return Err(crate::choice::EngineChoiceError::NoReadOrWrite);
    }
    let note = (!tag.is_empty()).then(|| {
        let names: Vec<&str> = tag.iter().map(|t| t.as_str()).collect();
        format!(
            "--engine nixl: {} not run (NIXL moves READ/WRITE descriptor lists)",
            names.join(", ")
        )
    });
    let nixl = NixlOptions {
        batches: QUALIFICATION_BATCHES.to_vec(),
        directions: rma.iter().filter_map(|t| Direction::of_test(*t)).collect(),
        ..Default::default()
    };
    let settings = nixl_settings(RunSettings { tests: rma, ..settings }, &nixl)
        .map_err(crate::choice::EngineChoiceError::Settings)?;
    Ok((settings, note))
}

#[cfg(test)]
mod qualification_tests {
    use super::*;
    use icb_core::MemoryPair;

    #[test]
    fn put_and_get_become_lists_of_1_and_64_and_tag_tests_are_named() {
        let base = RunSettings::qualification(
            vec![TestKind::PutBw, TestKind::GetBw, TestKind::TagLat],
            vec![64 << 10],
            vec![MemoryPair::HOST_HOST],
            1.0,
        );
        let (s, note) = qualification_settings(base).unwrap();
        assert_eq!(s.plan.len(), 4, "2 directions × 2 batches: {:?}", s.plan);
        // One descriptor is a plain case (`blocks: None`), 64 a descriptor list.
        assert!(s.plan.iter().all(|c| matches!(c.blocks, None | Some(64))));
        assert_eq!(s.plan.iter().filter(|c| c.blocks == Some(64)).count(), 2);
        assert!(!s.tests.contains(&TestKind::TagLat));
        assert_eq!(
            note.as_deref(),
            Some("--engine nixl: tag_lat not run (NIXL moves READ/WRITE descriptor lists)")
        );
        let tag_only = RunSettings::qualification(vec![TestKind::TagLat], vec![8], vec![MemoryPair::HOST_HOST], 1.0);
        assert!(
            qualification_settings(tag_only)
                .unwrap_err()
                .to_string()
                .contains("give --tests get_bw")
        );
    }
}
