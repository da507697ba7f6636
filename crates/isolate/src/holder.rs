//! Processes whose only job is to keep namespaces alive so others can join them: a node's init
//! (the node's IPC, PID and mount namespaces, which hostIPC/hostPID pods join) and a pod sandbox
//! (the IPC namespace a pod's containers share, as Kubernetes' pause container does). Each is a
//! `sleep infinity` behind the the `chain` module wrappers, so it too dies with its owner.

use crate::chain::{Placement, children_of};
use crate::error::{IsolateError, Result};
use crate::names::RUN_TAG_ENV;
use crate::procs::pid_alive;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use std::os::unix::process::CommandExt;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a holder may take to reach `sleep` (its namespaces final), and to be reaped.
const DEADLINE: Duration = Duration::from_secs(5);

#[derive(Debug)]
pub(crate) struct Holder {
    child: Child,
    /// Pid of the `sleep` that holds the namespaces (in our PID namespace).
    pid: u32,
    what: String,
}

impl Holder {
    /// Starts `sleep infinity` placed by `placement`, tagged with run `tag`, and waits until it
    /// runs (its namespaces are then final). Blocking, a few ms.
    pub fn start(placement: &Placement, tag: &str, what: String) -> Result<Holder> {
        let mut argv = placement.wrappers(std::path::Path::new("/"))?;
        argv.extend(["sleep".into(), "infinity".into()]);
        let child = Command::new(&argv[0])
            .args(&argv[1..])
            .env(RUN_TAG_ENV, tag)
            .current_dir("/")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .map_err(|source| IsolateError::Spawn {
                program: format!("{what} (setpriv/ip/nsenter/unshare)"),
                source,
            })?;
        let mut holder = Holder {
            pid: child.id(),
            child,
            what,
        };
        let started = Instant::now();
        loop {
            let candidate = if placement.forks() {
                children_of(holder.child.id()).first().copied()
            } else {
                Some(holder.child.id())
            };
            if let Some(pid) = candidate
                && std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "sleep")
            {
                holder.pid = pid;
                return Ok(holder);
            }
            let exited = matches!(holder.child.try_wait(), Ok(Some(_)));
            if exited || started.elapsed() > DEADLINE {
                let detail = if exited {
                    "it exited at once (unshare or nsenter failed)".to_string()
                } else {
                    format!("it did not start within {} s", DEADLINE.as_secs())
                };
                let what = holder.what.clone();
                holder.stop();
                return Err(IsolateError::Command { command: what, detail });
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// SIGKILLs the holder's process group and reaps it (bounded).
    pub fn stop(&mut self) {
        let group = Pid::from_raw(self.child.id() as i32);
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = killpg(group, Signal::SIGKILL);
        }
        let started = Instant::now();
        while matches!(self.child.try_wait(), Ok(None)) && started.elapsed() < DEADLINE {
            std::thread::sleep(Duration::from_millis(1));
        }
        if pid_alive(self.pid) {
            let _ = nix::sys::signal::kill(Pid::from_raw(self.pid as i32), Signal::SIGKILL);
        }
    }
}

impl Drop for Holder {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A pod sandbox on a node: a process holding an IPC namespace that the pod's containers join
/// ([`crate::PodSpec::share_ipc_with`]). Killed on drop.
#[derive(Debug)]
pub struct Sandbox {
    holder: Holder,
}

impl Sandbox {
    /// Starts a sandbox in node network namespace `netns` for run `tag`. Root; blocking, a few ms.
    pub fn start(netns: &str, tag: &str) -> Result<Sandbox> {
        let placement = Placement {
            netns: Some(netns.to_string()),
            host_pid: true,
            ..Default::default()
        };
        let holder = Holder::start(&placement, tag, format!("pod sandbox on {netns}"))?;
        Ok(Sandbox { holder })
    }

    /// Pid of the process holding the IPC namespace.
    pub fn pid(&self) -> u32 {
        self.holder.pid()
    }
}
