//! Which engine moves the bytes, and where it comes from: what `serve`, `connect`, `pair`, `gate`
//! and `sweep` take as `--engine`, `--nixl-lib` and `--ucx-profile`, checked once, handed to the
//! sides a launcher starts, and turned into a qualification profile.

use crate::options::{NixlOptions, qualification_settings};
use icb_core::{EngineKind, RunSettings};
use icb_engine::UcxProfile;
use std::path::PathBuf;

/// The engine flags, as given.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct EngineChoice {
    pub engine: EngineKind,
    pub nixl_lib: Option<PathBuf>,
    pub ucx_profile: UcxProfile,
}

/// Engine flags that do not go together, or a qualification profile the engine cannot run.
#[derive(Debug, thiserror::Error)]
pub enum EngineChoiceError {
    #[error("--ucx-profile configures the UCX engine; NIXL configures its own UCX: drop it or use --engine ucx")]
    UcxProfileWithNixl,
    #[error("--nixl-lib applies to --engine nixl: add --engine nixl or drop it")]
    NixlLibWithUcx,
    #[error("--engine nixl moves READ and WRITE descriptor lists: give --tests get_bw (READ) and/or put_bw (WRITE)")]
    NoReadOrWrite,
    /// The settings the NIXL engine would run, refused (said in its own one line).
    #[error("{0}")]
    Settings(icb_engine::RequestError),
}

impl EngineChoice {
    /// `--ucx-profile` as a run's criteria state it: named when not the default.
    pub fn ucx_profile_named(&self) -> Option<String> {
        (self.ucx_profile != UcxProfile::Default).then(|| self.ucx_profile.as_str().to_string())
    }

    /// Refuses flags that the chosen engine would ignore.
    pub fn check(&self) -> Result<(), EngineChoiceError> {
        match self.engine {
            EngineKind::Nixl if self.ucx_profile != UcxProfile::Default => Err(EngineChoiceError::UcxProfileWithNixl),
            EngineKind::Ucx if self.nixl_lib.is_some() => Err(EngineChoiceError::NixlLibWithUcx),
            _ => Ok(()),
        }
    }

    /// The flags that select this engine on a side a launcher starts (`serve` and `connect`).
    pub fn side_flags(&self) -> Vec<String> {
        let mut flags = Vec::new();
        if self.engine != EngineKind::Ucx {
            flags.extend(["--engine".to_string(), self.engine.to_string()]);
        }
        if let Some(dir) = &self.nixl_lib {
            flags.extend(["--nixl-lib".to_string(), dir.display().to_string()]);
        }
        if let Some(profile) = self.ucx_profile_named() {
            flags.extend(["--ucx-profile".to_string(), profile]);
        }
        flags
    }

    /// A qualification profile (gate, sweep) for this engine: as is for UCX; NIXL's rule is
    /// [`qualification_settings`] (its note names the tests it does not run).
    pub fn qualification(&self, settings: RunSettings) -> Result<(RunSettings, Option<String>), EngineChoiceError> {
        self.check()?;
        match self.engine {
            EngineKind::Ucx => Ok((settings, None)),
            EngineKind::Nixl => qualification_settings(settings),
        }
    }

    /// The NIXL engine's process-level options (library; cases come with the settings).
    pub fn nixl_options(&self) -> NixlOptions {
        NixlOptions {
            library_dir: self.nixl_lib.clone(),
            ..Default::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_the_engine_would_ignore_are_refused_and_the_rest_reach_the_sides() {
        let nixl = EngineChoice {
            engine: EngineKind::Nixl,
            nixl_lib: Some("/opt/nixl/lib".into()),
            ..Default::default()
        };
        assert!(nixl.check().is_ok());
        assert_eq!(nixl.side_flags(), ["--engine", "nixl", "--nixl-lib", "/opt/nixl/lib"]);
        let profiled = EngineChoice {
            ucx_profile: UcxProfile::Nixl,
            ..nixl.clone()
        };
        assert!(matches!(profiled.check(), Err(EngineChoiceError::UcxProfileWithNixl)));
        let ucx = EngineChoice {
            engine: EngineKind::Ucx,
            ..nixl
        };
        assert!(matches!(ucx.check(), Err(EngineChoiceError::NixlLibWithUcx)));
        let default = EngineChoice {
            ucx_profile: UcxProfile::Nixl,
            ..Default::default()
        };
        assert_eq!(default.side_flags(), ["--ucx-profile", "nixl"]);
        assert_eq!(default.ucx_profile_named().as_deref(), Some("nixl"));
    }

    #[test]
    fn a_nixl_qualification_without_put_or_get_names_the_fix() {
        let choice = EngineChoice {
            engine: EngineKind::Nixl,
            ..Default::default()
        };
        let tag_only = RunSettings::qualification(
            vec![icb_core::TestKind::TagLat],
            vec![8],
            vec![icb_core::MemoryPair::HOST_HOST],
            1.0,
        );
        let e = choice.qualification(tag_only.clone()).unwrap_err();
        assert!(matches!(e, EngineChoiceError::NoReadOrWrite), "{e}");
        let (same, note) = EngineChoice::default().qualification(tag_only.clone()).unwrap();
        assert_eq!((same, note), (tag_only, None));
    }
}
