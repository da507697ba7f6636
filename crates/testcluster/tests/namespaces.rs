//! Nodes as Linux namespaces (root): pod isolation (IPC/PID), hostIPC, the veth between nodes,
//! network cuts, exec inside the container, and that dropping the cluster leaves nothing behind.

use crate::common;

use std::time::Duration;

use common::*;
use futures::AsyncBufReadExt;
use futures::TryStreamExt;
use icb_testcluster::{ClusterConfig, NAME_PREFIX, TestCluster};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{AttachParams, LogParams};
use serde_json::json;
use tokio::io::AsyncReadExt;

fn enabled(name: &str) -> bool {
    icb_isolate::privileged_tests_enabled(name)
}

async fn ns_cluster() -> (TestCluster, Api<Pod>) {
    let cluster = TestCluster::start(ClusterConfig::two_gpu_nodes())
        .await
        .expect("start namespaced cluster");
    let pods = Api::default_namespaced(cluster.client().expect("client"));
    (cluster, pods)
}

fn on_node(pod: Pod, node: &str, extra: serde_json::Value) -> Pod {
    let mut spec = json!({"nodeName": node});
    if let (Some(s), Some(e)) = (spec.as_object_mut(), extra.as_object()) {
        s.extend(e.clone());
    }
    with_spec(pod, spec)
}

/// Runs a command in a pod and returns (stdout, exit code).
async fn exec(pods: &Api<Pod>, name: &str, script: &str) -> (String, i32) {
    let mut p = pods
        .exec(name, ["bash", "-c", script], &AttachParams::default().stderr(false))
        .await
        .expect("exec");
    let mut stdout = p.stdout().expect("stdout");
    let status = p.take_status().expect("status");
    let mut out = String::new();
    stdout.read_to_string(&mut out).await.expect("read stdout");
    let status = tokio::time::timeout(Duration::from_secs(15), status)
        .await
        .expect("exec ends")
        .expect("a status");
    let code = match status.status.as_deref() {
        Some("Success") => 0,
        _ => status
            .details
            .and_then(|d| d.causes)
            .and_then(|c| c.first().and_then(|c| c.message.clone()))
            .and_then(|m| m.parse().ok())
            .unwrap_or(-1),
    };
    (out, code)
}

async fn finished_log(pods: &Api<Pod>, name: &str) -> String {
    wait_for(pods, name, "finished", is_done).await;
    pods.logs(name, &LogParams::default()).await.expect("logs")
}

// `$$$$`: Kubernetes turns `$$` in a command into `$` (as the emulation does), so the shell sees `$$`.
// The sleep keeps the pods alive together: a namespace's inode number is reused once it is freed.
const SHOW_NS: &str = "readlink /proc/self/ns/ipc; readlink /proc/self/ns/net; echo pid=$$$$; sleep 1";

#[tokio::test]
async fn pods_get_their_own_ipc_and_pid_namespaces_unless_host_ipc() {
    if !enabled("pods_get_their_own_ipc_and_pid_namespaces_unless_host_ipc") {
        return;
    }
    let (_cluster, pods) = ns_cluster().await;
    for (name, node, host_ipc) in [
        ("a", "gpu-1", false),
        ("b", "gpu-1", false),
        ("h1", "gpu-1", true),
        ("h2", "gpu-1", true),
        ("h3", "gpu-2", true),
    ] {
        create(
            &pods,
            &on_node(sh_pod(name, SHOW_NS), node, json!({"hostIPC": host_ipc})),
        )
        .await;
    }
    let mut out = std::collections::BTreeMap::new();
    for name in ["a", "b", "h1", "h2", "h3"] {
        let log = finished_log(&pods, name).await;
        let lines: Vec<String> = log.lines().map(str::to_string).collect();
        assert_eq!(lines.len(), 3, "{name}: {log}");
        assert_eq!(lines[2], "pid=1", "{name} runs as PID 1 of its own PID namespace");
        out.insert(name, lines);
    }
    let me_ipc = std::fs::read_link("/proc/self/ns/ipc")
        .unwrap()
        .to_string_lossy()
        .into_owned();
    assert_ne!(
        out["a"][0], out["b"][0],
        "two plain pods on one node have different IPC namespaces"
    );
    assert_eq!(
        out["h1"][0], out["h2"][0],
        "hostIPC pods on one node share the node's IPC namespace"
    );
    assert_ne!(
        out["h1"][0], out["h3"][0],
        "hostIPC pods on different nodes do not share IPC"
    );
    assert_ne!(out["h1"][0], me_ipc, "the node's IPC namespace is not the host's");
    assert_eq!(out["a"][1], out["b"][1], "pods on one node share its network namespace");
    assert_ne!(out["a"][1], out["h3"][1], "nodes have different network namespaces");
}

#[tokio::test]
async fn host_pid_pods_share_the_node_pid_namespace() {
    if !enabled("host_pid_pods_share_the_node_pid_namespace") {
        return;
    }
    let (_cluster, pods) = ns_cluster().await;
    let script = "readlink /proc/self/ns/pid; echo pid=$$$$; sleep 1";
    create(&pods, &on_node(sh_pod("p1", script), "gpu-1", json!({"hostPID": true}))).await;
    create(&pods, &on_node(sh_pod("p2", script), "gpu-1", json!({"hostPID": true}))).await;
    let (l1, l2) = (finished_log(&pods, "p1").await, finished_log(&pods, "p2").await);
    assert_eq!(l1.lines().next(), l2.lines().next(), "{l1} / {l2}");
    assert_ne!(l1.lines().nth(1), Some("pid=1"), "a hostPID pod is not PID 1");
}

#[tokio::test]
async fn two_containers_share_ipc_but_not_pid() {
    if !enabled("two_containers_share_ipc_but_not_pid") {
        return;
    }
    let (_cluster, pods) = ns_cluster().await;
    let pod: Pod = serde_json::from_value(json!({
        "metadata": {"name": "duo"},
        "spec": {"restartPolicy": "Never", "containers": [
            {"name": "one", "image": "x", "command": ["sh", "-c", "readlink /proc/self/ns/ipc /proc/self/ns/pid; sleep 1"]},
            {"name": "two", "image": "x", "command": ["sh", "-c", "readlink /proc/self/ns/ipc /proc/self/ns/pid; sleep 1"]}
        ]}
    }))
    .unwrap();
    create(&pods, &pod).await;
    wait_for(&pods, "duo", "finished", is_done).await;
    let log = |c: &str| {
        let pods = pods.clone();
        let c = c.to_string();
        async move {
            pods.logs(
                "duo",
                &LogParams {
                    container: Some(c),
                    ..Default::default()
                },
            )
            .await
            .unwrap()
        }
    };
    let (one, two) = (log("one").await, log("two").await);
    let (one, two): (Vec<&str>, Vec<&str>) = (one.lines().collect(), two.lines().collect());
    assert_eq!(one[0], two[0], "containers of a pod share IPC");
    assert_ne!(one[1], two[1], "containers of a pod have separate PID namespaces");
}

const ECHO_SERVER: &str = r#"
import socket
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("0.0.0.0", 7007))
s.listen(8)
print("listening", flush=True)
while True:
    c, _ = s.accept()
    c.sendall(c.recv(100))
    c.close()
"#;

#[tokio::test]
async fn nodes_talk_over_the_veth_until_the_cable_is_cut() {
    if !enabled("nodes_talk_over_the_veth_until_the_cable_is_cut") {
        return;
    }
    let (cluster, pods) = ns_cluster().await;
    let server: Pod = serde_json::from_value(json!({
        "metadata": {"name": "server"},
        "spec": {"nodeName": "gpu-1", "restartPolicy": "Never",
                 "containers": [{"name": "main", "image": "x", "command": ["sh", "-c", "sleep 0.3; exec python3 -c \"$SERVER\""],
                                 "env": [{"name": "SERVER", "value": ECHO_SERVER}],
                                 "readinessProbe": {"tcpSocket": {"port": 7007}, "periodSeconds": 1}}]}
    }))
    .unwrap();
    create(&pods, &server).await;
    create(&pods, &on_node(sh_pod("client", "sleep 60"), "gpu-2", json!({}))).await;
    let running = wait_for(&pods, "server", "running", |p| phase(p) == "Running").await;
    assert!(!is_ready(&running), "not Ready before the tcpSocket probe passes");
    let running = wait_for(&pods, "server", "ready", is_ready).await;
    let server_ip = running.status.unwrap().pod_ip.unwrap();
    assert_eq!(
        Some(server_ip.parse().unwrap()),
        cluster.node_ip("gpu-1"),
        "pod IP is the node IP"
    );
    let mut log = pods
        .log_stream(
            "server",
            &LogParams {
                follow: true,
                ..Default::default()
            },
        )
        .await
        .unwrap()
        .lines();
    let first = tokio::time::timeout(Duration::from_secs(10), log.try_next())
        .await
        .expect("server log")
        .unwrap();
    assert_eq!(first.as_deref(), Some("listening"));
    wait_for(&pods, "client", "running", |p| phase(p) == "Running").await;

    let probe = format!(
        "timeout 2 bash -c 'exec 3<>/dev/tcp/{server_ip}/7007; echo ping >&3; read -r reply <&3; echo got:$reply'"
    );
    let (out, code) = exec(&pods, "client", &probe).await;
    assert_eq!((out.as_str(), code), ("got:ping\n", 0), "echo across the veth");
    // The emulated addresses live only inside the cluster's namespaces, never on the host.
    let host = std::process::Command::new("ip").args(["-br", "addr"]).output().unwrap();
    assert!(
        !String::from_utf8_lossy(&host.stdout).contains("10.99.0."),
        "the host has no fabric address"
    );

    cluster.cut_node_network("gpu-2").unwrap();
    let (out, code) = exec(&pods, "client", &probe).await;
    assert_ne!(code, 0, "no echo after the cut: {out}");
    cluster.restore_node_network("gpu-2").unwrap();
    let (out, code) = exec(&pods, "client", &probe).await;
    assert_eq!((out.as_str(), code), ("got:ping\n", 0), "echo again after restoring");
}

#[tokio::test]
async fn exec_runs_inside_the_container() {
    if !enabled("exec_runs_inside_the_container") {
        return;
    }
    let (_cluster, pods) = ns_cluster().await;
    create(
        &pods,
        &on_node(
            sh_pod("box", "readlink /proc/self/ns/ipc; sleep 60"),
            "gpu-1",
            json!({}),
        ),
    )
    .await;
    wait_for(&pods, "box", "running", |p| phase(p) == "Running").await;
    let mut log = pods
        .log_stream(
            "box",
            &LogParams {
                follow: true,
                ..Default::default()
            },
        )
        .await
        .unwrap()
        .lines();
    let pod_ipc = tokio::time::timeout(Duration::from_secs(10), log.try_next())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let (out, code) = exec(&pods, "box", "readlink /proc/self/ns/ipc; exit 4").await;
    assert_eq!(out.trim(), pod_ipc, "exec joins the container's IPC namespace");
    assert_eq!(code, 4);
    let (out, _) = exec(&pods, "box", "cat /proc/1/cmdline | tr '\\0' ' '").await;
    assert!(out.contains("sleep 60"), "exec sees the container's PID 1: {out}");
}

fn processes_with(marker: &str) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        if let Ok(cmd) = std::fs::read(format!("/proc/{pid}/cmdline"))
            && String::from_utf8_lossy(&cmd).contains(marker)
        {
            found.push(pid);
        }
    }
    found
}

#[tokio::test]
async fn dropping_the_cluster_leaves_no_process_or_namespace() {
    if !enabled("dropping_the_cluster_leaves_no_process_or_namespace") {
        return;
    }
    let (cluster, pods) = ns_cluster().await;
    let marker = format!("icbtc-leak-marker-{}", std::process::id());
    let script = format!("sleep 300 & sleep 301; echo {marker}");
    create(&pods, &on_node(sh_pod("leak-a", &script), "gpu-1", json!({}))).await;
    create(
        &pods,
        &on_node(
            sh_pod("leak-b", &script),
            "gpu-2",
            json!({"hostPID": true, "hostIPC": true}),
        ),
    )
    .await;
    wait_for(&pods, "leak-a", "running", |p| phase(p) == "Running").await;
    wait_for(&pods, "leak-b", "running", |p| phase(p) == "Running").await;
    let names = cluster.netns_names();
    assert_eq!(names.len(), 3, "two nodes and the switch: {names:?}");
    assert!(names.iter().all(|n| n.starts_with(&format!("{NAME_PREFIX}-"))));
    let tag = cluster.run_tag();
    let owner = std::process::id();
    // (Tests run in parallel: other clusters of this process may be listed too.)
    let seen = icb_isolate::leftovers_of(NAME_PREFIX, owner).namespaces;
    assert!(
        names.iter().all(|n| seen.contains(n)),
        "icb-isolate's leak check sees the cluster's namespaces: {names:?} vs {seen:?}"
    );
    // Node inits, both pods' wrappers and their processes all carry the cluster's run tag.
    let seen = live_at_least(&tag, 4);
    assert!(seen.len() >= 4, "{seen:?}");
    assert!(names.iter().all(|n| icb_isolate::netns_exists(n)), "{names:?}");
    assert!(!processes_with(&marker).is_empty(), "the pods run");
    let dir = cluster.kubeconfig_path().parent().unwrap().to_path_buf();
    assert!(dir.exists());

    cluster.shutdown().await;
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while !processes_with(&marker).is_empty() && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(
        processes_with(&marker),
        Vec::<u32>::new(),
        "no pod process survives the cluster"
    );
    assert!(
        names.iter().all(|n| !icb_isolate::netns_exists(n)),
        "namespaces removed: {names:?}"
    );
    assert!(!dir.exists(), "temp files removed");
    assert_eq!(
        icb_isolate::live_processes(&tag),
        Vec::<u32>::new(),
        "nothing of the run survives"
    );
}

#[tokio::test]
async fn a_panicking_test_still_cleans_up() {
    if !enabled("a_panicking_test_still_cleans_up") {
        return;
    }
    let marker = format!("icbtc-panic-marker-{}", std::process::id());
    let names = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let (m, n) = (marker.clone(), names.clone());
    let outcome = tokio::spawn(async move {
        let (cluster, pods) = ns_cluster().await;
        *n.lock().unwrap() = cluster.netns_names();
        create(
            &pods,
            &on_node(sh_pod("doomed", &format!("sleep 302; echo {m}")), "gpu-1", json!({})),
        )
        .await;
        wait_for(&pods, "doomed", "running", |p| phase(p) == "Running").await;
        panic!("deliberate test panic");
    })
    .await;
    assert!(outcome.is_err(), "the inner test panicked");
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while !processes_with(&marker).is_empty() && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(processes_with(&marker).is_empty());
    let names = names.lock().unwrap().clone();
    assert!(
        !names.is_empty() && names.iter().all(|n| !icb_isolate::netns_exists(n)),
        "{names:?}"
    );
}

/// Not a test on its own: the test process that `a_sigkilled_test_leaves_no_pod_running` starts
/// and SIGKILLs, with a plain pod and a hostIPC+hostPID pod running.
#[tokio::test]
#[ignore = "helper process for a_sigkilled_test_leaves_no_pod_running"]
async fn sigkilled_owner_helper() {
    if std::env::var_os("ICB_TESTCLUSTER_CRASH_HELPER").is_none() {
        return;
    }
    let (cluster, pods) = ns_cluster().await;
    create(&pods, &on_node(sh_pod("own", "sleep 303"), "gpu-1", json!({}))).await;
    create(
        &pods,
        &on_node(
            sh_pod("host", "sleep 304"),
            "gpu-2",
            json!({"hostPID": true, "hostIPC": true}),
        ),
    )
    .await;
    wait_for(&pods, "own", "running", |p| phase(p) == "Running").await;
    wait_for(&pods, "host", "running", |p| phase(p) == "Running").await;
    // Both programs run (not only their wrappers): `sh -c` execs its last command, so the pods'
    // command lines read "sleep", NUL, "303".
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while processes_with("sleep\x00303").is_empty() || processes_with("sleep\x00304").is_empty() {
        assert!(std::time::Instant::now() < deadline, "the pods' programs never ran");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    println!("TAG {}", cluster.run_tag());
    println!("DIR {}", cluster.kubeconfig_path().parent().unwrap().display());
    for ns in cluster.netns_names() {
        println!("NS {ns}");
    }
    println!("READY");
    tokio::time::sleep(Duration::from_secs(60)).await;
}

#[tokio::test]
async fn a_sigkilled_test_leaves_no_pod_running_and_the_next_cluster_removes_its_namespaces() {
    if !enabled("a_sigkilled_test_leaves_no_pod_running_and_the_next_cluster_removes_its_namespaces") {
        return;
    }
    let mut helper = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            helper_test_name(concat!(module_path!(), "::sigkilled_owner_helper")),
            "--nocapture",
            "--test-threads=1",
        ])
        .env("ICB_TESTCLUSTER_CRASH_HELPER", "1")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = helper.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        use std::io::BufRead;
        for line in std::io::BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let (mut tag, mut namespaces, mut dir) = (String::new(), Vec::new(), None);
    loop {
        let line = rx.recv_timeout(Duration::from_secs(30)).expect("helper ready in 30 s");
        if let Some((_, t)) = line.split_once("TAG ") {
            tag = t.trim().to_string();
        } else if let Some((_, d)) = line.split_once("DIR ") {
            dir = Some(std::path::PathBuf::from(d.trim()));
        } else if let Some((_, ns)) = line.split_once("NS ") {
            namespaces.push(ns.trim().to_string());
        } else if line.ends_with("READY") {
            break;
        }
    }
    // Node inits, the two pods' wrappers and programs.
    let seen = live_at_least(&tag, 4);
    assert!(seen.len() >= 4, "{seen:?}");
    helper.kill().unwrap();
    helper.wait().unwrap();
    let killed = std::time::Instant::now();
    while !icb_isolate::live_processes(&tag).is_empty() && killed.elapsed() < Duration::from_secs(5) {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    let took = killed.elapsed();
    assert_eq!(
        icb_isolate::live_processes(&tag),
        Vec::<u32>::new(),
        "pods outlived the test"
    );
    assert!(took < Duration::from_secs(1), "the pods took {took:?} to die");
    eprintln!("every process of the SIGKILLed test's cluster gone {took:?} after the kill");
    assert_eq!(namespaces.len(), 3);
    assert!(
        namespaces.iter().all(|n| icb_isolate::netns_exists(n)),
        "only the namespaces and the work directory stay"
    );
    let dir = dir.expect("the helper named its work directory");
    assert!(dir.is_dir(), "{}", dir.display());

    // The next cluster start removes them (other tests' live clusters are untouched).
    let (next, _pods) = ns_cluster().await;
    assert!(
        namespaces.iter().all(|n| !icb_isolate::netns_exists(n)),
        "{namespaces:?}"
    );
    assert!(!dir.exists(), "the dead test's {} is left", dir.display());
    assert!(next.kubeconfig_path().exists());
    assert!(next.netns_names().iter().all(|n| icb_isolate::netns_exists(n)));
    next.shutdown().await;
}

/// The run's live processes once at least `count` are seen, or what the last scan saw after 5 s:
/// one scan can miss a process in the middle of exec (its /proc environ reads empty for a moment).
fn live_at_least(tag: &str, count: usize) -> Vec<u32> {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let seen = icb_isolate::live_processes(tag);
        if seen.len() >= count || std::time::Instant::now() > deadline {
            return seen;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[tokio::test]
async fn a_nodes_containers_see_its_rails_its_rail_tree_and_a_dead_rail() {
    if !enabled("a_nodes_containers_see_its_rails_its_rail_tree_and_a_dead_rail") {
        return;
    }
    let config = ClusterConfig::two_gpu_nodes().rails(2).dead_rail("gpu-2", 1);
    let cluster = TestCluster::start(config).await.expect("start a cluster with rails");
    let pods: Api<Pod> = Api::default_namespaced(cluster.client().expect("client"));
    create(&pods, &on_node(sh_pod("railbox", "sleep 60"), "gpu-2", json!({}))).await;
    wait_for(&pods, "railbox", "running", |p| phase(p) == "Running").await;
    // The node's own rail NICs and their real counters, in the pod's /sys.
    let (out, code) = exec(&pods, "railbox", "cat /sys/class/net/rail0/statistics/tx_bytes /sys/class/net/rail1/carrier 2>&1; echo \"tree=$IC_BENCH_RAIL_TREE\"").await;
    assert_eq!(code, 0, "{out}");
    let lines: Vec<&str> = out.lines().collect();
    assert!(lines[0].parse::<u64>().is_ok(), "{out}");
    assert_eq!(lines[1], "0", "rail 1 of gpu-2 is cut at its switch: no carrier");
    let tree = cluster.rail_tree("gpu-2").expect("a rail tree");
    assert_eq!(lines[2], format!("tree={}", tree.display()));
    assert!(tree.join("sys/class/infiniband/mlx5_1").exists());
    // Knobs: a slow rail at run time; rails need namespaces; a rail the nodes lack is refused.
    cluster.limit_rail("gpu-1", 0, "100mbit").expect("tc tbf on rail0");
    assert!(cluster.cut_rail("gpu-1", 2).is_err());
    let host = ClusterConfig::two_gpu_nodes()
        .rails(1)
        .isolation(icb_testcluster::Isolation::Host);
    assert!(TestCluster::start(host).await.is_err());
    let unknown = ClusterConfig::two_gpu_nodes().rails(1).slow_rail("gpu-9", 0, "1mbit");
    assert!(TestCluster::start(unknown).await.is_err());
}

/// A congested and a lossy rail: real UDP traffic over each (bash's /dev/udp toward gpu-2),
/// then an exec reads the node's emulated counter files, brought up to date by that exec: the
/// shaper's held packets as CNP/ECN counters on mlx5_0, the dropped ones as sequence errors on
/// mlx5_1, each fault moving only its own counters.
#[tokio::test]
async fn a_congested_and_a_lossy_rail_move_their_emulated_nic_counters_when_read() {
    if !enabled("a_congested_and_a_lossy_rail_move_their_emulated_nic_counters_when_read") {
        return;
    }
    let config = ClusterConfig::two_gpu_nodes()
        .rails(2)
        .congested_rail("gpu-1", 0, "1mbit")
        .lossy_rail("gpu-1", 1, 200);
    let cluster = TestCluster::start(config)
        .await
        .expect("start a cluster with faulted rails");
    let pods: Api<Pod> = Api::default_namespaced(cluster.client().expect("client"));
    create(&pods, &on_node(sh_pod("faulty", "sleep 60"), "gpu-1", json!({}))).await;
    wait_for(&pods, "faulty", "running", |p| phase(p) == "Running").await;
    let send = "p=$(head -c 1200 /dev/zero | tr '\\0' x); for ip in 10.99.1.2 10.99.2.2; do \
                for i in $(seq 400); do printf %s \"$p\" > /dev/udp/$ip/9; done; done 2>/dev/null; echo sent";
    assert_eq!(exec(&pods, "faulty", send).await, ("sent\n".to_string(), 0));
    let port =
        |k: usize, name: &str| format!("$IC_BENCH_RAIL_TREE/sys/class/infiniband/mlx5_{k}/ports/1/hw_counters/{name}");
    let read = [
        port(0, "rp_cnp_handled"),
        port(0, "packet_seq_err"),
        port(1, "packet_seq_err"),
        port(1, "rp_cnp_handled"),
    ];
    let (out, code) = exec(&pods, "faulty", &format!("cat {}", read.join(" "))).await;
    assert_eq!(code, 0, "{out}");
    let counts: Vec<u64> = out.lines().map(|l| l.trim().parse().expect("a count")).collect();
    assert!(counts[0] > 0, "the shaper held packets: rp_cnp_handled {out}");
    assert!(counts[2] > 0, "a fifth of 400 packets dropped: packet_seq_err {out}");
    assert_eq!(
        (counts[1], counts[3]),
        (0, 0),
        "each fault moves only its own counters: {out}"
    );
    // The knobs refuse what they cannot do, in one line.
    let e = cluster.make_rail_lossy("gpu-2", 0, 900).unwrap_err().to_string();
    assert!(e.contains("1-500 per mille") && !e.contains('\n'), "{e}");
    assert!(cluster.congest_rail("gpu-9", 0, "1mbit").is_err());
    let unknown = ClusterConfig::two_gpu_nodes().rails(1).lossy_rail("gpu-1", 3, 10);
    assert!(TestCluster::start(unknown).await.is_err(), "rail 3 of 1");
}

/// libtest's name for the test at `path` (`module_path!()` and its name): the path without the
/// crate's (the test binary's) name, `namespaces::sigkilled_owner_helper` in the package's one test binary.
fn helper_test_name(path: &str) -> &str {
    path.split_once("::").map_or(path, |(_, name)| name)
}
