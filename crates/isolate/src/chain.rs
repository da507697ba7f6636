//! The one command chain that puts a process into a node's and a pod's namespaces, built from
//! util-linux and iproute2 tools (no `unsafe` here):
//!
//! ```text
//! setpriv --pdeathsig KILL --                        dies with the thread that started it
//!   ip netns exec NODE                               the node's network (and its /sys)
//!   nsenter --ipc=… --pid=… --mount=… --wd=DIR --    join the node's (or a sandbox's) IPC/PID
//!     setpriv --pdeathsig KILL --                    nsenter --pid forks: re-arm for the fork
//!   unshare [--ipc] [--pid --fork --kill-child --mount-proc] --   the pod's own namespaces
//!     PROGRAM ARGS…
//! ```
//!
//! The parent death signal reaches the real program: `setpriv` and `ip netns exec` exec in place,
//! `unshare --fork --kill-child` gives the forked program the same signal from `unshare`, and a
//! forking `nsenter` is followed by a second `setpriv`. So when the owner dies, even by SIGKILL,
//! every pod and namespace holder dies with it; a PID namespace's init takes its namespace along.
//! The owner is the *thread* that spawned the chain (PR_SET_PDEATHSIG): spawn from a thread that
//! lives as long as the pod (a runtime worker or the main thread, not a short-lived blocking one).
//! One window stays open: an owner killed in the microseconds between a forking wrapper's `fork`
//! and its child's `prctl` (util-linux does not re-check the parent) leaves that child running;
//! it carries the run tag, so [`crate::cleanup_stale`] (next run, `ic-bench gc --local`) kills it.

use crate::error::Result;
use crate::tools::{locate, unshare_path};
use std::ffi::OsString;
use std::path::Path;

/// Where a process's namespaces come from.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Placement {
    /// `ip netns` name of the node; `None`: the host's network.
    pub netns: Option<String>,
    /// Pid of the node's init (holder of the node's IPC, PID and mount namespaces), if on a node.
    pub node_init: Option<u32>,
    /// Share the node's (or, off a node, the host's) IPC namespace.
    pub host_ipc: bool,
    /// Share the node's (or, off a node, the host's) PID namespace.
    pub host_pid: bool,
    /// Join the IPC namespace of this process (a pod sandbox shared by its containers).
    pub ipc_of: Option<u32>,
}

impl Placement {
    /// The IPC namespace to join with nsenter, if any.
    fn join_ipc(&self) -> Option<u32> {
        self.ipc_of.or(self.node_init.filter(|_| self.host_ipc))
    }

    /// The PID (and mount) namespace to join with nsenter, if any.
    fn join_pid(&self) -> Option<u32> {
        self.node_init.filter(|_| self.host_pid)
    }

    fn own_ipc(&self) -> bool {
        !self.host_ipc && self.ipc_of.is_none()
    }

    fn own_pid(&self) -> bool {
        !self.host_pid
    }

    pub fn needs_root(&self) -> bool {
        self.netns.is_some() || self.node_init.is_some() || self.own_ipc() || self.own_pid()
    }

    /// True when a tool in the chain forks, so the program is a child of the started process.
    pub fn forks(&self) -> bool {
        self.own_pid() || self.join_pid().is_some()
    }

    /// The wrappers in front of the program; `cwd` is restored after entering a mount namespace.
    pub fn wrappers(&self, cwd: &Path) -> Result<Vec<OsString>> {
        let setpriv = locate("setpriv", "util-linux")?.into_os_string();
        let die_with_parent = |argv: &mut Vec<OsString>| {
            argv.extend([setpriv.clone(), "--pdeathsig".into(), "KILL".into(), "--".into()]);
        };
        let mut argv = Vec::new();
        die_with_parent(&mut argv);
        if let Some(ns) = &self.netns {
            let ip = crate::tools::ip_path()?.into_os_string();
            argv.extend([ip, "netns".into(), "exec".into(), ns.into()]);
        }
        let (join_ipc, join_pid) = (self.join_ipc(), self.join_pid());
        if join_ipc.is_some() || join_pid.is_some() {
            argv.push(locate("nsenter", "util-linux")?.into_os_string());
            if let Some(pid) = join_ipc {
                argv.push(format!("--ipc=/proc/{pid}/ns/ipc").into());
            }
            if let Some(pid) = join_pid {
                // The node's mount namespace carries the /proc of its PID namespace.
                argv.push(format!("--pid=/proc/{pid}/ns/pid").into());
                argv.push(format!("--mount=/proc/{pid}/ns/mnt").into());
                let mut wd = OsString::from("--wd=");
                wd.push(cwd.as_os_str());
                argv.push(wd);
            }
            argv.push("--".into());
            if join_pid.is_some() {
                die_with_parent(&mut argv);
            }
        }
        if self.own_ipc() || self.own_pid() {
            argv.push(unshare_path()?.into_os_string());
            if self.own_ipc() {
                argv.push("--ipc".into());
            }
            if self.own_pid() {
                // --fork: the program becomes the namespace's init; --kill-child: it dies with
                // unshare, taking the namespace down; --mount-proc: /proc shows the namespace.
                argv.extend(["--pid", "--fork", "--kill-child", "--mount-proc"].map(OsString::from));
            }
            argv.push("--".into());
        }
        Ok(argv)
    }
}

/// The argv prefix that runs a command inside a running pod's namespaces (network, IPC, PID,
/// mount) in working directory `cwd`, as `kubectl exec` does; `pid` is [`crate::Pod::main_pid`].
pub fn enter_pod(pid: u32, cwd: &Path) -> Result<Vec<OsString>> {
    let mut wd = OsString::from("--wd=");
    wd.push(cwd.as_os_str());
    Ok(vec![
        locate("nsenter", "util-linux")?.into_os_string(),
        "-t".into(),
        pid.to_string().into(),
        "--net".into(),
        "--ipc".into(),
        "--pid".into(),
        "--mount".into(),
        wd,
        "--".into(),
    ])
}

/// The argv prefix that runs a command "on" an emulated node: in its network namespace only.
pub fn enter_node(netns: &str) -> Result<Vec<OsString>> {
    let ip = crate::tools::ip_path()?.into_os_string();
    Ok(vec![ip, "netns".into(), "exec".into(), netns.into()])
}

/// Direct children of `pid` (from procfs).
pub(crate) fn children_of(pid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .map(|s| s.split_whitespace().filter_map(|p| p.parse().ok()).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(p: &Placement) -> String {
        p.wrappers(Path::new("/w"))
            .unwrap()
            .iter()
            .map(|a| {
                // Tools are located on this machine: keep only their file names.
                let a = a.to_string_lossy();
                match a.starts_with('/') {
                    true => a.rsplit('/').next().unwrap_or(&a).to_string(),
                    false => a.into_owned(),
                }
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn wrappers_per_placement() {
        let plain = Placement {
            host_ipc: true,
            host_pid: true,
            ..Default::default()
        };
        assert_eq!(line(&plain), "setpriv --pdeathsig KILL --");
        assert!(!plain.needs_root() && !plain.forks());

        let pod = Placement {
            netns: Some("icb-1-0000000a-n".into()),
            node_init: Some(7),
            ..Default::default()
        };
        assert_eq!(
            line(&pod),
            "setpriv --pdeathsig KILL -- ip netns exec icb-1-0000000a-n \
             unshare --ipc --pid --fork --kill-child --mount-proc --"
        );
        assert!(pod.needs_root() && pod.forks());

        let host_ipc = Placement {
            host_ipc: true,
            ..pod.clone()
        };
        assert_eq!(
            line(&host_ipc),
            "setpriv --pdeathsig KILL -- ip netns exec icb-1-0000000a-n nsenter --ipc=/proc/7/ns/ipc -- \
             unshare --pid --fork --kill-child --mount-proc --"
        );

        let host_both = Placement {
            host_ipc: true,
            host_pid: true,
            ..pod.clone()
        };
        assert_eq!(
            line(&host_both),
            "setpriv --pdeathsig KILL -- ip netns exec icb-1-0000000a-n nsenter --ipc=/proc/7/ns/ipc \
             --pid=/proc/7/ns/pid --mount=/proc/7/ns/mnt --wd=/w -- setpriv --pdeathsig KILL --"
        );
        assert!(host_both.forks());

        let sandboxed = Placement {
            ipc_of: Some(9),
            host_pid: true,
            ..pod
        };
        assert!(line(&sandboxed).ends_with("nsenter --ipc=/proc/9/ns/ipc --pid=/proc/7/ns/pid --mount=/proc/7/ns/mnt --wd=/w -- setpriv --pdeathsig KILL --"));
    }
}
