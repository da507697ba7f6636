//! The binary an in-place run streams into the workers: this one without its debug info (a
//! debug build is ~290 MiB, six times its stripped size, and every byte goes through the API
//! server's exec stream), as a copy in a temporary directory removed when its guard drops.

use std::path::{Path, PathBuf};
use std::time::Duration;

/// Stripped copies live in `$TMPDIR/ic-bench-strip-<pid>-XXXXXX/`.
const STRIP_PREFIX: &str = "ic-bench-strip-";

/// How long `strip` may take on this binary (a debug build is ~300 MiB).
const STRIP_DEADLINE: Duration = Duration::from_secs(60);

/// Removes the stripped copies of runs whose process is gone (killed with SIGKILL, which no
/// guard survives), so they do not pile up in the temporary directory.
fn remove_stale_strips(tmp: &Path) {
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(STRIP_PREFIX))
            .and_then(|rest| rest.split('-').next())
            .and_then(|pid| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

/// `exe` stripped into a temporary directory, removed when the returned guard drops. Where
/// `strip` is missing or fails, `exe` as it is, said at -v.
pub fn stripped_copy(exe: PathBuf) -> std::io::Result<(PathBuf, Option<tempfile::TempDir>)> {
    remove_stale_strips(&std::env::temp_dir());
    let dir = tempfile::Builder::new()
        .prefix(&format!("{STRIP_PREFIX}{}-", std::process::id()))
        .tempdir()
        .map_err(|e| {
            std::io::Error::new(
                e.kind(),
                format!("cannot create a temporary directory for the stripped copy of ic-bench: {e}"),
            )
        })?;
    let out = dir.path().join("ic-bench");
    let mut cmd = std::process::Command::new("strip");
    // Everything, symbols included: the copy only has to run (a debug build: 290 → 45 MiB).
    cmd.arg("-o").arg(&out).arg(&exe);
    match icb_proc::run(&mut cmd, STRIP_DEADLINE) {
        Ok(o) if o.status.success() => Ok((out, Some(dir))),
        Ok(o) => {
            tracing::info!("strip failed ({}): copying {} as it is", o.stderr_line(), exe.display());
            Ok((exe, None))
        }
        Err(e) => {
            tracing::info!("cannot strip ({e}): copying {} as it is", exe.display());
            Ok((exe, None))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stripped_copies_of_dead_runs_are_removed_and_live_ones_kept() {
        let tmp = tempfile::tempdir().unwrap();
        let dead = tmp.path().join(format!("{STRIP_PREFIX}4000000000-abc"));
        let live = tmp.path().join(format!("{STRIP_PREFIX}{}-def", std::process::id()));
        let other = tmp.path().join("ic-bench-inplace-x");
        for d in [&dead, &live, &other] {
            std::fs::create_dir(d).unwrap();
            std::fs::write(d.join("ic-bench"), b"x").unwrap();
        }
        remove_stale_strips(tmp.path());
        assert!(!dead.exists());
        assert!(live.exists() && other.exists());
    }
}
