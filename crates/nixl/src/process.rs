//! Process-wide concerns of a program that uses NIXL: its UCX's environment, and how to exit.

use std::io::Write;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

static USED: AtomicBool = AtomicBool::new(false);
static ENV_LOCK: Mutex<()> = Mutex::new(());

pub(crate) fn mark_used() {
    USED.store(true, Ordering::SeqCst);
}

/// Whether this process created a NIXL agent.
pub fn nixl_was_used() -> bool {
    USED.load(Ordering::SeqCst)
}

/// Sets environment variables (`UCX_PROTO_INFO`, `UCX_LOG_FILE`, …) that NIXL's UCX reads when its
/// backend starts. UCX reads its configuration only from the environment, so this is the one way
/// to configure the UCX that NIXL owns. Call it before any agent exists, while no other thread
/// reads the environment through libc.
pub fn set_env_before_start(vars: &[(String, String)]) {
    let _guard = ENV_LOCK.lock().unwrap_or_else(|p| p.into_inner());
    for (k, v) in vars {
        // SAFETY: Rust's own environment accesses take std's internal lock; the remaining hazard
        // is a foreign thread calling getenv concurrently. The callers set these before NIXL (and
        // with it UCX) is started in this process, and ic-bench starts no other C library threads.
        unsafe { std::env::set_var(k, v) };
    }
}

/// Flushes C's stdio buffers: UCX writes its log file (`UCX_LOG_FILE`, where the protocol tables
/// of `UCX_PROTO_INFO` go) through a buffered `FILE`, so a reader in this process must flush first.
pub fn flush_c_stdio() {
    // SAFETY: fflush(NULL) flushes every open C output stream; it takes stdio's own locks.
    unsafe { libc::fflush(std::ptr::null_mut()) };
}

/// Leaves the process with `code` the way a process that used NIXL must.
///
/// Why: every process that created a NIXL UCX backend from the PyPI wheel crashes in library
/// destructors at exit (the wheel's bundled `libnl-route`, pulled in by UCX's `libuct_ib*`
/// modules, is torn down after UCX still uses it), turning a clean run into SIGSEGV and a core
/// dump. So once NIXL was used, this flushes Rust's stdout and stderr and C's stdio buffers, then
/// calls `_exit(code)`: no atexit handlers, no library destructors, the exit code unchanged.
/// Nothing is lost: ic-bench writes its reports and files before calling this, and the kernel
/// releases memory, sockets and shared memory. Without NIXL it is a plain `std::process::exit`.
pub fn exit_process(code: i32) -> ! {
    if !nixl_was_used() {
        std::process::exit(code);
    }
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    // SAFETY: fflush(NULL) flushes every C stdio stream (UCX/NIXL log output); `_exit` ends the
    // process without running destructors, which is the point (see above).
    unsafe {
        libc::fflush(std::ptr::null_mut());
        libc::_exit(code)
    }
}
