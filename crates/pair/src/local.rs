//! The local launcher: both sides are this same binary started as two processes, optionally
//! isolated the way Kubernetes isolates pods and nodes (`icb_isolate::Isolation`), so what runs
//! here is exactly what runs in a pod.

use crate::launcher::{LaunchError, Launcher, Side, summarize};
use icb_core::model::{Endpoint, Locality, PairReport, Placement};
use icb_core::protocol::{ChildPlan, Listening};
use icb_isolate::{DEFAULT_PREFIX, Isolation, LocalPair, PairSide, Pod, cleanup_stale};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::ChildStdout;
use tokio::task::JoinHandle;

/// How many stderr lines of each side are kept for error messages.
const STDERR_KEEP: usize = 200;

/// How the two local processes are started.
#[derive(Debug, Clone)]
pub struct LocalOptions {
    pub isolation: Isolation,
    /// The ic-bench executable both sides run.
    pub exe: PathBuf,
    /// `--ucx-lib` for both sides.
    pub ucx_lib: Option<PathBuf>,
    /// Extra flags for both sides (e.g. `-v`), so they log as much as the parent.
    pub verbosity: Vec<String>,
    /// The engine selection both sides get (`--engine nixl`, `--nixl-lib`, `--ucx-profile`).
    pub side_args: Vec<String>,
    /// Copy both sides' stderr to ours, prefixed `[decode]` / `[prefill]`.
    pub forward_stderr: bool,
    /// Limit the emulated link (`--isolation node`) to this rate (`tc … tbf`, e.g. `30mbit`).
    pub link_rate: Option<String>,
    /// This run's token, handed to both sides through `IC_BENCH_TOKEN` (never on the command
    /// line, where `ps` shows it); `None`: the sides get none of their own.
    pub token: Option<RunToken>,
    /// `pair --recipe`: the recipe's transport env of each side, set on top of ours.
    pub recipe_env: RecipeEnv,
}

impl LocalOptions {
    /// Plain processes of `exe` (no isolation, link limit, token or recipe env) that log as
    /// much as this process does; callers set the rest with struct update syntax.
    pub fn new(exe: PathBuf) -> LocalOptions {
        LocalOptions {
            isolation: Isolation::None,
            exe,
            ucx_lib: None,
            verbosity: child_verbosity(),
            side_args: Vec::new(),
            forward_stderr: false,
            link_rate: None,
            token: None,
            recipe_env: RecipeEnv::default(),
        }
    }

    /// What a bare-metal rails host's ranks run (`serve`/`connect --rails`): this binary,
    /// logging as much as this process does, with `side_args` (a `--token-file` travels there;
    /// ranks inherit IC_BENCH_TOKEN).
    pub fn ranks_of_this_binary(
        ucx_lib: Option<PathBuf>,
        side_args: Vec<String>,
        forward_stderr: bool,
    ) -> Result<LocalOptions, NoExecutable> {
        let exe = std::env::current_exe().map_err(NoExecutable)?;
        Ok(LocalOptions {
            ucx_lib,
            side_args,
            forward_stderr,
            ..LocalOptions::new(exe)
        })
    }
}

/// This binary's path could not be read, so no rank can be started (one line, exit 2).
#[derive(Debug, thiserror::Error)]
#[error("cannot find the ic-bench executable to start the ranks: {0}")]
pub struct NoExecutable(std::io::Error);

/// `-v`/`-vv` when the binary logs at info/debug, so the sides' progress shows too (the
/// binary's own target: its `-v` and `IC_BENCH_LOG=ic_bench=…` decide).
pub fn child_verbosity() -> Vec<String> {
    if tracing::enabled!(target: "ic_bench", tracing::Level::DEBUG) {
        vec!["-vv".into()]
    } else if tracing::enabled!(target: "ic_bench", tracing::Level::INFO) {
        vec!["-v".into()]
    } else {
        vec![]
    }
}

/// A recipe's transport env for each side (`pair --local --recipe`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecipeEnv {
    pub prefill: Vec<(String, String)>,
    pub decode: Vec<(String, String)>,
}

/// A run's shared secret; `Debug` never shows it.
#[derive(Clone, PartialEq, Eq)]
pub struct RunToken(pub String);

impl std::fmt::Debug for RunToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RunToken(<redacted>)")
    }
}

pub struct LocalLauncher {
    opts: LocalOptions,
    pair: Option<Arc<LocalPair>>,
    /// Rails mode: this launcher runs one row's ranks on a pair shared by all rows, which the
    /// rails seam removes (`crate::rails::local`).
    rank: Option<RankPinning>,
    /// A knobs-off control's variables: the sides start without them (`Launcher::set_removed_env`).
    removed_env: Vec<String>,
}

/// How one row's two ranks are pinned: environment (`UCX_NET_DEVICES`, `CUDA_VISIBLE_DEVICES`)
/// and CPUs (`taskset -c LIST`, the NUMA node's CPUs) per side.
#[derive(Debug, Clone, Default)]
pub struct RankPinning {
    pub row: usize,
    pub prefill: SidePinning,
    pub decode: SidePinning,
}

#[derive(Debug, Clone, Default)]
pub struct SidePinning {
    pub env: Vec<(String, String)>,
    /// A CPU list as `taskset -c` takes it (`0-15,32-47`).
    pub cpus: Option<String>,
}

impl LocalLauncher {
    /// Removes leftovers of crashed runs (modes that need root) and builds the namespaces.
    pub fn create(opts: LocalOptions) -> Result<LocalLauncher, LaunchError> {
        if opts.isolation.needs_root() && icb_isolate::is_root() {
            match cleanup_stale(DEFAULT_PREFIX) {
                Ok(c) if !c.is_empty() => tracing::info!(
                    "removed leftovers of crashed runs: namespaces {:?}, {} processes",
                    c.namespaces,
                    c.processes.len()
                ),
                Ok(_) => {}
                Err(e) => tracing::warn!("could not remove leftovers of crashed runs: {e}"),
            }
        }
        let pair = LocalPair::create(opts.isolation, DEFAULT_PREFIX).map_err(|e| LaunchError::new(e.to_string()))?;
        if let Some(rate) = &opts.link_rate {
            // Dropping the pair on this error deletes its namespaces.
            pair.rate_limit(rate).map_err(|e| LaunchError::new(e.to_string()))?;
            tracing::info!("emulated link limited to {rate} (tc tbf)");
        }
        tracing::info!("isolation {}: {}", opts.isolation, opts.isolation.describe());
        Ok(LocalLauncher {
            opts,
            pair: Some(Arc::new(pair)),
            rank: None,
            removed_env: Vec::new(),
        })
    }

    /// The namespaces (or plain processes) of a new pair in the same isolation, with the same
    /// emulated link, for one more run after cleanup.
    fn recreate(&mut self) -> Result<(), LaunchError> {
        let pair =
            LocalPair::create(self.opts.isolation, DEFAULT_PREFIX).map_err(|e| LaunchError::new(e.to_string()))?;
        if let Some(rate) = &self.opts.link_rate {
            pair.rate_limit(rate).map_err(|e| LaunchError::new(e.to_string()))?;
        }
        self.pair = Some(Arc::new(pair));
        Ok(())
    }

    /// A launcher for one row of a rails run: its sides run on `pair` (shared by every row and
    /// removed by its owner), pinned as `rank` says.
    pub fn for_rank(opts: LocalOptions, pair: Arc<LocalPair>, rank: RankPinning) -> LocalLauncher {
        LocalLauncher {
            opts,
            pair: Some(pair),
            rank: Some(rank),
            removed_env: Vec::new(),
        }
    }

    fn pair(&self) -> Result<&LocalPair, LaunchError> {
        self.pair
            .as_deref()
            .ok_or_else(|| LaunchError::new("the local pair was already cleaned up"))
    }

    fn spawn(&self, side: &PairSide, label: &'static str, args: Vec<String>) -> Result<LocalSide, LaunchError> {
        let pair = self.pair()?;
        let pinning = self.rank.as_ref().map(|r| match label {
            "decode" => &r.decode,
            _ => &r.prefill,
        });
        let mut spec = match pinning.and_then(|p| p.cpus.as_ref()) {
            Some(cpus) => pair.pod(side, "taskset").arg("-c").arg(cpus).arg(&self.opts.exe),
            None => pair.pod(side, &self.opts.exe),
        }
        .args(&args)
        .args(&self.opts.verbosity)
        .args(&self.opts.side_args);
        let recipe = match label {
            "decode" => &self.opts.recipe_env.decode,
            _ => &self.opts.recipe_env.prefill,
        };
        let kept = |(k, _): &&(String, String)| !self.removed_env.contains(k);
        spec = spec.envs(recipe.iter().filter(kept).map(|(k, v)| (k.as_str(), v.as_str())));
        for key in &self.removed_env {
            spec = spec.env_remove(key);
        }
        if let Some(p) = pinning {
            spec = spec.envs(p.env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        }
        if let Some(RunToken(token)) = &self.opts.token {
            spec = spec.envs([(icb_core::protocol::TOKEN_ENV, token.as_str())]);
        }
        if let Some(dir) = &self.opts.ucx_lib {
            spec = spec.arg("--ucx-lib").arg(dir);
        }
        let pod = spec.spawn().map_err(|e| LaunchError::new(e.to_string()))?;
        let what = if label == "decode" {
            "ic-bench serve"
        } else {
            "ic-bench connect"
        };
        Ok(LocalSide::start(label, what, pod, self.opts.forward_stderr))
    }
}

impl Launcher for LocalLauncher {
    type Side = LocalSide;

    fn locality(&self) -> Locality {
        Locality::of_same_host(!self.opts.isolation.different_hosts())
    }

    fn mode(&self) -> String {
        format!("local (isolation={})", self.opts.isolation)
    }

    async fn start_decode(&mut self) -> Result<LocalSide, LaunchError> {
        let pair = self.pair()?;
        let listen = SocketAddr::new(pair.decode().ip, 0).to_string();
        let side = pair.decode().clone();
        let args = ["serve", "--listen", &listen, "--once", "--side-events"]
            .map(String::from)
            .to_vec();
        self.spawn(&side, "decode", args)
    }

    async fn start_prefill(&mut self, server: &Listening, plan: &ChildPlan) -> Result<LocalSide, LaunchError> {
        let side = self.pair()?.prefill().clone();
        let args = vec![
            "connect".to_string(),
            server.address.clone(),
            "--plan".into(),
            plan.to_json(),
        ];
        self.spawn(&side, "prefill", args)
    }

    fn placement(&self, server: &Listening, report: &PairReport) -> Placement {
        let Some(pair) = self.pair.as_ref() else {
            return report.placement.clone();
        };
        let endpoint = |side: &PairSide, address: String| Endpoint {
            host: side.host.clone(),
            pod: side.pod.clone(),
            namespace: None,
            address: Some(address),
            modelled_on: None,
        };
        Placement {
            locality: self.locality(),
            mode: self.mode(),
            prefill: endpoint(pair.prefill(), pair.prefill().ip.to_string()),
            decode: endpoint(pair.decode(), server.address.clone()),
        }
    }

    fn rearm(&mut self) -> Result<(), LaunchError> {
        match (&self.pair, &self.rank) {
            (None, None) => self.recreate(),
            _ => Ok(()),
        }
    }

    fn set_removed_env(&mut self, vars: &[String]) -> Result<(), LaunchError> {
        self.removed_env = vars.to_vec();
        Ok(())
    }

    async fn cleanup(&mut self) -> Result<String, LaunchError> {
        let Some(pair) = self.pair.take() else {
            return Ok(String::new());
        };
        // A row's ranks were stopped (killed with their process trees) by the pipeline; the
        // shared namespaces are the rails seam's to remove.
        if let Some(rank) = &self.rank {
            return Ok(format!("the ranks of row {}", rank.row));
        }
        let pair = Arc::try_unwrap(pair)
            .map_err(|_| LaunchError::new("the local pair is still shared; its owner removes it"))?;
        let what = match pair.isolation() {
            Isolation::None => "both processes".to_string(),
            other => format!("both processes and the namespaces of --isolation {other}"),
        };
        pair.teardown().map_err(|e| LaunchError::new(e.to_string()))?;
        Ok(what)
    }
}

/// One started local side: its pod, its stdout, and its stderr being kept (and forwarded).
pub struct LocalSide {
    label: &'static str,
    what: &'static str,
    pod: Pod,
    stdout: Option<Lines<BufReader<ChildStdout>>>,
    stderr: Arc<Mutex<VecDeque<String>>>,
    forwarder: Option<JoinHandle<()>>,
    forward: bool,
}

impl LocalSide {
    pub fn start(label: &'static str, what: &'static str, mut pod: Pod, forward: bool) -> LocalSide {
        let stdout = pod.take_stdout().map(|s| BufReader::new(s).lines());
        let stderr = Arc::new(Mutex::new(VecDeque::new()));
        let forwarder = pod.take_stderr().map(|pipe| {
            let kept = Arc::clone(&stderr);
            tokio::spawn(async move {
                let mut lines = BufReader::new(pipe).lines();
                while let Ok(Some(line)) = lines.next_line().await {
                    if forward {
                        eprintln!("[{label}] {line}");
                    }
                    if let Ok(mut kept) = kept.lock() {
                        if kept.len() == STDERR_KEEP {
                            kept.pop_front();
                        }
                        kept.push_back(line);
                    }
                }
            })
        });
        LocalSide {
            label,
            what,
            pod,
            stdout,
            stderr,
            forwarder,
            forward,
        }
    }

    /// Lets the stderr forwarder read what the side wrote before it ended (bounded: a grandchild
    /// could hold the pipe open).
    async fn drain_stderr(&mut self) {
        if let Some(handle) = self.forwarder.take() {
            let abort = handle.abort_handle();
            if tokio::time::timeout(Duration::from_secs(2), handle).await.is_err() {
                abort.abort();
            }
        }
    }

    /// Reads stdout to its end (and the process's), so a side that still prints is never blocked
    /// on a full pipe.
    async fn drain_stdout(&mut self) {
        while self.next_line().await.is_some() {}
    }
}

impl Side for LocalSide {
    fn name(&self) -> String {
        format!("the {} side ({})", self.label, self.what)
    }

    async fn next_line(&mut self) -> Option<String> {
        if let Some(lines) = self.stdout.as_mut() {
            match lines.next_line().await {
                Ok(Some(line)) => {
                    if self.forward {
                        tracing::debug!("[{}] stdout: {line}", self.label);
                    }
                    return Some(line);
                }
                Ok(None) | Err(_) => self.stdout = None,
            }
        }
        // A side may close its stdout early (serve does, once it announced its address): the
        // side has ended only when its process has.
        let _ = self.pod.wait().await;
        None
    }

    async fn exit_note(&mut self) -> Option<String> {
        let status = match tokio::time::timeout(Duration::from_secs(5), self.pod.wait()).await {
            Ok(Ok(status)) if status.success() => None,
            Ok(Ok(status)) => Some(status.to_string()),
            Ok(Err(e)) => Some(format!("unknown status ({e})")),
            Err(_) => Some("closed its output but is still running".to_string()),
        };
        self.drain_stderr().await;
        status.map(|s| format!("{s}: {}", self.last_words()))
    }

    async fn interrupt(&mut self) {
        // Each side runs in its own process group (wrappers and namespaces included): the
        // signal reaches `ic-bench connect` itself, which writes its partial report.
        let group = nix::unistd::Pid::from_raw(-(self.pod.pid() as i32));
        if let Err(e) = nix::sys::signal::kill(group, nix::sys::signal::Signal::SIGTERM) {
            tracing::debug!("interrupting {}: {e}", self.name());
        }
    }

    fn pid(&self) -> Option<u32> {
        Some(self.pod.pid())
    }

    fn last_words(&self) -> String {
        match self.stderr.lock() {
            Ok(kept) => summarize(kept.iter().map(String::as_str)),
            Err(_) => "(stderr unavailable)".into(),
        }
    }

    async fn stop(&mut self, grace: Duration) {
        if !grace.is_zero() {
            let exited = tokio::time::timeout(grace, async {
                self.drain_stdout().await;
                self.pod.wait().await
            })
            .await;
            match exited {
                // The prefill side exits 1 on a failed verdict: that is its answer, not a fault.
                Ok(Ok(status)) if status.success() || self.label == "prefill" => {}
                Ok(Ok(status)) => tracing::warn!("{} exited ({status}): {}", self.name(), self.last_words()),
                Ok(Err(e)) => tracing::warn!("waiting for {}: {e}", self.name()),
                Err(_) => tracing::warn!("{} did not exit within {} s; stopping it", self.name(), grace.as_secs()),
            }
        }
        if let Err(e) = self.pod.kill().await {
            tracing::warn!("stopping {}: {e}", self.name());
        }
        self.drain_stderr().await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A rails host's ranks run this very binary with the side flags they were given, and
    /// nothing of a pair run's own (no isolation, token or recipe env).
    #[test]
    fn a_rails_hosts_ranks_run_this_binary() {
        let side = vec!["--engine".to_string(), "ucx".to_string()];
        let ranks = LocalOptions::ranks_of_this_binary(Some("/opt/ucx".into()), side.clone(), true).unwrap();
        assert_eq!(ranks.exe, std::env::current_exe().unwrap());
        assert_eq!(
            (ranks.ucx_lib, ranks.side_args),
            (Some(PathBuf::from("/opt/ucx")), side)
        );
        assert!(ranks.forward_stderr && ranks.token.is_none() && ranks.isolation == Isolation::None);
        assert_eq!(ranks.recipe_env, RecipeEnv::default());
    }
}
