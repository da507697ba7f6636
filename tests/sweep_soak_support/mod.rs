//! The sweep soak (issue 22, item 5): `ic-bench sweep` on an emulated cluster while faults are
//! injected at random from one seed — API 500s on random requests, bench pods SIGKILLed
//! mid-pair, a node's cable pulled, the API server restarted — then every verdict checked against
//! what was injected and everything the run used checked for leftovers.
//!
//! The temp dirs a run uses, each checked: the sweep process's `TMPDIR`, the bench pods' `TMPDIR`
//! (set in their image's environment), the results directory (only the files asked for: no
//! temporary of the atomic rewrite left behind), and the emulated cluster's own directory (gone
//! after shutdown, with its network namespaces and every process it started).
#![allow(dead_code)]

pub mod faults;

use faults::{Injected, Planned, pair_key};
use icb_testcluster::{ClusterConfig, ImageConfig, Isolation, NodeConfig, TestCluster};
use serde_json::Value;
use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The ic-bench the sweep and the pods run: this build's (as every kube test), or
/// `IC_BENCH_SOAK_BIN` (`scripts/soak-sweep` passes target/release/ic-bench).
pub fn bin() -> PathBuf {
    match std::env::var_os("IC_BENCH_SOAK_BIN") {
        Some(p) => std::fs::canonicalize(&p).unwrap_or_else(|e| panic!("IC_BENCH_SOAK_BIN={p:?}: {e}")),
        None => PathBuf::from(env!("CARGO_BIN_EXE_ic-bench")),
    }
}

/// Short pairs (the emulated fabric is TCP over veths), as tests/sweep_kube.rs runs them.
pub const SWEEP_ARGS: &[&str] = &[
    "--tests",
    "put_bw,get_bw,tag_lat",
    "--sizes",
    "1MiB",
    "--max-time",
    "0.3",
    "--allow-tcp",
    "--min-host-bw",
    "0.001",
    "--pair-timeout",
    "60s",
    "--request-timeout",
    "10s",
];

/// The directories a run uses (see the module's prose).
pub struct Dirs {
    _root: tempfile::TempDir,
    pub sweep_tmp: PathBuf,
    pub pod_tmp: PathBuf,
    pub out: PathBuf,
}

impl Dirs {
    pub fn create() -> Dirs {
        let root = tempfile::Builder::new().prefix("icb-soak-").tempdir().unwrap();
        let mk = |name: &str| {
            let p = root.path().join(name);
            std::fs::create_dir(&p).unwrap();
            p
        };
        Dirs {
            sweep_tmp: mk("sweep-tmp"),
            pod_tmp: mk("pod-tmp"),
            out: mk("out"),
            _root: root,
        }
    }

    pub fn results(&self, name: &str) -> PathBuf {
        self.out.join(format!("{name}.json"))
    }
}

/// `nodes` plain nodes (node-1 …) in Linux namespaces, pods running this build's ic-bench with
/// `TMPDIR` pointing into `dirs`.
pub fn soak_cluster(nodes: usize, dirs: &Dirs) -> TestCluster {
    let image = ImageConfig::new(bin()).env("TMPDIR", &dirs.pod_tmp.display().to_string());
    let config = (1..=nodes)
        .fold(ClusterConfig::new(), |c, i| {
            c.node(NodeConfig::new(format!("node-{i}")))
        })
        .default_image(image)
        .isolation(Isolation::Namespaces);
    TestCluster::start_blocking(config).expect("the emulated cluster starts")
}

/// One sweep process, as it ended.
#[derive(Debug)]
pub struct SweepRun {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    /// The sweep process's peak resident set (VmHWM), KiB.
    pub peak_rss_kib: u64,
    /// (seconds since start, VmRSS KiB), every 100 ms.
    pub rss: Vec<(f64, u64)>,
    pub wall: Duration,
    pub results: Value,
    pub injected: Injected,
    pub sigterm_sent: bool,
}

fn status_kib(pid: u32, field: &str) -> Option<u64> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let line = text.lines().find(|l| l.starts_with(field))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

fn read_pairs(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|t| serde_json::from_str::<Value>(&t).ok())
        .and_then(|r| r["pairs"].as_array().map(|a| a.iter().map(pair_key).collect()))
        .unwrap_or_default()
}

/// How a watched child ended (`None`: killed at the limit), its peak RSS (KiB) and its RSS
/// samples (seconds since start, KiB).
type Sampled = (Option<std::process::ExitStatus>, u64, Vec<(f64, u64)>);

/// A child process watched from threads: its output drained, its peak RSS (VmHWM) and RSS
/// sampled every 100 ms until it exits or `limit` passes (then it is killed).
struct Watched {
    ended: Arc<AtomicBool>,
    sampler: std::thread::JoinHandle<Sampled>,
    out: std::thread::JoinHandle<String>,
    err: std::thread::JoinHandle<String>,
}

impl Watched {
    fn start(mut child: std::process::Child, started: Instant, limit: Duration) -> Watched {
        let drain = |mut r: Box<dyn std::io::Read + Send>| {
            std::thread::spawn(move || {
                let mut s = String::new();
                let _ = r.read_to_string(&mut s);
                s
            })
        };
        let out = drain(Box::new(child.stdout.take().unwrap()));
        let err = drain(Box::new(child.stderr.take().unwrap()));
        let ended = Arc::new(AtomicBool::new(false));
        let flag = ended.clone();
        let sampler = std::thread::spawn(move || {
            let pid = child.id();
            let mut rss = Vec::new();
            let mut peak = 0;
            let status = loop {
                // Sampled before the exit check: the last sample is the closest to the end.
                if let Some(hwm) = status_kib(pid, "VmHWM:") {
                    peak = peak.max(hwm);
                }
                if let Some(now) = status_kib(pid, "VmRSS:") {
                    rss.push((started.elapsed().as_secs_f64(), now));
                }
                if let Some(s) = child.try_wait().unwrap() {
                    break Some(s);
                }
                if started.elapsed() > limit {
                    let _ = child.kill();
                    let _ = child.wait();
                    break None;
                }
                std::thread::sleep(Duration::from_millis(100));
            };
            flag.store(true, Ordering::SeqCst);
            (status, peak, rss)
        });
        Watched {
            ended,
            sampler,
            out,
            err,
        }
    }

    /// What [`Sampled`] says, with stdout and stderr.
    fn finish(self) -> (Sampled, String, String) {
        let sampled = self.sampler.join().unwrap();
        (sampled, self.out.join().unwrap(), self.err.join().unwrap())
    }
}

/// Runs `ic-bench sweep` (killed after `limit`, which fails the test) while injecting `plan`
/// (victims drawn from `seed`); SIGTERM once `sigterm_after` pairs are recorded, if set.
pub fn run_sweep(
    cluster: &TestCluster,
    dirs: &Dirs,
    name: &str,
    plan: &[Planned],
    seed: u64,
    sigterm_after: Option<usize>,
    limit: Duration,
) -> SweepRun {
    let results = dirs.results(name);
    let started = Instant::now();
    let child = Command::new(bin())
        .arg("sweep")
        .arg("--kubeconfig")
        .arg(cluster.kubeconfig_path())
        .args(SWEEP_ARGS)
        .arg("--results")
        .arg(&results)
        .env("TMPDIR", &dirs.sweep_tmp)
        .env("IC_BENCH_LOG", "warn,kube_client=off,kube_runtime=off")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("ic-bench starts");
    let pid = child.id();
    let watched = Watched::start(child, started, limit);
    let mut rng = faults::victim_rng(seed);
    let mut injected = Injected::default();
    let mut next = 0;
    let mut sigterm_sent = false;
    let is_ended = || watched.ended.load(Ordering::SeqCst);
    while !is_ended() {
        let recorded = read_pairs(&results);
        while next < plan.len() && plan[next].after_pairs <= recorded.len() && !is_ended() {
            if faults::inject(
                cluster,
                &plan[next].fault,
                &mut rng,
                &recorded,
                &mut injected,
                &is_ended,
            )
            .is_none()
            {
                injected.not_injected.push(plan[next].fault.clone());
            }
            next += 1;
        }
        if let Some(n) = sigterm_after
            && !sigterm_sent
            && recorded.len() >= n
        {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid as i32),
                nix::sys::signal::Signal::SIGTERM,
            );
            sigterm_sent = true;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    injected
        .not_injected
        .extend(plan[next..].iter().map(|p| p.fault.clone()));
    let ((status, peak_rss_kib, rss), stdout, stderr) = watched.finish();
    let Some(status) = status else {
        panic!("the sweep did not end within {limit:?}; stderr:\n{stderr}");
    };
    let results = std::fs::read_to_string(&results)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_else(|| panic!("no results file; stderr:\n{stderr}"));
    SweepRun {
        code: status.code().unwrap_or(-1),
        stdout,
        stderr,
        peak_rss_kib,
        rss,
        wall: started.elapsed(),
        results,
        injected,
        sigterm_sent,
    }
}

/// One line per recorded pair (pass, nodes, outcome, the first 160 characters of an error's
/// reason): what a failed soak needs to be read.
pub fn pair_lines(results: &Value) -> String {
    let mut out = String::new();
    for p in results["pairs"].as_array().into_iter().flatten() {
        let o = &p["outcome"];
        let detail = match o["status"].as_str() {
            Some("measured") => format!(
                "{} {:.0} MB/s",
                o["verdict"],
                o["bandwidth_bps"].as_f64().unwrap_or(0.0) / 1e6
            ),
            _ => o["reason"].as_str().unwrap_or_default().chars().take(160).collect(),
        };
        out += &format!("  {} {} {}\n", pair_key(p), o["status"], detail);
    }
    out
}

/// How each node's verdict stands against what was injected.
#[derive(Debug, Default)]
pub struct VerdictTally {
    pub correct: usize,
    /// `unknown`, `unjudged` (its figures could not be trusted) or `suspect` (evidence both ways):
    /// not blamed, not cleared.
    pub undecided: usize,
    pub wrong: Vec<String>,
    pub by_status: std::collections::BTreeMap<String, usize>,
}

/// "Correct", per fault kind:
/// - a node whose cable was pulled: `fail` is correct, `suspect`/`unknown`/`unjudged` undecided; `pass` is
///   correct only if every first-pass pair of it was recorded before the cut (then it measured
///   healthy), else wrong;
/// - every other node, whatever API errors, API restarts or pod kills hit its pairs, was healthy:
///   `pass` is correct, `suspect`/`unknown`/`unjudged` undecided, `fail` (blamed) or
///   `unschedulable` wrong.
pub fn tally(results: &Value, injected: &Injected) -> VerdictTally {
    let mut t = VerdictTally::default();
    let pairs = results["pairs"].as_array().cloned().unwrap_or_default();
    for v in results["node_verdicts"].as_array().unwrap() {
        let node = v["node"].as_str().unwrap();
        let status = v["status"].as_str().unwrap();
        *t.by_status.entry(status.to_string()).or_default() += 1;
        let cut = injected.cut_nodes.iter().find(|(n, _)| n == node);
        let verdict = match (cut, status) {
            (_, "suspect" | "unknown" | "unjudged") => None,
            (Some(_), "fail") => Some(true),
            (Some((_, before)), "pass") => Some(
                pairs
                    .iter()
                    .filter(|p| p["pass"] == 1 && (p["prefill"] == node || p["decode"] == node))
                    .all(|p| before.contains(&pair_key(p))),
            ),
            (None, "pass") => Some(true),
            _ => Some(false),
        };
        match verdict {
            None => t.undecided += 1,
            Some(true) => t.correct += 1,
            Some(false) => t.wrong.push(format!(
                "{node}: {status} ({}) — {}",
                if cut.is_some() {
                    "its cable was pulled"
                } else {
                    "healthy"
                },
                v["evidence"]
            )),
        }
    }
    t
}

/// Bench pods still stored in the API server (read from its store, not through the API).
pub fn stored_bench_pods(cluster: &TestCluster) -> Vec<String> {
    cluster
        .pods()
        .into_iter()
        .filter(|p| {
            p.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("app.kubernetes.io/managed-by"))
                .is_some_and(|v| v == "ic-bench")
        })
        .filter_map(|p| p.metadata.name)
        .collect()
}

/// ic-bench processes the cluster's agents started that still run.
pub fn live_bench_processes(cluster: &TestCluster) -> Vec<u32> {
    let bin = std::fs::canonicalize(bin()).unwrap();
    icb_isolate::live_processes(&cluster.run_tag())
        .into_iter()
        .filter(|pid| std::fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|exe| exe == bin))
        .collect()
}

fn entries(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .collect();
    names.sort();
    names
}

/// What a finished (or stopped) sweep left: bench pods in the store, bench processes, files in
/// the temp dirs, files in the results dir other than `expected`.
#[derive(Debug, PartialEq, Default)]
pub struct Leftovers {
    pub pods: Vec<String>,
    pub processes: Vec<u32>,
    pub temp_files: Vec<String>,
    pub unexpected_outputs: Vec<String>,
}

pub fn leftovers(cluster: &TestCluster, dirs: &Dirs, expected: &[&str]) -> Leftovers {
    let mut temp_files: Vec<String> = entries(&dirs.sweep_tmp)
        .into_iter()
        .map(|n| format!("sweep-tmp/{n}"))
        .collect();
    temp_files.extend(entries(&dirs.pod_tmp).into_iter().map(|n| format!("pod-tmp/{n}")));
    Leftovers {
        pods: stored_bench_pods(cluster),
        processes: live_bench_processes(cluster),
        temp_files,
        unexpected_outputs: entries(&dirs.out)
            .into_iter()
            .filter(|n| !expected.contains(&n.as_str()))
            .collect(),
    }
}

/// Shuts the cluster down and checks it took everything with it: every process carrying its run
/// tag, its network namespaces, its directory.
pub fn shutdown_leaves_nothing(cluster: TestCluster) {
    let tag = cluster.run_tag();
    let netns = cluster.netns_names();
    let dir = cluster.kubeconfig_path().parent().unwrap().to_path_buf();
    assert!(!netns.is_empty(), "the cluster made network namespaces");
    drop(cluster);
    assert_eq!(icb_isolate::live_processes(&tag), Vec::<u32>::new(), "processes left");
    let left: Vec<&String> = netns.iter().filter(|n| icb_isolate::netns_exists(n)).collect();
    assert!(left.is_empty(), "network namespaces left: {left:?}");
    assert!(!dir.exists(), "the cluster's directory is left: {}", dir.display());
}

/// API errors the server injected (its request log marks them).
pub fn injected_api_errors(cluster: &TestCluster) -> usize {
    cluster.requests().iter().filter(|r| r.injected).count()
}
