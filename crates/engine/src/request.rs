//! What a user asked to measure (`--profile` and the case and timing flags of `pair`, `serve`,
//! `connect`), turned into the UCX engine's [`RunSettings`]: the profile's plan, with every flag
//! given on top of it. The NIXL engine's cases come from the same request
//! (`icb_nixl_engine::settings_for_request`).

use crate::EngineError;
use icb_core::units::default_sizes;
use icb_core::{BandwidthUnit, MemoryPair, RunSettings, TestKind};

/// `--profile`: the cases when the request names none.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Profile {
    /// The cases a verdict needs (4 MiB tag/put/get, 8 B latency, one KV-shaped put).
    #[default]
    Verdict,
    /// Every test at 8 B ... 64 MiB.
    Full,
}

impl Profile {
    /// The profile's settings, before any flag.
    pub fn base(self) -> RunSettings {
        match self {
            Profile::Verdict => RunSettings::verdict_profile(),
            Profile::Full => RunSettings::full_curve(),
        }
    }
}

/// The flags as given (`None`: not given).
#[derive(Debug, Clone, Default)]
pub struct SettingsRequest {
    pub profile: Profile,
    pub tests: Option<Vec<TestKind>>,
    pub sizes: Option<Vec<u64>>,
    pub blocks: Option<u32>,
    /// NIXL's descriptors per request (refused for the UCX engine).
    pub batches: Option<Vec<u32>>,
    pub memory: Option<Vec<MemoryPair>>,
    pub warmup: Option<u64>,
    pub min_iterations: Option<u64>,
    pub min_time_s: Option<f64>,
    pub max_time_s: Option<f64>,
    pub window: Option<u32>,
    pub unit: BandwidthUnit,
    /// `--require-cuda`: a CUDA case that cannot run fails the run.
    pub require_cuda: bool,
    /// `--cuda-optional`: CUDA memory named in `--memory` is skipped, not failed, where no driver
    /// is present (the built-in plan always skips).
    pub cuda_optional: bool,
    /// `--cuda-alloc`: how both sides allocate GPU memory.
    pub cuda_alloc: icb_core::CudaAllocMode,
}

/// Why a request cannot run: flags that contradict each other or the engine (the message names
/// the flag), or settings the engine refuses.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    #[error("{0}")]
    Flags(String),
    #[error(transparent)]
    Invalid(#[from] EngineError),
}

fn refuse<T>(msg: &str) -> Result<T, RequestError> {
    Err(RequestError::Flags(msg.to_string()))
}

impl SettingsRequest {
    /// The UCX engine's settings: the profile, with every flag given on top of it; checked.
    pub fn ucx_settings(&self) -> Result<RunSettings, RequestError> {
        if self.batches.is_some() {
            return refuse("--batches applies to --engine nixl; the UCX engine's KV-shaped cases are --blocks N");
        }
        let mut s = self.profile.base();
        if self.tests.is_some() || self.sizes.is_some() || self.blocks.is_some() {
            // Explicit cases: tests x sizes, as given (the profile's plan no longer applies).
            s.plan.clear();
            s.tests = self.tests.clone().unwrap_or_else(|| TestKind::ALL.to_vec());
            s.sizes = self.sizes.clone().unwrap_or_else(default_sizes);
            s.blocks = self.blocks;
        }
        s.tests.dedup();
        self.timing_onto(&mut s)?;
        if s.tests.is_empty() {
            return refuse("nothing to run: give at least one --tests and one --memory value");
        }
        crate::validate_settings(&s)?;
        Ok(s)
    }

    /// Whether a CUDA case that cannot run fails the run: asked for with `--require-cuda`, or
    /// CUDA memory named in `--memory` (a memory type asked for by name and not measured is no
    /// pass), unless `--cuda-optional`. The built-in plan's CUDA pairs are skipped as before.
    pub fn cuda_required(&self) -> bool {
        let named = self.memory.as_ref().is_some_and(|m| m.iter().any(|p| p.uses_cuda()));
        self.require_cuda || (named && !self.cuda_optional)
    }

    /// Memory, timing, unit and CUDA flags onto `s` (both engines take them alike).
    pub fn timing_onto(&self, s: &mut RunSettings) -> Result<(), RequestError> {
        if let Some(memory) = &self.memory {
            s.memory = memory.clone();
            s.memory.dedup();
        }
        s.warmup_iterations = self.warmup.unwrap_or(s.warmup_iterations);
        s.min_iterations = self.min_iterations.unwrap_or(s.min_iterations).max(1);
        s.min_time_s = self.min_time_s.unwrap_or(s.min_time_s);
        s.max_time_s = self.max_time_s.unwrap_or(s.max_time_s);
        s.window = self.window.unwrap_or(s.window);
        s.unit = self.unit;
        s.require_cuda = self.cuda_required();
        s.cuda_alloc = self.cuda_alloc;
        if s.min_time_s > s.max_time_s {
            return Err(RequestError::Flags(format!(
                "--min-time ({}) exceeds --max-time ({}): raise --max-time",
                s.min_time_s, s.max_time_s
            )));
        }
        if s.memory.is_empty() {
            return refuse("nothing to run: give at least one --tests and one --memory value");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_go_on_top_of_the_profile() {
        let verdict = SettingsRequest::default().ucx_settings().unwrap();
        assert_eq!(verdict.plan, RunSettings::verdict_profile().plan);
        let req = SettingsRequest {
            tests: Some(vec![TestKind::PutBw, TestKind::PutBw]),
            sizes: Some(vec![8, 16]),
            max_time_s: Some(2.0),
            min_iterations: Some(0),
            ..Default::default()
        };
        let s = req.ucx_settings().unwrap();
        assert!(s.plan.is_empty());
        assert_eq!((s.tests, s.sizes), (vec![TestKind::PutBw], vec![8, 16]));
        assert_eq!((s.max_time_s, s.min_iterations), (2.0, 1));
    }

    #[test]
    fn cuda_memory_named_by_the_user_is_required_unless_optional() {
        let cuda = Some(vec![MemoryPair::HOST_HOST, MemoryPair::ALL[3]]);
        let plan = SettingsRequest::default().ucx_settings().unwrap();
        assert!(!plan.require_cuda, "the built-in plan skips CUDA where there is none");
        let named = SettingsRequest {
            memory: cuda.clone(),
            ..Default::default()
        };
        assert!(named.ucx_settings().unwrap().require_cuda);
        let optional = SettingsRequest {
            memory: cuda,
            cuda_optional: true,
            ..Default::default()
        };
        assert!(!optional.ucx_settings().unwrap().require_cuda);
        let host = SettingsRequest {
            memory: Some(vec![MemoryPair::HOST_HOST]),
            ..Default::default()
        };
        assert!(!host.ucx_settings().unwrap().require_cuda);
    }

    #[test]
    fn contradictions_are_refused_naming_the_flag() {
        let bad = |req: SettingsRequest| match req.ucx_settings() {
            Err(RequestError::Flags(m)) => m,
            other => panic!("not refused: {other:?}"),
        };
        let m = bad(SettingsRequest {
            min_time_s: Some(3.0),
            max_time_s: Some(1.0),
            ..Default::default()
        });
        assert!(m.starts_with("--min-time (3) exceeds --max-time (1)"), "{m}");
        let m = bad(SettingsRequest {
            batches: Some(vec![4]),
            ..Default::default()
        });
        assert!(m.starts_with("--batches applies to --engine nixl"), "{m}");
        let m = bad(SettingsRequest {
            memory: Some(vec![]),
            ..Default::default()
        });
        assert!(m.starts_with("nothing to run"), "{m}");
    }
}
