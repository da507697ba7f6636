//! Signals and exit codes of the pod processes the node agent starts through icb-isolate's
//! namespace layer (`icb_isolate::PodSpec`): each container is its own process group, killed as
//! a whole, and dies with the cluster thread even when the test process is SIGKILLed.

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;

pub fn signal_group(pgid: i32, signal: Signal) {
    // ESRCH (already gone) is the normal case during cleanup.
    let _ = killpg(Pid::from_raw(pgid), signal);
}

pub fn signal_pid(pid: u32, signal: Signal) {
    let _ = kill(Pid::from_raw(pid as i32), signal);
}

/// Exit code as Kubernetes reports it (128 + signal for a killed process).
pub fn exit_code(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status.code().unwrap_or_else(|| 128 + status.signal().unwrap_or(9))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn killed_processes_report_128_plus_the_signal() {
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(exit_code(std::process::ExitStatus::from_raw(9)), 137);
        assert_eq!(exit_code(std::process::ExitStatus::from_raw(3 << 8)), 3);
    }
}
