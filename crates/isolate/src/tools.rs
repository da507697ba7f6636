//! The two external tools this crate drives: `ip` (iproute2) and `unshare` (util-linux), the
//! recipe measured in the platform notes. Every call has a deadline.

use crate::error::{IsolateError, Result};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// `ip` only edits kernel state, so a call that takes longer than this is stuck.
const IP_DEADLINE: Duration = Duration::from_secs(10);

/// Absolute path of a tool, so spawned pods still find it when their environment is cleared.
pub(crate) fn locate(tool: &'static str, package: &'static str) -> Result<PathBuf> {
    let from_path = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default();
    let fallbacks = ["/usr/sbin", "/sbin", "/usr/bin", "/bin"].map(PathBuf::from);
    from_path
        .into_iter()
        .chain(fallbacks)
        .map(|dir| dir.join(tool))
        .find(|p| is_executable(p))
        .ok_or_else(|| IsolateError::ToolMissing {
            tool,
            package,
            source: std::io::Error::new(std::io::ErrorKind::NotFound, "not on PATH"),
        })
}

fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

pub(crate) fn ip_path() -> Result<PathBuf> {
    locate("ip", "iproute2")
}

pub(crate) fn unshare_path() -> Result<PathBuf> {
    locate("unshare", "util-linux")
}

/// Runs `ip ARGS…` and returns its stdout; a non-zero exit becomes an error carrying `ip`'s stderr.
pub(crate) fn ip(args: &[&str]) -> Result<String> {
    run_tool("ip", args)
}

/// Runs `tc ARGS…` (iproute2, like `ip`) the same way.
pub(crate) fn tc(args: &[&str]) -> Result<String> {
    run_tool("tc", args)
}

fn run_tool(tool: &'static str, args: &[&str]) -> Result<String> {
    let program = locate(tool, "iproute2")?;
    let command = format!("{tool} {}", args.join(" "));
    let mut cmd = Command::new(&program);
    cmd.args(args);
    let output = icb_proc::run(&mut cmd, IP_DEADLINE).map_err(|e| match e {
        icb_proc::RunError::Spawn { source, .. } => IsolateError::Spawn {
            program: program.display().to_string(),
            source,
        },
        other => IsolateError::Command {
            command: command.clone(),
            detail: other.to_string(),
        },
    })?;
    if output.status.success() {
        Ok(output.stdout_text())
    } else {
        Err(IsolateError::Command {
            command,
            detail: output.stderr_line(),
        })
    }
}
