//! Shared by the Kubernetes pair tests: an emulated cluster running the real ic-bench binary in its
//! pods, and `ic-bench pair` run against it as a user would (a child process with --kubeconfig).
#![allow(dead_code)]

pub mod kv;
/// The KV checks `pair_kv` (local) makes too.
#[path = "../kv_support/mod.rs"]
pub mod kv_shared;

use icb_kube::k8s_openapi::api::core::v1::Pod;
use icb_testcluster::{ClusterConfig, Isolation, NodeConfig, RecordedRequest, TestCluster};
use serde_json::Value;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_ic-bench");

/// Small settings: a few cases, short measurement (speed targets live in the benchmark). The
/// tests that use it judge the path (shared memory, a TCP fallback, no RDMA), placements, claims,
/// faults and cleanup under a floor nothing misses, never a rate, so each case stops at 0.25 s:
/// both sides busy-poll for all of a case's `--max-time` (at 1 s, 8 CPU seconds per pair).
/// `pair_kube_counters` keeps 1 s cases of its own: its NIC counter findings need the bytes.
pub const FAST: &[&str] = &[
    "--tests",
    "tag_bw,tag_lat",
    "--sizes",
    "8,1MiB",
    "--memory",
    "host-host",
    "--warmup",
    "2",
    "--min-iterations",
    "4",
    "--min-time",
    "0.05",
    "--max-time",
    "0.25",
];

/// `args` with its `--max-time` value replaced by `secs` (for example [`FAST`] with longer cases).
pub fn with_max_time(args: &[&'static str], secs: &'static str) -> Vec<&'static str> {
    let mut out = args.to_vec();
    let at = out
        .iter()
        .position(|a| *a == "--max-time")
        .expect("the arguments name --max-time");
    out[at + 1] = secs;
    out
}

/// A cluster with two nodes (gpu-1, gpu-2: 8 nvidia.com/gpu and 8 rdma/ib each), every image
/// mapped to this build's ic-bench, Linux-namespace isolation (None when not root).
pub fn cluster(test: &str) -> Option<TestCluster> {
    if !icb_isolate::privileged_tests_enabled(test) {
        return None;
    }
    Some(cluster_with(ClusterConfig::two_gpu_nodes()))
}

pub fn cluster_with(config: ClusterConfig) -> TestCluster {
    let config = config.program(BIN).isolation(Isolation::Namespaces);
    TestCluster::start_blocking(config).expect("the emulated cluster starts")
}

/// The same two nodes with pods as plain local processes (no namespaces, no root needed): for
/// tests about the orchestration, not about which transport the isolation allows.
pub fn host_cluster() -> TestCluster {
    let config = ClusterConfig::two_gpu_nodes().program(BIN).isolation(Isolation::Host);
    TestCluster::start_blocking(config).expect("the emulated cluster starts")
}

pub fn gpu_node(name: &str, gpus: u32) -> NodeConfig {
    NodeConfig::gpu(name, gpus)
}

/// What one `ic-bench pair` process did.
#[derive(Debug)]
pub struct PairRun {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    pub elapsed: Duration,
    pub requests: Vec<RecordedRequest>,
}

impl PairRun {
    /// The JSON report (`-o json`).
    pub fn report(&self) -> Value {
        serde_json::from_str(&self.stdout).unwrap_or_else(|e| panic!("no JSON report ({e}): {self:#?}"))
    }

    /// The last stderr line (the one-line outcome on errors).
    pub fn last_err_line(&self) -> String {
        self.stderr
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or_default()
            .to_string()
    }

    /// The pods ic-bench created, as the API server received them.
    pub fn created_pods(&self) -> Vec<Pod> {
        self.requests
            .iter()
            .filter(|r| r.method == "POST" && r.path.ends_with("/pods") && !r.injected && r.status < 300)
            .filter_map(|r| r.pod())
            .collect()
    }
}

/// `ic-bench pair` against `cluster` with `args` (FAST settings are NOT added automatically).
pub fn pair_command(cluster: &TestCluster, args: &[&str]) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.arg("pair")
        .arg("--kubeconfig")
        .arg(cluster.kubeconfig_path())
        .args(args);
    // kube-rs logs every failed attempt at ERROR; the tests read ic-bench's own one-line outcome.
    cmd.env("IC_BENCH_LOG", "warn,kube_client=off,kube_runtime=off");
    cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
    cmd
}

/// Runs to completion (killed after `limit`, which fails the test).
pub fn run_pair(cluster: &TestCluster, args: &[&str], limit: Duration) -> PairRun {
    cluster.clear_requests();
    let start = Instant::now();
    let child = pair_command(cluster, args).spawn().expect("ic-bench starts");
    let out = wait_output(child, limit);
    PairRun {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        elapsed: start.elapsed(),
        requests: cluster.requests(),
    }
}

/// Ctrl-C to a running `ic-bench` (SIGINT to `child`): asserts it exits 130 and within 30 s of
/// the signal, its cleanup included; its stderr.
pub fn ctrl_c(child: std::process::Child) -> String {
    let sent = Instant::now();
    let pid = nix::unistd::Pid::from_raw(child.id() as i32);
    nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGINT).unwrap();
    let out = wait_output(child, Duration::from_secs(60));
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(130), "{stderr}");
    assert!(
        sent.elapsed() < Duration::from_secs(30),
        "cleanup took {:?}",
        sent.elapsed()
    );
    stderr
}

/// Waits for the child with a deadline (pipes drained on threads so it never blocks on output).
pub fn wait_output(mut child: std::process::Child, limit: Duration) -> std::process::Output {
    use std::io::Read;
    let mut so = child.stdout.take().unwrap();
    let mut se = child.stderr.take().unwrap();
    let t1 = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = so.read_to_end(&mut b);
        b
    });
    let t2 = std::thread::spawn(move || {
        let mut b = Vec::new();
        let _ = se.read_to_end(&mut b);
        b
    });
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            let stderr = String::from_utf8_lossy(&t2.join().unwrap()).into_owned();
            panic!("ic-bench pair did not finish within {limit:?}; stderr: {stderr}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    std::process::Output {
        status,
        stdout: t1.join().unwrap(),
        stderr: t2.join().unwrap(),
    }
}

/// ic-bench pods still stored in the API server (every namespace).
pub fn leftover_bench_pods(cluster: &TestCluster) -> Vec<String> {
    cluster
        .pods()
        .into_iter()
        .filter(|p| {
            p.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get("app.kubernetes.io/managed-by"))
                .map(String::as_str)
                == Some("ic-bench")
        })
        .filter_map(|p| p.metadata.name)
        .collect()
}

/// Runs `future` to completion on a fresh current-thread runtime (the tests themselves are
/// synchronous: they drive `ic-bench` as a child process).
pub fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime")
        .block_on(future)
}

/// The pods the API server created so far (its successful POSTs), in order.
pub fn created_pods(cluster: &TestCluster) -> Vec<Pod> {
    cluster
        .requests()
        .iter()
        .filter(|r| r.method == "POST" && r.path.ends_with("/pods") && r.status < 300)
        .filter_map(|r| r.pod())
        .collect()
}

/// Leftovers as seen through the API (a list with the managed-by selector), as `gc` would: pods,
/// and the runs' token Secrets (as `secret/NAME`).
pub fn leftover_via_api(cluster: &TestCluster) -> Vec<String> {
    block_on(async {
        let client = cluster.client().unwrap();
        let api: icb_kube::kube::Api<Pod> = icb_kube::kube::Api::all(client.clone());
        let lp = icb_kube::kube::api::ListParams::default().labels("app.kubernetes.io/managed-by=ic-bench");
        let mut left: Vec<String> = api
            .list(&lp)
            .await
            .unwrap()
            .items
            .into_iter()
            .filter_map(|p| p.metadata.name)
            .collect();
        let secrets: icb_kube::kube::Api<icb_kube::k8s_openapi::api::core::v1::Secret> =
            icb_kube::kube::Api::all(client);
        let found = secrets.list(&lp).await.unwrap().items;
        left.extend(
            found
                .into_iter()
                .filter_map(|s| s.metadata.name)
                .map(|n| format!("secret/{n}")),
        );
        left
    })
}

/// Creates a pod through the API (a workload to model bench pods on) and waits until it runs.
pub fn create_reference_pod(cluster: &TestCluster, pod: Value) -> Pod {
    block_on(async {
        let client = cluster.client().unwrap();
        let api: icb_kube::kube::Api<Pod> = icb_kube::kube::Api::namespaced(client, cluster.namespace());
        let pod: Pod = serde_json::from_value(pod).unwrap();
        let name = pod.metadata.name.clone().unwrap();
        api.create(&Default::default(), &pod).await.unwrap();
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let p = api.get(&name).await.unwrap();
            let phase = p.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_default();
            if phase == "Running" {
                return p;
            }
            assert!(
                Instant::now() < deadline,
                "reference pod {name} never ran: {:?}",
                p.status
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
}

/// A run on two plain pods on one node (used by several test files).
pub fn plain_pair_run(test: &str) -> Option<PairRun> {
    let cluster = cluster(test)?;
    let mut args = vec!["--prefill", "node/gpu-1", "--decode", "node/gpu-1", "-o", "json"];
    args.extend_from_slice(FAST);
    let run = run_pair(&cluster, &args, Duration::from_secs(120));
    assert!(leftover_bench_pods(&cluster).is_empty());
    Some(run)
}

/// Short sweep pairs: the emulated fabric is TCP over veths, so TCP is allowed and the floor is low.
/// Bandwidth cases only: the sweep judges a pair's latency only up to 64 KiB
/// (`icb_sweep::results::LATENCY_RULE_MAX_SIZE`), so a 1 MiB tag_lat was never judged and only
/// kept both sides busy-polling for its `--max-time`. The sweep soak keeps it (its own
/// `SWEEP_ARGS`): faults there land in latency cases too.
pub const SWEEP_FAST: &[&str] = &[
    "--tests",
    "put_bw,get_bw",
    "--sizes",
    "1MiB",
    "--max-time",
    "0.3",
    "--allow-tcp",
    "--min-host-bw",
    "0.001",
    "--pair-timeout",
    "60s",
];

/// `ic-bench sweep` against `cluster` with [`SWEEP_FAST`] and `extra`, output piped.
pub fn sweep_command(cluster: &TestCluster, extra: &[&str]) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.arg("sweep")
        .arg("--kubeconfig")
        .arg(cluster.kubeconfig_path())
        .args(SWEEP_FAST)
        .args(extra)
        .env("IC_BENCH_LOG", "warn,kube_client=off,kube_runtime=off")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// Runs [`sweep_command`] within `limit`: (exit code, stdout, stderr).
pub fn run_sweep(cluster: &TestCluster, extra: &[&str], limit: Duration) -> (i32, String, String) {
    let out = wait_output(sweep_command(cluster, extra).spawn().unwrap(), limit);
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Five nodes for the sweep fault tests: node-1 … node-4 with one GPU each, node-2's link
/// rate-limited to 30 Mbit/s (the culprit), node-5 without a GPU (bench pods asking for one cannot
/// be placed there: unschedulable, not a bad fabric).
pub fn slow_and_gpuless_cluster() -> TestCluster {
    let config = (1..=4)
        .fold(ClusterConfig::new(), |c, i| {
            c.node(NodeConfig::gpu(format!("node-{i}"), 1))
        })
        .node(NodeConfig::new("node-5"));
    let cluster = cluster_with(config);
    cluster.rate_limit_node("node-2", "30mbit").unwrap();
    cluster
}

/// Whether a bench client pod of `cluster` logged its first finished case (an event to signal
/// on, rather than a guess at how long starting takes).
pub fn client_logged_a_case(cluster: &TestCluster) -> bool {
    created_pods(cluster).iter().any(|p| {
        let (Some(ns), Some(name)) = (p.metadata.namespace.as_deref(), p.metadata.name.as_deref()) else {
            return false;
        };
        name.ends_with("-client")
            && cluster
                .pod_log(ns, name, "bench")
                .is_some_and(|log| log.contains(r#""event":"case""#))
    })
}
