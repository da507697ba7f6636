//! Starting pod processes inside a node's namespaces with util-linux (`setpriv`, `nsenter`,
//! `unshare`), and stopping them for sure.
//!
//! Every process chain starts with `setpriv --pdeathsig KILL`, so if the test process dies without
//! running its cleanup (SIGKILL, abort), the kernel still kills the pods; each container is also
//! its own process group, killed as a whole.

use std::collections::BTreeMap;
use std::io;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use nix::sys::signal::{Signal, kill, killpg};
use nix::unistd::Pid;
use tokio::net::unix::pipe;
use tokio::process::{Child, Command};

/// Where a pod's IPC namespace comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ipc {
    /// A fresh one for this container (single-container pods).
    Own,
    /// The node's (hostIPC).
    Node,
    /// The pod sandbox's, shared by its containers (pid of the holder process).
    Sandbox(u32),
}

/// Where a process goes: `None` for plain host processes (no namespaces at all).
#[derive(Debug, Clone)]
pub struct Placement {
    pub netns: String,
    /// pid of the node's init, owner of the node's IPC, PID and mount namespaces.
    pub node_init: u32,
    pub ipc: Ipc,
    pub host_pid: bool,
}

/// The full argv that runs `cmd` as a container with `placement`.
pub fn container_argv(placement: Option<&Placement>, cwd: &Path, cmd: &[String]) -> Vec<String> {
    let mut argv: Vec<String> = Vec::new();
    let s = |v: &str| v.to_string();
    argv.extend([s("setpriv"), s("--pdeathsig"), s("KILL"), s("--")]);
    let Some(p) = placement else {
        argv.extend(cmd.iter().cloned());
        return argv;
    };
    argv.push(s("nsenter"));
    argv.push(format!("--net=/run/netns/{}", p.netns));
    // Entering a mount namespace resets the working directory; keep the pod's.
    argv.push(format!("--wd={}", cwd.display()));
    match p.ipc {
        Ipc::Own => {}
        Ipc::Node => argv.push(format!("--ipc=/proc/{}/ns/ipc", p.node_init)),
        Ipc::Sandbox(pid) => argv.push(format!("--ipc=/proc/{pid}/ns/ipc")),
    }
    if p.host_pid {
        argv.push(format!("--pid=/proc/{}/ns/pid", p.node_init));
        argv.push(format!("--mount=/proc/{}/ns/mnt", p.node_init));
    }
    argv.push(s("--"));
    if p.host_pid {
        // nsenter forks to enter the PID namespace; the death signal must follow the fork.
        argv.extend([s("setpriv"), s("--pdeathsig"), s("KILL"), s("--")]);
    }
    let mut unshare = vec![s("unshare")];
    if p.ipc == Ipc::Own {
        unshare.push(s("--ipc"));
    }
    if !p.host_pid {
        unshare.extend([s("--pid"), s("--fork"), s("--kill-child"), s("--mount-proc")]);
    }
    if unshare.len() > 1 {
        argv.extend(unshare);
        argv.push(s("--"));
    }
    argv.extend(cmd.iter().cloned());
    argv
}

/// A started process: its output (stdout and stderr merged) and the pid that owns the container's
/// namespaces (differs from the child's pid when a launcher forked).
pub struct Started {
    pub child: Child,
    pub pgid: i32,
    pub output: pipe::Receiver,
}

/// Spawns `argv` with exactly `env`, in `cwd`, as its own process group.
pub fn spawn(argv: &[String], env: &BTreeMap<String, String>, cwd: &Path) -> io::Result<Started> {
    let (program, args) = argv.split_first().ok_or_else(|| io::Error::other("empty command"))?;
    let (reader, writer) = io::pipe()?;
    let mut cmd = Command::new(program);
    cmd.args(args)
        .env_clear()
        .envs(env)
        .current_dir(cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::from(writer.try_clone()?))
        .stderr(Stdio::from(writer))
        .process_group(0)
        .kill_on_drop(true);
    let child = cmd.spawn()?;
    drop(cmd);
    let pid = child
        .id()
        .ok_or_else(|| io::Error::other("process exited before its pid was read"))?;
    let output = pipe::Receiver::from_owned_fd(OwnedFd::from(reader))?;
    Ok(Started {
        child,
        pgid: pid as i32,
        output,
    })
}

/// Direct children of `pid` (from procfs).
pub fn children_of(pid: u32) -> Vec<u32> {
    std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children"))
        .map(|s| s.split_whitespace().filter_map(|p| p.parse().ok()).collect())
        .unwrap_or_default()
}

/// Waits (briefly) until `pid` has forked the process that runs the container, and returns it.
pub async fn wait_for_child(pid: u32, limit: Duration) -> Option<u32> {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if let Some(c) = children_of(pid).first() {
            return Some(*c);
        }
        if tokio::time::Instant::now() >= deadline || !Path::new(&format!("/proc/{pid}")).exists() {
            return None;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// Waits until `pid` runs `comm` (its exec chain is done, so its namespaces are final).
pub async fn wait_for_comm(pid: u32, comm: &str, limit: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        if std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == comm) {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
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

    fn cmd() -> Vec<String> {
        vec!["sh".into(), "-c".into(), "true".into()]
    }

    #[test]
    fn argv_per_isolation() {
        let host = container_argv(None, Path::new("/w"), &cmd());
        assert_eq!(host, ["setpriv", "--pdeathsig", "KILL", "--", "sh", "-c", "true"]);
        let mut p = Placement {
            netns: "ns1".into(),
            node_init: 7,
            ipc: Ipc::Own,
            host_pid: false,
        };
        let own = container_argv(Some(&p), Path::new("/w"), &cmd()).join(" ");
        assert!(
            own.ends_with("nsenter --net=/run/netns/ns1 --wd=/w -- unshare --ipc --pid --fork --kill-child --mount-proc -- sh -c true"),
            "{own}"
        );
        p.ipc = Ipc::Node;
        p.host_pid = true;
        let host_ns = container_argv(Some(&p), Path::new("/w"), &cmd()).join(" ");
        assert!(
            host_ns.ends_with(
                "--ipc=/proc/7/ns/ipc --pid=/proc/7/ns/pid --mount=/proc/7/ns/mnt -- setpriv --pdeathsig KILL -- sh -c true"
            ),
            "{host_ns}"
        );
    }
}
