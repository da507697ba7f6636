//! `ic-bench sweep` stopped before its end, on the emulated cluster: a signal at several points
//! (before any pod, while pods start, mid-measurement, during the second pass) and an API
//! outage. Every stop leaves a resumable file that says why, records no interrupted pair, blames
//! no node, prints one line, and leaves no pod once `--resume` has run. Each signal is sent on an
//! event (a log line, a pod appearing or running), never after a fixed sleep.

use crate::pair_kube_support as support;

use icb_kube::k8s_openapi::api::core::v1::Pod;
use icb_testcluster::{ClusterConfig, Isolation, NodeConfig, RequestMatch, TestCluster};
use nix::sys::signal::Signal;
use serde_json::Value;
use std::io::BufRead as _;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};
use support::*;

/// Like `SWEEP_FAST` (bandwidth cases only: a 1 MiB tag_lat is never judged, see there), with
/// `--max-time` left to each test (a long one keeps a measurement running while the test
/// signals it).
fn sweep_args(max_time: &str) -> Vec<String> {
    [
        "--tests",
        "put_bw,get_bw",
        "--sizes",
        "1MiB",
        "--max-time",
        max_time,
        "--allow-tcp",
        "--min-host-bw",
        "0.001",
        "--pair-timeout",
        "60s",
        "--request-timeout",
        "5s",
    ]
    .map(String::from)
    .to_vec()
}

fn nodes(n: usize) -> ClusterConfig {
    (1..=n).fold(ClusterConfig::new(), |c, i| {
        c.node(NodeConfig::new(format!("node-{i}")))
    })
}

/// A sweep running as a child, its stderr lines arriving on a channel as they are printed.
struct Sweep {
    child: Child,
    lines: Receiver<String>,
    stderr: Vec<String>,
    stdout: std::thread::JoinHandle<String>,
}

impl Sweep {
    fn start(cluster: &TestCluster, args: &[String]) -> Sweep {
        let mut child = Command::new(BIN)
            .arg("sweep")
            .arg("--kubeconfig")
            .arg(cluster.kubeconfig_path())
            .args(args)
            .env("IC_BENCH_LOG", "warn,kube_client=off,kube_runtime=off")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let err = child.stderr.take().unwrap();
        let mut out = child.stdout.take().unwrap();
        let (tx, lines) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(err).lines().map_while(Result::ok) {
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let stdout = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = std::io::Read::read_to_string(&mut out, &mut s);
            s
        });
        Sweep {
            child,
            lines,
            stderr: Vec::new(),
            stdout,
        }
    }

    /// Waits (deadline `limit`) for a stderr line containing `needle`.
    fn wait_line(&mut self, needle: &str, limit: Duration) {
        let deadline = Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) => {
                    let hit = line.contains(needle);
                    self.stderr.push(line);
                    if hit {
                        return;
                    }
                }
                Err(RecvTimeoutError::Timeout) => panic!("no '{needle}' within {limit:?}: {:#?}", self.stderr),
                Err(RecvTimeoutError::Disconnected) => panic!("the sweep ended before '{needle}': {:#?}", self.stderr),
            }
        }
    }

    fn signal(&self, sig: Signal) {
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.child.id() as i32), sig).unwrap();
    }

    /// Waits for the exit (deadline `limit`): (code, stdout, every stderr line).
    fn finish(mut self, limit: Duration) -> (i32, String, Vec<String>) {
        let deadline = Instant::now() + limit;
        let status = loop {
            if let Some(s) = self.child.try_wait().unwrap() {
                break s;
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!("the sweep did not end within {limit:?}: {:#?}", self.stderr);
            }
            std::thread::sleep(Duration::from_millis(50));
        };
        self.stderr.extend(self.lines.iter());
        (status.code().unwrap_or(-1), self.stdout.join().unwrap(), self.stderr)
    }
}

/// Polls the API server's store until `pred` holds for some bench pod (deadline `limit`).
fn wait_pod(cluster: &TestCluster, what: &str, limit: Duration, pred: impl Fn(&Pod) -> bool) -> Pod {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(p) = cluster.pods().into_iter().find(|p| pred(p)) {
            return p;
        }
        assert!(Instant::now() < deadline, "no pod {what} within {limit:?}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn name(p: &Pod) -> &str {
    p.metadata.name.as_deref().unwrap_or_default()
}

fn running(p: &Pod) -> bool {
    p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running")
}

fn load(path: &std::path::Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn run_ids(r: &Value) -> Vec<String> {
    r["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["run_id"].as_str().unwrap().to_string())
        .collect()
}

/// What every signalled sweep must show: exit 130, one line saying so after the signal, a file
/// marked interrupted and incomplete with no verdicts, the JUnit export saying so too, and no
/// `PASS` anywhere.
fn assert_interrupted(
    code: i32,
    stdout: &str,
    stderr: &[String],
    results: &std::path::Path,
    junit: &std::path::Path,
) -> Value {
    assert_eq!(code, 130, "{stderr:#?}");
    let said: Vec<&String> = stderr.iter().filter(|l| l.contains("interrupted")).collect();
    assert_eq!(said.len(), 1, "one line says it: {stderr:#?}");
    assert!(
        said[0].starts_with("ic-bench: interrupted by SIGTERM")
            || said[0].starts_with("ic-bench: interrupted by SIGINT"),
        "{stderr:#?}"
    );
    assert_eq!(stderr.last(), Some(said[0]), "nothing after it: {stderr:#?}");
    assert!(!stdout.contains("PASS"), "{stdout}");
    let r = load(results);
    assert_eq!(r["complete"], false);
    assert_eq!(r["stopped"]["reason"], "interrupted", "{r:#}");
    assert!(r["node_verdicts"].as_array().unwrap().is_empty());
    let xml = std::fs::read_to_string(junit).unwrap();
    assert!(xml.contains("name=\"stopped\" value=\"interrupted\""), "{xml}");
    r
}

/// `--resume` finishes a stopped sweep: every planned pair once, run ids unique, no pod left.
fn resume_finishes(cluster: &TestCluster, results: &std::path::Path) -> Value {
    let mut args = vec!["--resume".to_string(), results.display().to_string()];
    args.extend(["--request-timeout".into(), "5s".into()]);
    let (code, _, stderr) = Sweep::start(cluster, &args).finish(Duration::from_secs(300));
    assert!(code == 0 || code == 1, "{stderr:#?}");
    let r = load(results);
    assert_eq!(r["complete"], true, "{stderr:#?}");
    assert!(r.get("stopped").is_none(), "cleared by the resume");
    let planned: usize = r["rounds"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x.as_array().unwrap().len())
        .sum();
    let mut first: Vec<String> = r["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["pass"] == 1)
        .map(|p| format!("{}>{}", p["prefill"], p["decode"]))
        .collect();
    first.sort();
    first.dedup();
    assert_eq!(first.len(), planned, "every planned pair once");
    let mut ids = run_ids(&r);
    let all = ids.len();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), all, "run ids unique across runs: {ids:?}");
    assert!(leftover_via_api(cluster).is_empty(), "no pod left");
    r
}

struct Files {
    _dir: tempfile::TempDir,
    results: std::path::PathBuf,
    junit: std::path::PathBuf,
}

fn files() -> Files {
    let dir = tempfile::tempdir().unwrap();
    Files {
        results: dir.path().join("sweep.json"),
        junit: dir.path().join("sweep.xml"),
        _dir: dir,
    }
}

fn with_files(mut args: Vec<String>, f: &Files) -> Vec<String> {
    args.extend([
        "--results".into(),
        f.results.display().to_string(),
        "--export-junit".into(),
        f.junit.display().to_string(),
    ]);
    args
}

#[test]
fn a_signal_before_any_pod_starts_records_nothing() {
    let cluster = TestCluster::start_blocking(nodes(3).program(BIN).isolation(Isolation::Host)).unwrap();
    // Every pair's node lookups hang, so no pod can be created before the signal.
    cluster.add_latency(
        RequestMatch::new("GET", "/api/v1/nodes/*"),
        Duration::from_secs(30),
        None,
    );
    let f = files();
    let mut sweep = Sweep::start(&cluster, &with_files(sweep_args("0.3"), &f));
    sweep.wait_line("results in", Duration::from_secs(60));
    assert!(leftover_bench_pods(&cluster).is_empty());
    sweep.signal(Signal::SIGTERM);
    let (code, out, err) = sweep.finish(Duration::from_secs(60));
    let r = assert_interrupted(code, &out, &err, &f.results, &f.junit);
    assert!(r["pairs"].as_array().unwrap().is_empty(), "{r:#}");
    assert!(leftover_via_api(&cluster).is_empty());
    cluster.clear_faults();
    resume_finishes(&cluster, &f.results);
}

#[test]
fn a_signal_while_pods_start_records_nothing_of_that_round() {
    let cluster = TestCluster::start_blocking(nodes(3).program(BIN).isolation(Isolation::Host)).unwrap();
    let f = files();
    let mut sweep = Sweep::start(&cluster, &with_files(sweep_args("0.3"), &f));
    sweep.wait_line("results in", Duration::from_secs(60));
    let first = wait_pod(&cluster, "created", Duration::from_secs(60), |p| {
        name(p).ends_with("-server")
    });
    sweep.signal(Signal::SIGINT);
    let (code, out, err) = sweep.finish(Duration::from_secs(90));
    let r = assert_interrupted(code, &out, &err, &f.results, &f.junit);
    let run_id = name(&first).trim_start_matches("ic-bench-").trim_end_matches("-server");
    assert!(
        !run_ids(&r).iter().any(|id| id == run_id),
        "the starting pair was recorded: {r:#}"
    );
    assert!(leftover_via_api(&cluster).is_empty());
    resume_finishes(&cluster, &f.results);
}

#[test]
fn a_signal_mid_measurement_never_records_the_partial_pair() {
    let cluster = TestCluster::start_blocking(nodes(3).program(BIN).isolation(Isolation::Host)).unwrap();
    let f = files();
    // Long cases: the measurement is still running when the signal lands.
    let sweep = Sweep::start(&cluster, &with_files(sweep_args("4"), &f));
    let client = wait_pod(&cluster, "measuring", Duration::from_secs(120), |p| {
        name(p).ends_with("-client") && running(p)
    });
    sweep.signal(Signal::SIGTERM);
    let (code, out, err) = sweep.finish(Duration::from_secs(90));
    let r = assert_interrupted(code, &out, &err, &f.results, &f.junit);
    let run_id = name(&client)
        .trim_start_matches("ic-bench-")
        .trim_end_matches("-client");
    assert!(
        !run_ids(&r).iter().any(|id| id == run_id),
        "the pair cut mid-measurement was recorded (its partial report is not a result): {r:#}"
    );
    assert!(leftover_via_api(&cluster).is_empty());
}

#[test]
fn a_signal_during_the_second_pass_leaves_it_to_resume() {
    if !icb_isolate::privileged_tests_enabled("sweep_second_pass_signal") {
        return;
    }
    // node-2's link is throttled: a suspect, re-paired in a second pass. 16 Mbit/s (2 MB/s at
    // most), not 30: a pair is slow under 25 % of the reference (the 75th percentile of the first
    // pass, the second-fastest healthy pair here, 11.5 MB/s in the cold run of 2026-11-30). At
    // 30 Mbit/s (3.75 MB/s) the second pass measured node-2 at 3.3-3.5 MB/s, above that 2.9 MB/s,
    // and cleared it; only overhead had kept it under before. At 2 MB/s it is slow whenever the
    // healthy pairs reach 8 MB/s.
    let cluster = cluster_with(nodes(4));
    cluster.rate_limit_node("node-2", "16mbit").unwrap();
    let f = files();
    let mut sweep = Sweep::start(&cluster, &with_files(sweep_args("0.3"), &f));
    sweep.wait_line("second pass:", Duration::from_secs(300));
    wait_pod(&cluster, "of the second pass", Duration::from_secs(60), |p| {
        name(p).contains("-p2r")
    });
    sweep.signal(Signal::SIGTERM);
    let (code, out, err) = sweep.finish(Duration::from_secs(90));
    let r = assert_interrupted(code, &out, &err, &f.results, &f.junit);
    let first = r["pairs"].as_array().unwrap().iter().filter(|p| p["pass"] == 1).count();
    assert_eq!(first, 6, "the first pass was complete");
    let r = resume_finishes(&cluster, &f.results);
    let two = r["node_verdicts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|v| v["node"] == "node-2")
        .unwrap();
    assert_eq!(two["status"], "fail", "{r:#}");
}

#[test]
fn an_api_outage_stops_the_sweep_blames_no_node_and_resume_finishes() {
    let cluster = TestCluster::start_blocking(nodes(4).program(BIN).isolation(Isolation::Host)).unwrap();
    let f = files();
    let mut sweep = Sweep::start(&cluster, &with_files(sweep_args("0.3"), &f));
    // The outage starts once the first pair is in.
    sweep.wait_line("[1/6]", Duration::from_secs(120));
    cluster.fail_requests_always(RequestMatch::path("/api/*"), 503);
    let (code, out, err) = sweep.finish(Duration::from_secs(180));
    assert_eq!(code, 2, "{err:#?}");
    let said: Vec<&String> = err.iter().filter(|l| l.starts_with("ic-bench: error:")).collect();
    assert_eq!(said.len(), 1, "{err:#?}");
    assert!(
        said[0].contains("blames no node") && said[0].contains("--resume"),
        "{err:#?}"
    );
    assert!(!out.contains("PASS") && !out.contains("FAIL"), "{out}");
    let r = load(&f.results);
    assert_eq!(r["complete"], false);
    assert_eq!(r["stopped"]["reason"], "cluster_error", "{r:#}");
    assert!(r["node_verdicts"].as_array().unwrap().is_empty(), "no node blamed");
    assert!(
        r["pairs"]
            .as_array()
            .unwrap()
            .iter()
            .all(|p| p["outcome"]["status"] == "measured"),
        "no outage error recorded as a pair's: {r:#}"
    );
    assert!(r["pairs"].as_array().unwrap().len() < 6, "{r:#}");
    cluster.clear_faults();
    let r = resume_finishes(&cluster, &f.results);
    assert_eq!(r["node_verdicts"].as_array().unwrap().len(), 4, "{r:#}");
}

#[test]
fn pods_of_a_killed_run_are_removed_by_the_resume() {
    let cluster = TestCluster::start_blocking(nodes(3).program(BIN).isolation(Isolation::Host)).unwrap();
    let f = files();
    // SIGKILL: no cleanup at all, as when a node dies under the CronJob's pod. Cases of up to
    // 1 s, not 4: the kill lands within a poll (20 ms) of the client running, while its two
    // cases take seconds, and the resume reruns every pair with the file's --max-time (with
    // 4 s cases this test took 52 s here, with 1 s 16 s).
    let sweep = Sweep::start(&cluster, &with_files(sweep_args("1"), &f));
    let client = wait_pod(&cluster, "measuring", Duration::from_secs(120), |p| {
        name(p).ends_with("-client") && running(p)
    });
    sweep.signal(Signal::SIGKILL);
    let (code, _, _) = sweep.finish(Duration::from_secs(30));
    assert_eq!(code, -1, "killed by the signal");
    let left = leftover_via_api(&cluster);
    assert!(
        left.iter().any(|n| n == name(&client)),
        "the killed run left its pods: {left:?}"
    );
    let sweep_id = load(&f.results)["sweep_id"].as_str().unwrap().to_string();
    assert!(
        name(&client).starts_with(&format!("ic-bench-{sweep_id}-")),
        "{}",
        name(&client)
    );
    let labels = client.metadata.labels.clone().unwrap_or_default();
    assert_eq!(labels.get("ic-bench.dev/sweep-id"), Some(&sweep_id), "{labels:?}");
    let mut args = vec!["--resume".to_string(), f.results.display().to_string()];
    args.extend(["--request-timeout".into(), "5s".into()]);
    let (code, _, err) = Sweep::start(&cluster, &args).finish(Duration::from_secs(300));
    assert!(code == 0 || code == 1, "{err:#?}");
    assert!(
        err.iter()
            .any(|l| l.starts_with("ic-bench: removed ") && l.contains(&sweep_id)),
        "{err:#?}"
    );
    assert!(
        leftover_via_api(&cluster).is_empty(),
        "{:?}",
        leftover_via_api(&cluster)
    );
    let r = load(&f.results);
    assert_eq!(r["complete"], true);
    assert_eq!(r["attempt"], 2, "the resume is the sweep's second run");
}
