//! `--sysfs-root`, `--devfs-root`, `--procfs-root`, `--tool-outputs`: a node replayed from
//! directories. Each must be a readable directory: a typo would otherwise read as "no RDMA here".

use crate::LocalSource;
use std::path::{Path, PathBuf};

/// The replay flags given (`None`: the live `/sys`, `/dev`, `/proc`, the tools themselves).
#[derive(Debug, Clone, Default)]
pub struct ReplayDirs {
    pub sysfs_root: Option<PathBuf>,
    pub devfs_root: Option<PathBuf>,
    pub procfs_root: Option<PathBuf>,
    pub tool_outputs: Option<PathBuf>,
}

/// A replay flag that names no readable directory.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    #[error("{flag} {}: not a directory (pass the directory to read)", dir.display())]
    NotADirectory { flag: &'static str, dir: PathBuf },
    #[error("{flag} {}: no such directory", dir.display())]
    Missing { flag: &'static str, dir: PathBuf },
    #[error("{flag} {}: cannot read: {why}", dir.display())]
    Unreadable {
        flag: &'static str,
        dir: PathBuf,
        why: std::io::Error,
    },
}

/// `dir` as given to `flag`, once it is known to be a readable directory.
pub fn replay_dir(flag: &'static str, dir: &Path) -> Result<PathBuf, ReplayError> {
    let dir_buf = dir.to_path_buf();
    match std::fs::metadata(dir) {
        Ok(m) if m.is_dir() => Ok(dir_buf),
        Ok(_) => Err(ReplayError::NotADirectory { flag, dir: dir_buf }),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Err(ReplayError::Missing { flag, dir: dir_buf }),
        Err(why) => Err(ReplayError::Unreadable {
            flag,
            dir: dir_buf,
            why,
        }),
    }
}

impl LocalSource {
    /// This machine, with the roots the replay flags give in place of the live ones.
    pub fn from_replay_flags(dirs: &ReplayDirs) -> Result<LocalSource, ReplayError> {
        let mut s = LocalSource::default();
        for (flag, dir, to) in [
            ("--sysfs-root", &dirs.sysfs_root, &mut s.sysfs_root),
            ("--devfs-root", &dirs.devfs_root, &mut s.devfs_root),
            ("--procfs-root", &dirs.procfs_root, &mut s.procfs_root),
        ] {
            if let Some(d) = dir {
                *to = replay_dir(flag, d)?;
            }
        }
        s.tool_outputs = dirs
            .tool_outputs
            .as_deref()
            .map(|d| replay_dir("--tool-outputs", d))
            .transpose()?;
        Ok(s)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_replay_root_must_be_an_existing_directory() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("f");
        std::fs::write(&file, "x").unwrap();
        assert_eq!(replay_dir("--sysfs-root", dir.path()).unwrap(), dir.path());
        let e = replay_dir("--sysfs-root", &file).unwrap_err();
        assert!(matches!(e, ReplayError::NotADirectory { .. }), "{e}");
        assert_eq!(
            e.to_string(),
            format!(
                "--sysfs-root {}: not a directory (pass the directory to read)",
                file.display()
            )
        );
        let missing = dir.path().join("nope");
        let e = replay_dir("--devfs-root", &missing).unwrap_err();
        assert!(
            matches!(
                e,
                ReplayError::Missing {
                    flag: "--devfs-root",
                    ..
                }
            ),
            "{e}"
        );
    }

    #[test]
    fn the_replay_takes_the_roots_given_and_keeps_the_others_live() {
        let dir = tempfile::tempdir().unwrap();
        let dirs = ReplayDirs {
            sysfs_root: Some(dir.path().to_path_buf()),
            tool_outputs: Some(dir.path().to_path_buf()),
            ..ReplayDirs::default()
        };
        let s = LocalSource::from_replay_flags(&dirs).unwrap();
        assert_eq!(s.sysfs_root, dir.path());
        assert_eq!(s.devfs_root, Path::new("/dev"));
        assert_eq!(s.tool_outputs.as_deref(), Some(dir.path()));
        let bad = ReplayDirs {
            procfs_root: Some(dir.path().join("nope")),
            ..ReplayDirs::default()
        };
        let e = LocalSource::from_replay_flags(&bad).unwrap_err();
        assert!(
            matches!(
                e,
                ReplayError::Missing {
                    flag: "--procfs-root",
                    ..
                }
            ),
            "{e}"
        );
    }
}
