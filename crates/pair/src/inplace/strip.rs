//! The binary an in-place run streams into the workers: this one without its debug info (a
//! debug build is ~290 MiB, six times its stripped size, and every byte goes through the API
//! server's exec stream), as a copy in a temporary directory removed when its guard drops.

use std::path::PathBuf;
use std::time::Duration;

/// Stripped copies live in `$TMPDIR/ic-bench-strip-<pid>-XXXXXX/`.
const STRIP_PREFIX: &str = "ic-bench-strip-";

/// How long `strip` may take on this binary (a debug build is ~300 MiB).
const STRIP_DEADLINE: Duration = Duration::from_secs(60);

/// `exe` stripped into a temporary directory, removed when the returned guard drops. Where
/// `strip` is missing or fails, `exe` as it is, said at -v.
pub fn stripped_copy(exe: PathBuf) -> std::io::Result<(PathBuf, Option<tempfile::TempDir>)> {
    // Copies of runs killed with SIGKILL, which no guard survives.
    icb_proc::stale::remove_dead_pid_dirs(&std::env::temp_dir(), STRIP_PREFIX);
    let dir = tempfile::Builder::new()
        .prefix(&icb_proc::stale::pid_prefix(STRIP_PREFIX))
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
