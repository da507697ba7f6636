//! Signals and exit codes of the pod processes the node agent starts through icb-isolate's
//! namespace layer (`icb_isolate::PodSpec`): each container is its own process group, killed as
//! a whole, and dies with the cluster thread even when the test process is SIGKILLed.

use std::collections::BTreeMap;
use std::path::Path;

use icb_isolate::PodSpec;
use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;

/// Where a pod's containers run: on which emulated node (none in host isolation) and which of
/// the node's namespaces they share.
#[derive(Clone)]
pub struct Placement {
    pub node: Option<icb_isolate::Node>,
    pub host_ipc: bool,
    pub host_pid: bool,
    /// The pod sandbox's IPC namespace, shared by the pod's containers.
    pub ipc_of: Option<u32>,
}

impl Placement {
    /// The container `argv` as a pod of icb-isolate's namespace layer, with exactly `env`.
    pub fn spec(
        &self,
        argv: &[String],
        env: &BTreeMap<String, String>,
        cwd: &Path,
        tag: &icb_isolate::RunTag,
    ) -> PodSpec {
        let (program, args) = argv.split_first().map_or(("", &[][..]), |(p, a)| (p.as_str(), a));
        let mut spec = match &self.node {
            None => PodSpec::plain(program),
            Some(node) => PodSpec::new(program)
                .node(node)
                .host_ipc(self.host_ipc)
                .host_pid(self.host_pid),
        };
        if let Some(pid) = self.ipc_of {
            spec = spec.share_ipc_with(pid);
        }
        spec.args(args)
            .env_clear()
            .envs(env)
            .current_dir(cwd)
            .merge_output(true)
            .tag(tag)
    }
}

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
