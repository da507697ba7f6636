//! Starting a program as a "pod": optionally on an emulated node (its network namespace, and its
//! IPC/PID namespaces when the pod shares them, as hostIPC/hostPID do), with its own IPC and PID
//! namespaces otherwise — the recipe measured in the platform notes,
//! `ip netns exec NS unshare -i -p -f --kill-child --mount-proc PROGRAM …`, behind the parent death
//! signal of the `chain` module so no pod outlives its owner.
//!
//! Every pod leads its own process group (a terminal's Ctrl-C reaches only the orchestrator, which
//! then tears down in order) and carries its run tag in the environment (so a crashed run's pods
//! can be found). Killing a pod kills its whole tree: the process group, and with a PID namespace
//! the namespace's init, whose death takes every process in the namespace with it.

use crate::chain::{Placement, children_of};
use crate::creds::Credentials;
use crate::error::{IsolateError, Result};
use crate::fabric::Node;
use crate::names::{DEFAULT_PREFIX, RUN_TAG_ENV, RunTag};
use crate::procs::{pgrp_of, pid_alive, tagged_pids};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use std::ffi::{OsStr, OsString};
use std::path::PathBuf;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;
use tokio::net::unix::pipe;
use tokio::process::{Child, ChildStderr, ChildStdout, Command};

/// How long a SIGKILLed pod may take to be reaped before [`Pod::kill`] gives up.
const REAP_DEADLINE: Duration = Duration::from_secs(5);

/// What to start and how to isolate it. By default a pod shares the host's network namespace and
/// gets its own IPC and PID namespaces (as a Kubernetes pod without hostIPC/hostPID does).
#[derive(Debug, Clone)]
pub struct PodSpec {
    program: OsString,
    args: Vec<OsString>,
    env: Vec<(OsString, OsString)>,
    env_clear: bool,
    /// Variables the process starts without even when ours has them (a knobs-off control).
    env_removed: Vec<OsString>,
    current_dir: Option<PathBuf>,
    placement: Placement,
    merge_output: bool,
    tag: Option<String>,
    credentials: Credentials,
}

impl PodSpec {
    /// `program` should be an absolute path when the environment is cleared (no PATH to search).
    pub fn new(program: impl AsRef<OsStr>) -> Self {
        PodSpec {
            program: program.as_ref().to_owned(),
            args: Vec::new(),
            env: Vec::new(),
            env_clear: false,
            env_removed: Vec::new(),
            current_dir: None,
            placement: Placement::default(),
            merge_output: false,
            tag: None,
            credentials: Credentials::default(),
        }
    }

    /// A plain process: host network, IPC and PID namespaces (still its own process group).
    pub fn plain(program: impl AsRef<OsStr>) -> Self {
        PodSpec::new(program).host_ipc(true).host_pid(true)
    }

    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Self {
        self.args.push(arg.as_ref().to_owned());
        self
    }

    pub fn args<I: IntoIterator<Item = S>, S: AsRef<OsStr>>(mut self, args: I) -> Self {
        self.args.extend(args.into_iter().map(|a| a.as_ref().to_owned()));
        self
    }

    /// Adds one variable on top of the inherited (or cleared) environment.
    pub fn env(mut self, key: impl AsRef<OsStr>, value: impl AsRef<OsStr>) -> Self {
        self.env.push((key.as_ref().to_owned(), value.as_ref().to_owned()));
        self
    }

    pub fn envs<I: IntoIterator<Item = (K, V)>, K: AsRef<OsStr>, V: AsRef<OsStr>>(mut self, vars: I) -> Self {
        self.env.extend(
            vars.into_iter()
                .map(|(k, v)| (k.as_ref().to_owned(), v.as_ref().to_owned())),
        );
        self
    }

    /// Starts without `key` even when our environment has it (applied before [`PodSpec::env`]'s).
    pub fn env_remove(mut self, key: impl AsRef<OsStr>) -> Self {
        self.env_removed.push(key.as_ref().to_owned());
        self
    }

    /// Starts from an empty environment (as a container image does) instead of inheriting ours.
    pub fn env_clear(mut self) -> Self {
        self.env_clear = true;
        self
    }

    pub fn current_dir(mut self, dir: impl Into<PathBuf>) -> Self {
        self.current_dir = Some(dir.into());
        self
    }

    /// Runs in a named network namespace (`ip netns` name, e.g. [`crate::Node::netns`]) only; a
    /// hostIPC/hostPID pod placed so shares the *host's* IPC/PID namespaces. Prefer [`PodSpec::node`].
    pub fn netns(mut self, netns: impl Into<String>) -> Self {
        self.placement.netns = Some(netns.into());
        self.placement.node_init = None;
        self
    }

    /// Runs on an emulated node: in its network namespace, and with [`PodSpec::host_ipc`] /
    /// [`PodSpec::host_pid`] in the node's IPC / PID namespaces (held by the node's init), as a
    /// Kubernetes pod with hostIPC/hostPID shares its node's.
    pub fn node(mut self, node: &Node) -> Self {
        self.placement.netns = Some(node.netns.clone());
        self.placement.node_init = Some(node.init_pid);
        self
    }

    /// Shares the IPC namespace of its host: the node's on a node, else the host's (Kubernetes
    /// `hostIPC: true`). sysv/posix shared memory works between pods that both share it.
    pub fn host_ipc(mut self, share: bool) -> Self {
        self.placement.host_ipc = share;
        self
    }

    /// Shares the PID namespace of its host: the node's on a node, else the host's (Kubernetes
    /// `hostPID: true`). cma and cuda_ipc need it.
    pub fn host_pid(mut self, share: bool) -> Self {
        self.placement.host_pid = share;
        self
    }

    /// Joins the IPC namespace of process `pid` (a [`crate::Sandbox`] the pod's containers share)
    /// instead of getting its own; overrides [`PodSpec::host_ipc`].
    pub fn share_ipc_with(mut self, pid: u32) -> Self {
        self.placement.ipc_of = Some(pid);
        self
    }

    /// stdout and stderr go to one pipe, in the order written ([`Pod::take_output`]), as a
    /// container runtime keeps a container's log.
    pub fn merge_output(mut self, merge: bool) -> Self {
        self.merge_output = merge;
        self
    }

    /// The run this pod belongs to (default: a fresh tag under `icb`), written to its environment
    /// as `ICB_ISOLATE_RUN` so [`crate::cleanup_stale`] finds it if its owner dies.
    pub fn tag(mut self, tag: &RunTag) -> Self {
        self.tag = Some(tag.to_string());
        self
    }

    /// Runs the program with these credentials (a container's securityContext), applied after
    /// the namespaces are set up.
    pub fn credentials(mut self, credentials: Credentials) -> Self {
        self.credentials = credentials;
        self
    }

    /// True when starting it needs root.
    pub fn needs_root(&self) -> bool {
        self.placement.needs_root() || !self.credentials.is_noop()
    }

    /// The full command line that [`PodSpec::spawn`] runs, wrappers included.
    pub fn command_line(&self) -> Result<Vec<OsString>> {
        // Only a pod entering its node's mount namespace needs it (nsenter --wd).
        let cwd = self
            .current_dir
            .clone()
            .or_else(|| std::env::current_dir().ok())
            .unwrap_or_else(|| PathBuf::from("/"));
        let mut argv = self.placement.wrappers(&cwd)?;
        argv.extend(self.credentials.wrapper()?);
        argv.push(self.program.clone());
        argv.extend(self.args.iter().cloned());
        Ok(argv)
    }

    /// Starts the pod with stdin closed and stdout/stderr piped (or merged). Needs a tokio runtime,
    /// and root unless the spec is [`PodSpec::plain`]. The pod dies with the calling thread (see
    /// the `chain` module): call it from a thread that outlives the pod.
    pub fn spawn(&self) -> Result<Pod> {
        if self.needs_root() && !nix::unistd::geteuid().is_root() {
            return Err(IsolateError::NotRoot {
                what: "pods (network, IPC and PID namespaces)",
            });
        }
        let argv = self.command_line()?;
        let tag = match &self.tag {
            Some(t) => t.clone(),
            None => RunTag::new(DEFAULT_PREFIX)?.to_string(),
        };
        let mut cmd = Command::new(&argv[0]);
        cmd.args(&argv[1..]);
        if self.env_clear {
            cmd.env_clear();
        }
        for key in &self.env_removed {
            cmd.env_remove(key);
        }
        cmd.envs(self.env.iter().map(|(k, v)| (k, v)))
            .env(RUN_TAG_ENV, &tag)
            .stdin(Stdio::null())
            .process_group(0)
            .kill_on_drop(true);
        let program = self.program.to_string_lossy().into_owned();
        let spawn_error = |source| IsolateError::Spawn {
            program: program.clone(),
            source,
        };
        let mut merged = None;
        if self.merge_output {
            let (reader, writer) = std::io::pipe().map_err(spawn_error)?;
            cmd.stdout(Stdio::from(writer.try_clone().map_err(spawn_error)?))
                .stderr(Stdio::from(writer));
            merged = Some(reader);
        } else {
            cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        }
        if let Some(dir) = &self.current_dir {
            cmd.current_dir(dir);
        }
        let child = cmd.spawn().map_err(spawn_error)?;
        // Our copies of the write end go with `cmd`, so the reader sees EOF when the pod ends.
        drop(cmd);
        let output = merged
            .map(|reader| pipe::Receiver::from_owned_fd(std::os::fd::OwnedFd::from(reader)))
            .transpose()
            .map_err(|e| IsolateError::io(format!("reading the output of {program}"), e))?;
        let pid = child.id().ok_or_else(|| {
            IsolateError::io(
                format!("starting {program}"),
                std::io::Error::other("exited before its pid could be read"),
            )
        })?;
        Ok(Pod {
            child,
            pid,
            tag,
            program,
            output,
            forks: self.placement.forks(),
        })
    }
}

/// A running pod. Dropping it kills its whole process tree.
#[derive(Debug)]
pub struct Pod {
    child: Child,
    pid: u32,
    tag: String,
    program: String,
    output: Option<pipe::Receiver>,
    /// The chain forks once, so the program is a child of `pid`.
    forks: bool,
}

impl Pod {
    /// Pid (in our PID namespace) of the outermost process: the pod's process-group leader
    /// (`unshare` when the pod has its own PID namespace, else the program itself).
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// The run tag in the pod's environment.
    pub fn tag(&self) -> &str {
        &self.tag
    }

    pub fn program(&self) -> &str {
        &self.program
    }

    /// Takes the stdout pipe (once).
    pub fn take_stdout(&mut self) -> Option<ChildStdout> {
        self.child.stdout.take()
    }

    /// Takes the stderr pipe (once).
    pub fn take_stderr(&mut self) -> Option<ChildStderr> {
        self.child.stderr.take()
    }

    /// Takes the merged stdout+stderr pipe (once) of a pod spawned with [`PodSpec::merge_output`].
    pub fn take_output(&mut self) -> Option<pipe::Receiver> {
        self.output.take()
    }

    /// Pid (in our PID namespace) of the program itself, behind the wrappers: what `nsenter -t`
    /// enters to run something inside the pod. Waits up to `limit` for a forking wrapper to fork;
    /// `None` when the pod ended first.
    pub async fn main_pid(&self, limit: Duration) -> Option<u32> {
        if !self.forks {
            return Some(self.pid);
        }
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            if let Some(child) = children_of(self.pid).first() {
                return Some(*child);
            }
            if tokio::time::Instant::now() >= deadline || !pid_alive(self.pid) {
                return None;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    pub fn child_mut(&mut self) -> &mut Child {
        &mut self.child
    }

    /// Waits for the outermost process to exit (its exit status is the program's).
    pub async fn wait(&mut self) -> std::io::Result<ExitStatus> {
        self.child.wait().await
    }

    pub fn try_wait(&mut self) -> std::io::Result<Option<ExitStatus>> {
        self.child.try_wait()
    }

    /// SIGKILLs the whole tree and reaps the outermost process.
    pub async fn kill(&mut self) -> Result<()> {
        self.start_kill();
        match tokio::time::timeout(REAP_DEADLINE, self.child.wait()).await {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(e)) => Err(IsolateError::io(format!("reaping {}", self.program), e)),
            Err(_) => Err(IsolateError::Survivors {
                what: format!("pod {}", self.program),
                pids: vec![self.pid],
                waited_ms: REAP_DEADLINE.as_millis() as u64,
            }),
        }
    }

    /// Sends SIGKILL to the whole tree without waiting.
    pub fn start_kill(&mut self) {
        let group = Pid::from_raw(self.pid as i32);
        if matches!(self.child.try_wait(), Ok(None)) {
            // The leader is alive, so the group id is still ours.
            let _ = killpg(group, Signal::SIGKILL);
        }
        // Whether or not the group signal went out (the leader may be gone and its pid reused,
        // or `try_wait` may have failed): signal every process that still carries our tag and
        // sits in our group. Seen once under heavy load: a pod's tree still alive 5 s after a
        // drop, with only the group signal to rely on.
        for (pid, _) in tagged_pids(|t| t == self.tag) {
            if pgrp_of(pid) == Some(self.pid) {
                let _ = nix::sys::signal::kill(Pid::from_raw(pid as i32), Signal::SIGKILL);
            }
        }
    }
}

impl Drop for Pod {
    fn drop(&mut self) {
        self.start_kill();
    }
}
