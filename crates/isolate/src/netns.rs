//! Running Rust code inside a named network namespace without `unsafe`: `setns(CLONE_NEWNET)`
//! changes only the calling thread, so the code runs on a fresh thread that is thrown away after.
//! Sockets created there stay in that namespace and can be used from any thread.

use crate::error::{IsolateError, Result};
use crate::procs::NETNS_DIR;
use nix::sched::{CloneFlags, setns};
use std::path::Path;

/// Runs `f` on a new thread inside network namespace `netns` (an `ip netns` name) and returns its
/// result. A panic in `f` is passed on to the caller.
pub fn run_in_netns<T: Send>(netns: &str, f: impl FnOnce() -> T + Send) -> Result<T> {
    let path = Path::new(NETNS_DIR).join(netns);
    let file = std::fs::File::open(&path)
        .map_err(|e| IsolateError::io(format!("cannot open network namespace {}", path.display()), e))?;
    std::thread::scope(|scope| {
        let handle = scope.spawn(move || {
            setns(&file, CloneFlags::CLONE_NEWNET).map_err(|e| {
                IsolateError::io(
                    format!("cannot enter network namespace {netns}"),
                    std::io::Error::from(e),
                )
            })?;
            Ok(f())
        });
        match handle.join() {
            Ok(result) => result,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    })
}
