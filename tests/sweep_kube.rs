//! `ic-bench sweep` on the emulated cluster (real namespaces, real UCX in the pods): every pair
//! measured, the culprits named (a rate-limited node, a node that cannot place bench pods), the
//! healthy partners cleared, 0 pods left; Ctrl-C mid-sweep then `--resume` gives the same node
//! verdicts; `--dry-run` prints the plan.

use crate::pair_kube_support as support;

use icb_testcluster::{ClusterConfig, NodeConfig, TestCluster};
use serde_json::Value;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::*;

fn nodes(n: usize) -> ClusterConfig {
    (1..=n).fold(ClusterConfig::new(), |c, i| {
        c.node(NodeConfig::new(format!("node-{i}")))
    })
}

fn verdicts(results: &Value) -> Vec<(String, String)> {
    results["node_verdicts"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| {
            (
                v["node"].as_str().unwrap().to_string(),
                v["status"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

fn load(path: &std::path::Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn dry_run_prints_the_plan() {
    let cluster =
        TestCluster::start_blocking(nodes(5).program(BIN).isolation(icb_testcluster::Isolation::Host)).unwrap();
    let (code, out, err) = run_sweep(&cluster, &["--dry-run"], Duration::from_secs(30));
    assert_eq!(code, 0, "{err}");
    assert!(
        out.contains("schedule all-pairs, 5 nodes, 10 pairs in 5 rounds, up to 2 pairs (4 pods) at once"),
        "{out}"
    );
    assert!(out.contains("round 5:"), "{out}");
    let (code, out, _) = run_sweep(
        &cluster,
        &["--dry-run", "--schedule", "linear", "--matchings", "1"],
        Duration::from_secs(30),
    );
    assert_eq!(code, 0);
    assert!(out.contains("schedule linear"), "{out}");
    assert!(leftover_bench_pods(&cluster).is_empty());
}

#[test]
fn a_slow_node_and_an_unschedulable_node_are_named_and_the_rest_pass() {
    if !icb_isolate::privileged_tests_enabled("sweep_faults") {
        return;
    }
    // node-5 has no GPU while every bench pod asks for one: unschedulable, not a bad fabric.
    let cluster = slow_and_gpuless_cluster();
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("sweep.json");
    let junit = dir.path().join("sweep.xml");
    let html = dir.path().join("sweep.html");
    let started = Instant::now();
    let (code, out, err) = run_sweep(
        &cluster,
        &[
            "--gpus",
            "1",
            "--rdma",
            "none",
            "--results",
            results.to_str().unwrap(),
            "--export-junit",
            junit.to_str().unwrap(),
            "--export-html",
            html.to_str().unwrap(),
        ],
        Duration::from_secs(600),
    );
    eprintln!("sweep took {:.1}s\n{err}", started.elapsed().as_secs_f64());
    assert_eq!(code, 1, "{out}\n{err}");
    let r = load(&results);
    assert_eq!(r["schema"], "ic-bench.sweep/v1");
    assert_eq!(r["complete"], true);
    let first: Vec<&Value> = r["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["pass"] == 1)
        .collect();
    assert_eq!(first.len(), 10, "every planned pair has a result");
    let v = verdicts(&r);
    let status = |n: &str| v.iter().find(|(node, _)| node == n).unwrap().1.clone();
    assert_eq!(
        status("node-2"),
        "fail",
        "{}",
        serde_json::to_string_pretty(&r["node_verdicts"]).unwrap()
    );
    assert_eq!(status("node-5"), "unschedulable");
    for n in ["node-1", "node-3", "node-4"] {
        assert_eq!(
            status(n),
            "pass",
            "{n}: {}",
            serde_json::to_string_pretty(&r["node_verdicts"]).unwrap()
        );
    }
    assert!(out.contains("FAIL: node-2"), "{out}");
    let xml = std::fs::read_to_string(&junit).unwrap();
    assert!(
        xml.contains("node-2") && xml.contains("<testsuite name=\"nodes\""),
        "{xml}"
    );
    let page = std::fs::read_to_string(&html).unwrap();
    assert_eq!(
        page.matches("class=\"cell\"").count(),
        10,
        "every pair, in the one direction it was measured"
    );
    assert!(
        page.contains("<td class=\"fail\">fail</td>"),
        "node table names the failed node"
    );
    if let Ok(keep) = std::env::var("IC_BENCH_KEEP_HTML") {
        std::fs::copy(&html, keep).unwrap();
    }
    check_in_browser(&html);
    assert!(leftover_via_api(&cluster).is_empty());
}

#[test]
fn ctrl_c_mid_sweep_leaves_nothing_and_resume_finishes_it() {
    if !icb_isolate::privileged_tests_enabled("sweep_resume") {
        return;
    }
    let cluster = cluster_with(nodes(4));
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("sweep.json");
    let child = sweep_command(&cluster, &["--results", results.to_str().unwrap()])
        .spawn()
        .unwrap();
    let pid = child.id();
    // Wait for the first pair to be recorded, then interrupt during a later round.
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let done = std::fs::read_to_string(&results)
            .ok()
            .and_then(|t| serde_json::from_str::<Value>(&t).ok())
            .map(|r| r["pairs"].as_array().map_or(0, Vec::len))
            .unwrap_or(0);
        if done >= 1 {
            break;
        }
        assert!(Instant::now() < deadline, "no pair finished");
        std::thread::sleep(Duration::from_millis(100));
    }
    // Then a pod of a later round: the interrupt lands while pairs are running.
    loop {
        let later = cluster.pods().into_iter().any(|p| {
            p.metadata
                .name
                .as_deref()
                .is_some_and(|n| n.contains("-p1r1x") || n.contains("-p1r2x"))
        });
        if later {
            break;
        }
        assert!(Instant::now() < deadline, "no later round started");
        std::thread::sleep(Duration::from_millis(20));
    }
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), nix::sys::signal::Signal::SIGINT).unwrap();
    let out = wait_output(child, Duration::from_secs(90));
    assert_eq!(out.status.code(), Some(130), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(leftover_via_api(&cluster).is_empty(), "no pods after Ctrl-C");
    let partial = load(&results);
    assert_eq!(partial["complete"], false);
    let done_before = partial["pairs"].as_array().unwrap().len();
    assert!(done_before < 6, "interrupted before the end: {done_before}");

    let (code, _, err) = run_sweep(
        &cluster,
        &["--resume", results.to_str().unwrap()],
        Duration::from_secs(300),
    );
    // 0 normally; 1 only when a loaded 2-core machine made one TCP pair look slow (the second
    // pass then re-pairs it): the resume itself is what is checked here.
    assert!(code == 0 || code == 1, "{err}");
    let r = load(&results);
    assert_eq!(r["complete"], true);
    let first: Vec<&Value> = r["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["pass"] == 1)
        .collect();
    assert_eq!(first.len(), 6, "the missing pairs ran once each");
    let mut keys: Vec<String> = first
        .iter()
        .map(|p| format!("{}>{}", p["prefill"], p["decode"]))
        .collect();
    keys.sort();
    keys.dedup();
    assert_eq!(keys.len(), 6, "no pair ran twice");
    // A verdict for every node, as an uninterrupted run gives: all pass on this healthy cluster
    // unless CPU contention made a pair slow.
    assert_eq!(verdicts(&r).len(), 4);
    assert!(
        verdicts(&r).iter().all(|(_, s)| s == "pass" || code == 1),
        "{:?}",
        verdicts(&r)
    );
    assert!(leftover_via_api(&cluster).is_empty());
}

/// The speed benchmark (not a timed test): an N-node all-pairs sweep (N from
/// IC_BENCH_SWEEP_NODES, default 32) against rounds × one pair's time; every pair measured and
/// 0 pods left. `scripts/bench-sweep` runs it.
#[test]
#[ignore = "benchmark: scripts/bench-sweep"]
fn sweep_wall_against_rounds_times_one_pair() {
    if !icb_isolate::privileged_tests_enabled("sweep_bench") {
        return;
    }
    let n: usize = std::env::var("IC_BENCH_SWEEP_NODES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(32);
    let cluster = cluster_with(nodes(n));
    let dir = tempfile::tempdir().unwrap();
    let single = dir.path().join("one.json");
    let t = Instant::now();
    let (code, _, err) = run_sweep(
        &cluster,
        &["--nodes", "node-1,node-2", "--results", single.to_str().unwrap()],
        Duration::from_secs(300),
    );
    let one_pair = t.elapsed().as_secs_f64();
    assert_eq!(code, 0, "{err}");
    let results = dir.path().join("all.json");
    let t = Instant::now();
    let (code, _, err) = run_sweep(
        &cluster,
        &["--results", results.to_str().unwrap()],
        Duration::from_secs(7200),
    );
    let wall = t.elapsed().as_secs_f64();
    let r = load(&results);
    let rounds = r["rounds"].as_array().unwrap().len();
    let first = r["pairs"].as_array().unwrap().iter().filter(|p| p["pass"] == 1).count();
    let measured = r["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["pass"] == 1 && p["outcome"]["status"] == "measured")
        .count();
    println!(
        "sweep of {n} nodes: {first} pairs ({measured} measured) in {rounds} rounds, wall {wall:.1}s; one pair (whole command) {one_pair:.1}s; ratio wall / (rounds × one pair) = {:.2} (exit {code})",
        wall / (rounds as f64 * one_pair)
    );
    assert_eq!(first, n * (n - 1) / 2, "{err}");
    assert!(leftover_via_api(&cluster).is_empty());
}

/// Loads the HTML report in headless Chromium and reads the rendered DOM: the heatmap cells and
/// the node table must be there. Under CI Chromium is required (scripts/setup installs Debian's);
/// elsewhere a missing browser skips with a note.
fn check_in_browser(html: &std::path::Path) {
    let Some(browser) = ["chromium", "chromium-browser", "google-chrome"].into_iter().find(|b| {
        Command::new(b)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    }) else {
        assert!(
            std::env::var_os("CI").is_none(),
            "Chromium is required under CI (scripts/setup)"
        );
        eprintln!("check_in_browser: no Chromium installed; skipped");
        return;
    };
    let profile = tempfile::tempdir().unwrap();
    let child = Command::new(browser)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            "--dump-dom",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .arg(format!("file://{}", html.display()))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let out = wait_output(child, Duration::from_secs(60));
    let dom = String::from_utf8_lossy(&out.stdout);
    assert!(
        dom.contains("id=\"heatmap\""),
        "rendered DOM has the heatmap: {}",
        &dom[..dom.len().min(500)]
    );
    assert_eq!(dom.matches("class=\"cell\"").count(), 10);
    assert!(dom.contains("id=\"nodes\"") && dom.contains("node-2"));
}

#[test]
fn api_faults_during_a_sweep_are_retried_without_duplicate_pods() {
    use icb_testcluster::RequestMatch;
    // API behaviour, not transports: pods as plain processes.
    let cluster =
        TestCluster::start_blocking(nodes(4).program(BIN).isolation(icb_testcluster::Isolation::Host)).unwrap();
    cluster.fail_requests(RequestMatch::new("POST", "/api/v1/namespaces/*/pods"), 500, 3);
    cluster.fail_requests_retry_after(RequestMatch::new("POST", "/api/v1/namespaces/*/pods"), 429, 2, 1);
    cluster.fail_requests(
        RequestMatch::new("GET", "/api/v1/namespaces/*/pods").query_contains("watch=true"),
        500,
        3,
    );
    cluster.fail_requests(RequestMatch::new("GET", "/api/v1/nodes/*"), 503, 2);
    cluster.clear_requests();
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("sweep.json");
    let (code, out, err) = run_sweep(
        &cluster,
        &["--host-ipc", "--results", results.to_str().unwrap()],
        Duration::from_secs(300),
    );
    assert!(code == 0 || code == 1, "{out}\n{err}");
    let requests = cluster.requests();
    assert!(
        requests.iter().filter(|r| r.injected).count() >= 8,
        "the faults were hit"
    );
    let created: Vec<String> = created_pods(&cluster)
        .into_iter()
        .filter_map(|p| p.metadata.name)
        .collect();
    let mut unique = created.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(created.len(), unique.len(), "no pod created twice: {created:?}");
    let r = load(&results);
    let measured = r["pairs"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["outcome"]["status"] == "measured")
        .count();
    assert_eq!(
        measured,
        r["pairs"].as_array().unwrap().len(),
        "every pair measured despite the faults: {err}"
    );
    assert!(measured >= 6);
    assert!(leftover_via_api(&cluster).is_empty());
}
