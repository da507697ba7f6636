//! A user's request (`icb_engine::SettingsRequest`) as the NIXL engine's cases: READ
//! (`get_bw`) and WRITE (`put_bw`) descriptor lists. Without --tests/--sizes/--batches the
//! profile's NIXL plan; with them, directions × sizes × batches. Timing, memory and unit flags
//! apply as for the UCX engine.

use crate::options::{DEFAULT_BATCHES, NixlOptions, full_plan, nixl_settings, verdict_plan};
use icb_core::{Direction, KV_BLOCK_SIZE, RunSettings, TestKind};
use icb_engine::{Profile, RequestError, SettingsRequest};

fn refuse<T>(msg: String) -> Result<T, RequestError> {
    Err(RequestError::Flags(msg))
}

/// The directions `--tests` names (both without it); a test that is not a direction is refused.
fn directions(tests: Option<&[TestKind]>) -> Result<Vec<Direction>, RequestError> {
    let Some(tests) = tests else {
        return Ok(vec![Direction::Read, Direction::Write]);
    };
    let mut out = Vec::new();
    for &t in tests {
        let Some(d) = Direction::of_test(t) else {
            return refuse(format!(
                "--engine nixl moves READ and WRITE descriptor lists, not {t}: use --tests get_bw (READ), put_bw (WRITE)"
            ));
        };
        if !out.contains(&d) {
            out.push(d);
        }
    }
    Ok(out)
}

/// The NIXL engine's settings for `req`; checked.
pub fn settings_for_request(req: &SettingsRequest) -> Result<RunSettings, RequestError> {
    if req.blocks.is_some() {
        return refuse("with --engine nixl the descriptors per request are --batches N,..., not --blocks".into());
    }
    if req.window.is_some() {
        return refuse("with --engine nixl a request is one descriptor list: drop --window (see --batches)".into());
    }
    let full = req.profile == Profile::Full;
    let mut base = req.profile.base();
    let directions = directions(req.tests.as_deref())?;
    let batches = req.batches.clone().unwrap_or_else(|| DEFAULT_BATCHES.to_vec());
    base.plan = match (&req.sizes, full, req.tests.is_some() || req.batches.is_some()) {
        (Some(sizes), _, _) => {
            base.sizes = sizes.clone();
            Vec::new()
        }
        (None, true, _) => full_plan(&directions, &batches),
        (None, false, false) => verdict_plan(),
        // Directions alone: the verdict plan's shapes of those directions (1024 × 1 MiB, a 1 GiB
        // request, is not one of them).
        (None, false, true) if req.batches.is_none() => verdict_plan()
            .into_iter()
            .filter(|shape| Direction::of_test(shape.test).is_some_and(|d| directions.contains(&d)))
            .collect(),
        (None, false, true) => {
            // Explicit directions or batches at the verdict profile's two block sizes.
            base.sizes = vec![KV_BLOCK_SIZE, 1 << 20];
            Vec::new()
        }
    };
    req.timing_onto(&mut base)?;
    let nixl = NixlOptions {
        batches,
        directions,
        ..Default::default()
    };
    nixl_settings(base, &nixl)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tests_name_directions_and_ucx_only_flags_are_refused() {
        let req = SettingsRequest {
            tests: Some(vec![TestKind::GetBw]),
            batches: Some(vec![4]),
            ..Default::default()
        };
        let s = settings_for_request(&req).unwrap();
        assert!(s.plan.iter().all(|c| c.test == TestKind::GetBw && c.blocks == Some(4)));
        assert_eq!(s.plan.len(), 2, "the verdict profile's two block sizes");
        // A direction alone keeps the verdict plan's shapes of that direction, each request within
        // 64 MiB (not 16 KiB and 1 MiB × the default batches, whose 1024 × 1 MiB is 1 GiB).
        let write = settings_for_request(&SettingsRequest {
            tests: Some(vec![TestKind::PutBw]),
            ..Default::default()
        })
        .unwrap();
        let expected: Vec<_> = verdict_plan()
            .into_iter()
            .filter(|c| c.test == TestKind::PutBw)
            .collect();
        assert_eq!(write.plan, expected);
        assert!(
            write
                .plan
                .iter()
                .all(|c| c.size * u64::from(c.blocks.unwrap_or(1)) <= 64 << 20)
        );
        for bad in [
            SettingsRequest {
                tests: Some(vec![TestKind::TagLat]),
                ..Default::default()
            },
            SettingsRequest {
                blocks: Some(8),
                ..Default::default()
            },
            SettingsRequest {
                window: Some(8),
                ..Default::default()
            },
        ] {
            assert!(
                matches!(settings_for_request(&bad), Err(RequestError::Flags(_))),
                "{bad:?}"
            );
        }
    }
}
