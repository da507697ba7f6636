//! `ic-bench pair --local`: the decode side (`ic-bench serve`) and the prefill side
//! (`ic-bench connect`) as two local processes, optionally isolated the way Kubernetes isolates
//! pods and nodes (`--isolation`, see `icb_isolate::Isolation`), then the shared verdict.
//!
//! Both sides are this same binary, so what runs here is exactly what runs in a pod. Every wait
//! has a deadline; both sides and every namespace are removed on success, failure and Ctrl-C.

use super::common::{finish_pair, settings_to_flags};
use anyhow::{Context as _, anyhow, bail};
use icb_core::{Endpoint, Locality, PAIR_SCHEMA, PairReport, Placement, RunSettings};
use icb_isolate::{DEFAULT_PREFIX, Isolation, LocalPair, PairSide, Pod, StopSignals, cleanup_stale};
use std::collections::VecDeque;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader, Lines};
use tokio::process::ChildStdout;
use tokio::task::JoinHandle;

/// How many stderr lines of each side are kept for the error summary.
const STDERR_KEEP: usize = 200;
/// After the report: how long each side may take to exit on its own before it is killed.
const EXIT_GRACE: Duration = Duration::from_secs(15);
/// Fixed allowance on top of the per-case budget: UCX setup on both sides, CUDA probing, wire-up.
const REPORT_MARGIN: Duration = Duration::from_secs(60);
/// Per-case allowance on top of `--max-time`: warmup, buffer registration, payload verification.
const PER_CASE_MARGIN_S: f64 = 2.0;

#[derive(clap::Args, Debug, Clone)]
pub struct LocalArgs {
    /// With --local: isolate the two sides as none (plain processes), pod (two pods on one node:
    /// shared network, separate IPC and PID namespaces), host-ipc (pods with hostIPC) or node (two
    /// nodes joined by a veth). All but none need root
    #[arg(long, value_enum, value_name = "MODE", default_value = "none", requires = "local")]
    pub isolation: IsolationArg,

    /// With --local: how long the decode side may take to start listening (e.g. 30s, 1m)
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = parse_duration, requires = "local")]
    pub startup_timeout: Duration,
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum IsolationArg {
    None,
    Pod,
    HostIpc,
    Node,
}

impl From<IsolationArg> for Isolation {
    fn from(a: IsolationArg) -> Self {
        match a {
            IsolationArg::None => Isolation::None,
            IsolationArg::Pod => Isolation::Pod,
            IsolationArg::HostIpc => Isolation::HostIpc,
            IsolationArg::Node => Isolation::Node,
        }
    }
}

fn parse_duration(s: &str) -> Result<Duration, String> {
    match humantime::parse_duration(s) {
        Ok(d) if !d.is_zero() => Ok(d),
        Ok(_) => Err("the duration must be above zero".into()),
        Err(e) => Err(format!("'{s}' is not a duration ({e}): write e.g. 30s or 2m")),
    }
}

pub fn run_local(args: &super::pair::Args) -> anyhow::Result<i32> {
    let settings = args.test.settings()?;
    // Any non-JSON format is checked by finish_pair; fail on a bad one before starting anything.
    args.output.report_format()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    match runtime.block_on(run_pair(args, &settings)) {
        Ok(report) => finish_pair(report, &args.expect, &args.output),
        Err(e) => match e.downcast_ref::<Interrupted>() {
            Some(Interrupted(why)) => {
                eprintln!("ic-bench: {why}");
                Ok(icb_core::exit::INTERRUPTED)
            }
            None => Err(e),
        },
    }
}

/// A Ctrl-C or SIGTERM stopped the run after cleanup: exit code 130, not a setup error.
#[derive(Debug)]
struct Interrupted(String);

impl std::fmt::Display for Interrupted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Interrupted {}

/// Runs both sides and returns the prefill side's report with the placement filled in.
async fn run_pair(args: &super::pair::Args, settings: &RunSettings) -> anyhow::Result<PairReport> {
    // Installed before anything is started, so a Ctrl-C at any point reaches the cleanup below.
    let mut signals = StopSignals::install()?;
    let isolation: Isolation = args.local_opts.isolation.into();
    if isolation.needs_root() && icb_isolate::is_root() {
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
    let pair = LocalPair::create(isolation, DEFAULT_PREFIX)?;
    tracing::info!("isolation {isolation}: {}", isolation.describe());
    let mut run = Run::default();
    let outcome = tokio::select! {
        result = run.drive(&pair, args, settings) => result,
        signal = signals.recv() => Err(anyhow!(Interrupted(format!("interrupted by {signal}: both sides stopped and cleaned up")))),
    };
    run.stop().await;
    match (outcome, pair.teardown()) {
        (Ok(report), Ok(())) => Ok(report),
        (Ok(_), Err(cleanup)) => Err(anyhow!(cleanup).context("the run finished but cleaning up after it failed")),
        (Err(e), Ok(())) => Err(e),
        (Err(e), Err(cleanup)) => Err(anyhow!("{e:#}; cleaning up also failed: {cleanup}")),
    }
}

/// The two sides, once started.
#[derive(Default)]
struct Run {
    decode: Option<Side>,
    prefill: Option<Side>,
}

impl Run {
    async fn drive(
        &mut self,
        pair: &LocalPair,
        args: &super::pair::Args,
        settings: &RunSettings,
    ) -> anyhow::Result<PairReport> {
        let exe = std::env::current_exe().context("cannot find the ic-bench executable to start both sides")?;
        let ucx_flags: Vec<String> = match &args.ucx.ucx_lib {
            Some(dir) => vec!["--ucx-lib".into(), dir.display().to_string()],
            None => Vec::new(),
        };
        let forward = tracing::enabled!(tracing::Level::INFO);
        // The sides log as much as we do, so -v shows their progress too.
        let verbosity: &[&str] = if tracing::enabled!(tracing::Level::DEBUG) {
            &["-vv"]
        } else if forward {
            &["-v"]
        } else {
            &[]
        };

        let listen = SocketAddr::new(pair.decode().ip, 0).to_string();
        let spec = pair
            .pod(pair.decode(), &exe)
            .arg("serve")
            .args(verbosity)
            .args(["--listen", &listen, "--once"])
            .args(&ucx_flags);
        let decode = self
            .decode
            .insert(Side::start("decode", "ic-bench serve", spec.spawn()?, forward));
        let address = decode.await_listening(args.local_opts.startup_timeout).await?;
        decode.drain_stdout();
        tracing::info!("decode side listening on {address}");

        let spec = pair
            .pod(pair.prefill(), &exe)
            .arg("connect")
            .args(verbosity)
            .arg(address.to_string())
            .args(settings_to_flags(settings))
            // The side's own verdict (on its stderr) then matches the one judged here.
            .args([
                "--placement",
                if pair.isolation().different_hosts() {
                    "different-hosts"
                } else {
                    "same-host"
                },
            ])
            .arg("--json-line")
            .args(&ucx_flags);
        let prefill = self
            .prefill
            .insert(Side::start("prefill", "ic-bench connect", spec.spawn()?, forward));
        let deadline = report_deadline(settings);
        let report = match tokio::time::timeout(deadline, prefill.read_report()).await {
            Ok(Ok(report)) => {
                prefill.drain_stdout();
                report
            }
            Ok(Err(e)) => {
                return Err(match self.decode.as_mut().and_then(|d| d.failure_note()) {
                    Some(note) => anyhow!("{e:#}; {note}"),
                    None => e,
                });
            }
            Err(_) => bail!(
                "the prefill side (ic-bench connect) gave no result within {} s (derived from the cases and \
                 --max-time); last words: {}",
                deadline.as_secs(),
                prefill.stderr_summary()
            ),
        };
        for side in [&mut self.prefill, &mut self.decode].into_iter().flatten() {
            side.finish().await;
        }
        Ok(with_placement(report, pair, address))
    }

    /// Kills whatever still runs (both process trees) and collects the stderr forwarders.
    async fn stop(&mut self) {
        for side in [self.prefill.take(), self.decode.take()].into_iter().flatten() {
            side.kill().await;
        }
    }
}

/// The report deadline: every case may run up to `--max-time` plus setup, plus a fixed margin.
fn report_deadline(settings: &RunSettings) -> Duration {
    // A week is "no practical limit"; it also keeps an absurd --max-time from overflowing.
    const CAP: Duration = Duration::from_secs(7 * 24 * 3600);
    let cases = (settings.tests.len() * settings.sizes.len() * settings.memory.len()) as f64;
    Duration::try_from_secs_f64(cases * (settings.max_time_s + PER_CASE_MARGIN_S))
        .map_or(CAP, |d| d.min(CAP))
        .saturating_add(REPORT_MARGIN)
}

fn endpoint(side: &PairSide, address: String) -> Endpoint {
    Endpoint {
        host: side.host.clone(),
        pod: side.pod.clone(),
        namespace: None,
        address: Some(address),
        modelled_on: None,
    }
}

fn with_placement(mut report: PairReport, pair: &LocalPair, server: SocketAddr) -> PairReport {
    let isolation = pair.isolation();
    report.placement = Placement {
        locality: if isolation.different_hosts() {
            Locality::DifferentHosts
        } else {
            Locality::SameHost
        },
        mode: format!("local (isolation={isolation})"),
        prefill: endpoint(pair.prefill(), pair.prefill().ip.to_string()),
        decode: endpoint(pair.decode(), server.to_string()),
    };
    report
}

/// One started side: its pod, its stdout, and its stderr being kept (and forwarded with -v).
struct Side {
    label: &'static str,
    what: &'static str,
    pod: Pod,
    stdout: Option<Lines<BufReader<ChildStdout>>>,
    stderr: Arc<Mutex<VecDeque<String>>>,
    forwarder: Option<JoinHandle<()>>,
    forward: bool,
    stdout_drain: Option<JoinHandle<()>>,
}

impl Side {
    fn start(label: &'static str, what: &'static str, mut pod: Pod, forward: bool) -> Side {
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
        Side {
            label,
            what,
            pod,
            stdout,
            stderr,
            forwarder,
            forward,
            stdout_drain: None,
        }
    }

    /// Waits for `{"event":"listening",…,"address":"ip:port"}` on the decode side's stdout.
    async fn await_listening(&mut self, timeout: Duration) -> anyhow::Result<SocketAddr> {
        let read = async {
            loop {
                match self.next_stdout_line().await {
                    Some(line) => {
                        if let Some(addr) = parse_listening(&line)? {
                            return Ok(addr);
                        }
                        tracing::debug!("[{}] stdout: {line}", self.label);
                    }
                    None => return Err(self.exited_error("before listening").await),
                }
            }
        };
        match tokio::time::timeout(timeout, read).await {
            Ok(result) => result,
            Err(_) => bail!(
                "the {} side ({}) did not start listening within {} (raise --startup-timeout); last words: {}",
                self.label,
                self.what,
                humantime::format_duration(timeout),
                self.stderr_summary()
            ),
        }
    }

    /// Reads stdout until the JSON report line.
    async fn read_report(&mut self) -> anyhow::Result<PairReport> {
        loop {
            let Some(line) = self.next_stdout_line().await else {
                return Err(self.exited_error("without printing a result").await);
            };
            let Some(json) = json_object_at(&line, r#"{"schema":""#) else {
                tracing::debug!("[{}] stdout: {line}", self.label);
                continue;
            };
            let report: PairReport = serde_json::from_str(json).with_context(|| {
                format!(
                    "the {} side ({}) printed a result that is not an {PAIR_SCHEMA} report",
                    self.label, self.what
                )
            })?;
            if report.schema != PAIR_SCHEMA {
                bail!(
                    "the {} side printed schema '{}', this ic-bench reads {PAIR_SCHEMA}: run the same ic-bench on both sides",
                    self.label,
                    report.schema
                );
            }
            return Ok(report);
        }
    }

    /// Keeps reading stdout once we have what we need from it: with `UCX_LOG_LEVEL` set, UCX logs
    /// to stdout, and a full pipe would stall the side mid-run.
    fn drain_stdout(&mut self) {
        if let Some(mut lines) = self.stdout.take() {
            let (label, forward) = (self.label, self.forward);
            self.stdout_drain = Some(tokio::spawn(async move {
                while let Ok(Some(line)) = lines.next_line().await {
                    if forward {
                        eprintln!("[{label}] {line}");
                    }
                }
            }));
        }
    }

    async fn next_stdout_line(&mut self) -> Option<String> {
        let lines = self.stdout.as_mut()?;
        match lines.next_line().await {
            Ok(Some(line)) => Some(line),
            Ok(None) | Err(_) => {
                self.stdout = None;
                None
            }
        }
    }

    /// The error for a side whose stdout ended early: its exit status and its last stderr words.
    async fn exited_error(&mut self, when: &str) -> anyhow::Error {
        let status = match tokio::time::timeout(Duration::from_secs(5), self.pod.wait()).await {
            Ok(Ok(status)) => status.to_string(),
            Ok(Err(e)) => format!("unknown status ({e})"),
            Err(_) => "closed its output but is still running".to_string(),
        };
        self.drain_stderr().await;
        anyhow!(
            "the {} side ({}) exited {when} ({status}): {}",
            self.label,
            self.what,
            self.stderr_summary()
        )
    }

    /// A note on this side when it already failed (used to explain the other side's error).
    fn failure_note(&mut self) -> Option<String> {
        match self.pod.try_wait() {
            Ok(Some(status)) if !status.success() => Some(format!(
                "the {} side exited ({status}): {}",
                self.label,
                self.stderr_summary()
            )),
            _ => None,
        }
    }

    /// After the report: let the side exit on its own (serve --once, connect), else kill it.
    async fn finish(&mut self) {
        match tokio::time::timeout(EXIT_GRACE, self.pod.wait()).await {
            Ok(Ok(status)) if status.success() || self.label == "prefill" => {}
            Ok(Ok(status)) => tracing::warn!("the {} side exited ({status}): {}", self.label, self.stderr_summary()),
            Ok(Err(e)) => tracing::warn!("waiting for the {} side: {e}", self.label),
            Err(_) => tracing::warn!(
                "the {} side did not exit within {} s; killing it",
                self.label,
                EXIT_GRACE.as_secs()
            ),
        }
    }

    async fn kill(mut self) {
        if let Err(e) = self.pod.kill().await {
            tracing::warn!("stopping the {} side: {e}", self.label);
        }
        self.drain_stderr().await;
        if let Some(drain) = self.stdout_drain.take() {
            // Only a grandchild that escaped the kill could hold the pipe; do not wait for it.
            drain.abort();
        }
    }

    /// Lets the forwarder read what the side wrote before it ended (bounded: a grandchild could
    /// hold the pipe open).
    async fn drain_stderr(&mut self) {
        if let Some(handle) = self.forwarder.take() {
            let abort = handle.abort_handle();
            if tokio::time::timeout(Duration::from_secs(2), handle).await.is_err() {
                abort.abort();
            }
        }
    }

    /// One line from the kept stderr: the last line that reads like an error, else the last line.
    fn stderr_summary(&self) -> String {
        let kept = match self.stderr.lock() {
            Ok(kept) => kept.clone(),
            Err(_) => return "(stderr unavailable)".into(),
        };
        summarize(kept.iter().map(String::as_str))
    }
}

/// What util-linux `unshare` (2.38) prints when the program it forked (its PID namespace's init)
/// was killed by SIGKILL: it fails to re-raise the signal on itself and exits 1.
const UNSHARE_REKILL: &str = "unshare: sigprocmask unblock failed";

fn summarize<'a>(lines: impl DoubleEndedIterator<Item = &'a str> + Clone) -> String {
    let nonempty = lines.map(str::trim).filter(|l| !l.is_empty());
    if nonempty
        .clone()
        .next_back()
        .is_some_and(|l| l.starts_with(UNSHARE_REKILL))
    {
        return "killed by a signal inside its PID namespace".into();
    }
    let pick = nonempty
        .clone()
        .rev()
        .find(|l| l.to_ascii_lowercase().contains("error"))
        .or_else(|| nonempty.clone().next_back());
    match pick {
        Some(line) => {
            // The side's own "ic-bench: error: " would only repeat ours.
            let mut line = line.strip_prefix("ic-bench: error: ").unwrap_or(line).to_string();
            if line.len() > 400 {
                let cut = (0..=400).rev().find(|i| line.is_char_boundary(*i)).unwrap_or(0);
                line.truncate(cut);
                line.push('…');
            }
            line
        }
        None => "(nothing on stderr; rerun with -v)".into(),
    }
}

/// The JSON object starting at `marker` in `line`. UCX logs to stdout through its own buffered
/// stream (with `UCX_LOG_LEVEL` set) and flushes half a log line just before ours (seen with
/// `UCX_LOG_LEVEL=debug`), so our object need not start the line.
fn json_object_at<'a>(line: &'a str, marker: &str) -> Option<&'a str> {
    line.find(marker).map(|at| line[at..].trim_end())
}

/// `Some(address)` for the listening event, `None` for other lines; an error for a listening
/// event without a usable address.
fn parse_listening(line: &str) -> anyhow::Result<Option<SocketAddr>> {
    // The event's keys come in no fixed order, so try each '{' (after any partial UCX log text).
    let Some(value) = line
        .match_indices('{')
        .find_map(|(at, _)| serde_json::from_str::<serde_json::Value>(line[at..].trim_end()).ok())
    else {
        return Ok(None);
    };
    if value.get("event").and_then(|e| e.as_str()) != Some("listening") {
        return Ok(None);
    }
    let address = value.get("address").and_then(|a| a.as_str()).unwrap_or_default();
    address.parse().map(Some).map_err(|_| {
        anyhow!(
            "the decode side announced a bad listen address '{address}' (expected IP:PORT): ic-bench serve is broken"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listening_lines() {
        let ok = r#"{"event":"listening","ucx_version":"1.22.0","address":"10.99.0.1:41234"}"#;
        assert_eq!(parse_listening(ok).unwrap(), Some("10.99.0.1:41234".parse().unwrap()));
        assert_eq!(parse_listening("starting up").unwrap(), None);
        // As seen with UCX_LOG_LEVEL=debug: half a UCX log line, then ours (keys sorted).
        let after_partial_log = r#"[1795315460.977421] [vm:28799:0] mpool.c:122 UCX DEBUG mpool ucp_re{"address":"127.0.0.1:35511","event":"listening","schema":"ic-bench.serve/v1","ucx":"1.22.0"}"#;
        assert_eq!(
            parse_listening(after_partial_log).unwrap(),
            Some("127.0.0.1:35511".parse().unwrap())
        );
        assert_eq!(
            json_object_at(r#"x{"a":1}{"schema":"s"}"#, r#"{"schema":""#),
            Some(r#"{"schema":"s"}"#)
        );
        assert_eq!(parse_listening(r#"{"event":"other"}"#).unwrap(), None);
        let err = parse_listening(r#"{"event":"listening","address":"nope"}"#)
            .unwrap_err()
            .to_string();
        assert!(err.contains("bad listen address 'nope'"), "{err}");
    }

    #[test]
    fn summaries_prefer_errors_and_stay_one_line() {
        let lines = ["starting", "ic-bench: error: cannot load UCX", "bye", ""];
        assert_eq!(summarize(lines.iter().copied()), "cannot load UCX");
        assert_eq!(summarize(["a", "b"].iter().copied()), "b");
        let killed = ["unshare: sigprocmask unblock failed: Invalid argument"];
        assert_eq!(
            summarize(killed.iter().copied()),
            "killed by a signal inside its PID namespace"
        );
        assert_eq!(summarize([""].iter().copied()), "(nothing on stderr; rerun with -v)");
        let long = "é".repeat(500);
        let s = summarize([long.as_str()].iter().copied());
        assert!(s.len() <= 404 && s.ends_with('…'));
    }

    #[test]
    fn report_deadline_grows_with_cases() {
        let mut settings = RunSettings {
            tests: vec![icb_core::TestKind::TagBw],
            sizes: vec![8],
            memory: vec![icb_core::MemoryPair::HOST_HOST],
            warmup_iterations: 1,
            min_iterations: 1,
            min_time_s: 0.1,
            max_time_s: 5.0,
            window: 1,
            unit: icb_core::BandwidthUnit::GBps,
            require_cuda: false,
            stop: None,
            plan: Vec::new(),
            blocks: None,
            window_candidates: Vec::new(),
            untouched_buffers: false,
        };
        assert_eq!(report_deadline(&settings), Duration::from_secs(67));
        settings.sizes = vec![8, 16];
        assert_eq!(report_deadline(&settings), Duration::from_secs(74));
        settings.max_time_s = 1e300;
        assert_eq!(report_deadline(&settings), Duration::from_secs(7 * 24 * 3600 + 60));
    }
}
