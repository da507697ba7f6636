//! `sweep --resume FILE` before anything connects: the file read, and the flags the sweep runs
//! with: this command line's, or with `--resume` the file's criteria (a flag given now that
//! differs is refused: `icb_sweep::resume` decides). What the engine makes of them (settings, the
//! sides' flags) is the caller's.

use icb_pair::ExpectationFlags;
use icb_sweep::resume::{Given, ResumeError, merge};
use icb_sweep::{Criteria, ResultsFileError, SweepResults};
use std::path::Path;

/// A sweep's results file (with `--resume`) and the flags it runs with.
#[derive(Debug)]
pub struct Resumed {
    pub file: Option<SweepResults>,
    /// The merged flags: the file's criteria, or this command line's.
    pub given: Given,
}

/// Why a sweep cannot resume (one line naming `--resume` and what to fix, exit 2).
#[derive(Debug, thiserror::Error)]
pub enum ResumeStartError {
    // The file's error is its own one line (its I/O cause already in it).
    #[error("{0}")]
    File(ResultsFileError),
    #[error(transparent)]
    Resume(#[from] ResumeError),
}

impl Resumed {
    /// The file at `path` (none: a new sweep, which runs with `given`) and the merged flags.
    pub fn read(path: Option<&Path>, given: Given) -> Result<Resumed, ResumeStartError> {
        let Some(path) = path else {
            return Ok(Resumed { file: None, given });
        };
        let file = SweepResults::load(path).map_err(ResumeStartError::File)?;
        let given = merge(&given, &path.display().to_string(), file.criteria.as_ref())?;
        Ok(Resumed {
            file: Some(file),
            given,
        })
    }

    /// The criteria the sweep runs with. A file from before criteria were kept takes this
    /// command line's now, so the next resume is held to the same.
    pub fn criteria(&mut self) -> Criteria {
        let criteria = self.given.criteria();
        if let Some(file) = &mut self.file {
            file.criteria.get_or_insert_with(|| criteria.clone());
        }
        criteria
    }

    /// The criteria's floors, `--allow-tcp` and `--expect-config`, as the pair step reads them.
    pub fn expectation(&self) -> ExpectationFlags {
        let g = &self.given;
        ExpectationFlags {
            min_host_gbps: g.min_host_bw_gbps,
            min_cuda_gbps: g.min_cuda_bw_gbps,
            min_size: g.min_bw_size,
            allow_tcp: g.allow_tcp,
            config: g.expect_config.as_ref().map(std::path::PathBuf::from),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use icb_sweep::schedule::Schedule;

    fn file_with(criteria: Option<Criteria>) -> tempfile::NamedTempFile {
        let mut r = SweepResults::new("sw1".into(), Schedule::Ring, vec![], 1.0, vec![]);
        r.criteria = criteria;
        let f = tempfile::NamedTempFile::new().unwrap();
        std::fs::write(f.path(), serde_json::to_string(&r).unwrap()).unwrap();
        f
    }

    #[test]
    fn a_new_sweep_runs_with_the_command_line() {
        let given = Given {
            allow_tcp: true,
            ..Given::default()
        };
        let mut r = Resumed::read(None, given.clone()).unwrap();
        assert!(r.file.is_none());
        assert_eq!(r.criteria(), given.criteria());
        assert!(r.expectation().allow_tcp);
    }

    #[test]
    fn a_resumed_sweep_runs_with_the_files_criteria_and_a_file_without_keeps_them() {
        let mut was = Given::default().criteria();
        was.allow_tcp = true;
        was.expect_config = Some("e.yaml".into());
        was.min_host_bw_bps = Some(1e6);
        let f = file_with(Some(was.clone()));
        let mut r = Resumed::read(Some(f.path()), Given::default()).unwrap();
        assert_eq!(r.criteria(), was);
        let e = r.expectation();
        assert_eq!((e.min_host_gbps, e.allow_tcp), (Some(1e-3), true));
        assert_eq!(e.config, Some(std::path::PathBuf::from("e.yaml")));
        let old = file_with(None);
        let mut r = Resumed::read(Some(old.path()), Given::default()).unwrap();
        let now = r.criteria();
        assert_eq!(r.file.and_then(|f| f.criteria), Some(now));
    }

    #[test]
    fn a_missing_file_and_a_differing_flag_are_refused_naming_the_file() {
        let missing = Path::new("/nonexistent/icb-sweep.json");
        let e = Resumed::read(Some(missing), Given::default()).unwrap_err();
        assert!(
            matches!(e, ResumeStartError::File(ResultsFileError::Unreadable { .. })),
            "{e}"
        );
        assert!(
            e.to_string().starts_with("--resume /nonexistent/icb-sweep.json: "),
            "{e}"
        );
        let f = file_with(Some(Given::default().criteria()));
        let given = Given {
            allow_tcp: true,
            ..Given::default()
        };
        let e = Resumed::read(Some(f.path()), given).unwrap_err();
        assert!(
            matches!(e, ResumeStartError::Resume(ResumeError::Differs { .. })),
            "{e}"
        );
        assert!(e.to_string().contains("--allow-tcp differs"), "{e}");
    }
}
