//! Real namespaces, veths and processes (root only; CI runs as root). Each test uses its own
//! name prefix so tests running in parallel never see each other's leftovers as their own.

use icb_isolate::{
    Fabric, Isolation, Leftovers, LocalPair, Pod, PodSpec, Wiring, cleanup_stale, leftovers_of, live_processes,
    netns_exists, privileged_tests_enabled, run_in_netns,
};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::time::{Duration, Instant};
use tokio::io::{AsyncBufReadExt, BufReader};

const PROBE: &str = "readlink /proc/self/ns/net /proc/self/ns/ipc /proc/self/ns/pid; echo $$";

/// The namespaces a spawned program sees, and its own pid as it sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Seen {
    net: String,
    ipc: String,
    pid_ns: String,
    pid: u32,
}

async fn probe(spec: PodSpec) -> Seen {
    let (seen, mut pod) = probe_alive(spec).await;
    pod.kill().await.unwrap();
    seen
}

/// Probes a pod that stays alive until killed: namespace inode numbers are reused as soon as a
/// namespace dies, so two pods' namespaces can only be compared while both live.
async fn probe_alive(spec: PodSpec) -> (Seen, Pod) {
    let script = format!("{PROBE}; exec sleep 1000");
    let mut pod = spec.arg("-c").arg(script).spawn().unwrap();
    let mut lines = BufReader::new(pod.take_stdout().unwrap()).lines();
    let mut got = Vec::new();
    while got.len() < 4 {
        let line = tokio::time::timeout(Duration::from_secs(10), lines.next_line())
            .await
            .expect("probe did not answer in 10 s")
            .unwrap();
        match line {
            Some(line) => got.push(line),
            None => panic!("probe ended early: {got:?}, status {:?}", pod.try_wait()),
        }
    }
    let seen = Seen {
        net: got[0].clone(),
        ipc: got[1].clone(),
        pid_ns: got[2].clone(),
        pid: got[3].parse().unwrap(),
    };
    (seen, pod)
}

fn ours() -> Seen {
    let link = |ns: &str| {
        std::fs::read_link(format!("/proc/self/ns/{ns}"))
            .unwrap()
            .display()
            .to_string()
    };
    Seen {
        net: link("net"),
        ipc: link("ipc"),
        pid_ns: link("pid"),
        pid: std::process::id(),
    }
}

async fn wait_until_at_least(tag: &str, count: usize) -> Vec<u32> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let seen = live_processes(tag);
        if seen.len() >= count || Instant::now() > deadline {
            return seen;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn wait_until_gone(tag: &str) -> Vec<u32> {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let left = live_processes(tag);
        if left.is_empty() || Instant::now() > deadline {
            return left;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn pod_specs_get_exactly_the_namespaces_they_ask_for() {
    if !privileged_tests_enabled("pod_specs_get_exactly_the_namespaces_they_ask_for") {
        return;
    }
    let me = ours();
    let plain = probe(PodSpec::plain("sh")).await;
    assert_eq!((&plain.net, &plain.ipc, &plain.pid_ns), (&me.net, &me.ipc, &me.pid_ns));

    let pod = probe(PodSpec::new("sh")).await;
    assert_eq!(pod.net, me.net);
    assert_ne!(pod.ipc, me.ipc);
    assert_ne!(pod.pid_ns, me.pid_ns);
    assert_eq!(pod.pid, 1, "the program is its PID namespace's init");

    let host_ipc = probe(PodSpec::new("sh").host_ipc(true)).await;
    assert_eq!(host_ipc.ipc, me.ipc);
    assert_ne!(host_ipc.pid_ns, me.pid_ns);

    let host_pid = probe(PodSpec::new("sh").host_pid(true)).await;
    assert_ne!(host_pid.ipc, me.ipc);
    assert_eq!(host_pid.pid_ns, me.pid_ns);

    let fabric = Fabric::create("icbt", &["solo"]).unwrap();
    let on_node = probe(PodSpec::new("sh").netns(fabric.netns("solo").unwrap())).await;
    assert_ne!(on_node.net, me.net);
    assert_ne!(on_node.ipc, me.ipc);
    fabric.teardown().unwrap();
}

#[tokio::test]
async fn pair_layouts_share_what_their_placement_shares() {
    if !privileged_tests_enabled("pair_layouts_share_what_their_placement_shares") {
        return;
    }
    let me = ours();
    for isolation in Isolation::ALL {
        let pair = LocalPair::create(isolation, "icbt").unwrap();
        let (decode, decode_pod) = probe_alive(pair.pod(pair.decode(), "sh")).await;
        let (prefill, prefill_pod) = probe_alive(pair.pod(pair.prefill(), "sh")).await;
        let same = |a: &String, b: &String| a == b;
        let (net, ipc, pid) = (
            same(&decode.net, &prefill.net),
            same(&decode.ipc, &prefill.ipc),
            same(&decode.pid_ns, &prefill.pid_ns),
        );
        match isolation {
            Isolation::None => {
                assert!(net && ipc && pid, "{isolation}: {decode:?} {prefill:?}");
                assert_eq!(decode.net, me.net);
            }
            Isolation::Pod => {
                assert!(net && !ipc && !pid, "{isolation}: {decode:?} {prefill:?}");
                assert_ne!(
                    decode.net, me.net,
                    "pod mode uses a fresh node namespace, not the host's"
                );
            }
            Isolation::HostIpc => {
                assert!(net && ipc && !pid, "{isolation}: {decode:?} {prefill:?}");
                let init = pair.fabric().unwrap().node("node-a").unwrap().init_pid;
                let node_ipc = std::fs::read_link(format!("/proc/{init}/ns/ipc")).unwrap();
                assert_eq!(
                    decode.ipc,
                    node_ipc.display().to_string(),
                    "hostIPC shares the node's IPC namespace"
                );
                assert_ne!(decode.ipc, me.ipc, "an emulated node's IPC namespace is not the host's");
            }
            Isolation::Node => assert!(!net && !ipc && !pid, "{isolation}: {decode:?} {prefill:?}"),
        }
        assert_eq!(isolation.different_hosts(), decode.net != prefill.net);
        let namespaces: Vec<String> = pair.fabric().map(|f| f.namespaces().to_vec()).unwrap_or_default();
        assert_eq!(namespaces.is_empty(), isolation == Isolation::None);
        drop((decode_pod, prefill_pod));
        pair.teardown().unwrap();
        for ns in namespaces {
            assert!(!netns_exists(&ns), "{isolation}: {ns} left behind");
        }
    }
}

fn connect(from_netns: &str, to: SocketAddr) -> std::io::Result<TcpStream> {
    run_in_netns(from_netns, || {
        TcpStream::connect_timeout(&to, Duration::from_millis(300))
    })
    .unwrap()
}

fn listen(netns: &str, ip: std::net::Ipv4Addr) -> TcpListener {
    run_in_netns(netns, || TcpListener::bind((ip, 0))).unwrap().unwrap()
}

#[test]
fn nodes_reach_each_other_over_the_veth_until_cut() {
    if !privileged_tests_enabled("nodes_reach_each_other_over_the_veth_until_cut") {
        return;
    }
    let fabric = Fabric::create("icbt", &["node-a", "node-b"]).unwrap();
    let (a, b) = (fabric.netns("node-a").unwrap(), fabric.netns("node-b").unwrap());
    assert_ne!(fabric.node_ip("node-a").unwrap(), fabric.node_ip("node-b").unwrap());
    let listener = listen(b, fabric.node_ip("node-b").unwrap());
    let addr = listener.local_addr().unwrap();
    connect(a, addr).expect("node-a reaches node-b over the veth");

    fabric.cut("node-b").unwrap();
    let err = connect(a, addr).expect_err("a cut node must be unreachable");
    assert!(
        matches!(
            err.kind(),
            std::io::ErrorKind::TimedOut | std::io::ErrorKind::NetworkUnreachable | std::io::ErrorKind::HostUnreachable
        ),
        "{err:?}"
    );

    fabric.restore("node-b").unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while let Err(e) = connect(a, addr) {
        assert!(Instant::now() < deadline, "node-b still unreachable after restore: {e}");
        std::thread::sleep(Duration::from_millis(20));
    }
    // Our test address exists only inside the fabric: the host itself has no route to it.
    assert!(TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err());
    assert!(fabric.cut("nope").unwrap_err().to_string().contains("no node 'nope'"));
}

#[test]
fn a_cut_on_a_bridged_fabric_is_a_pulled_cable() {
    if !privileged_tests_enabled("a_cut_on_a_bridged_fabric_is_a_pulled_cable") {
        return;
    }
    let tag = icb_isolate::RunTag::new("icbt").unwrap();
    let fabric = Fabric::create_wired(tag, &["a", "b"], Wiring::Bridge).unwrap();
    assert_eq!(fabric.namespaces().len(), 3, "two nodes plus the switch");
    let listener = listen(fabric.netns("b").unwrap(), fabric.node_ip("b").unwrap());
    let addr = listener.local_addr().unwrap();
    connect(fabric.netns("a").unwrap(), addr).expect("a reaches b through the switch");
    fabric.cut("b").unwrap();
    // The switch port is down but b's eth0 keeps its address and route: traffic stalls.
    let err = connect(fabric.netns("a").unwrap(), addr).expect_err("b is cut off");
    assert_eq!(err.kind(), std::io::ErrorKind::TimedOut, "{err:?}");
    fabric.restore("b").unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while let Err(e) = connect(fabric.netns("a").unwrap(), addr) {
        assert!(Instant::now() < deadline, "b still unreachable after restore: {e}");
        std::thread::sleep(Duration::from_millis(20));
    }
    fabric.teardown().unwrap();
}

#[test]
fn three_nodes_share_a_bridge() {
    if !privileged_tests_enabled("three_nodes_share_a_bridge") {
        return;
    }
    let fabric = Fabric::create("icbt", &["a", "b", "c"]).unwrap();
    assert_eq!(fabric.namespaces().len(), 4, "three nodes plus the hub");
    for (from, to) in [("a", "c"), ("c", "b"), ("b", "a")] {
        let listener = listen(fabric.netns(to).unwrap(), fabric.node_ip(to).unwrap());
        connect(fabric.netns(from).unwrap(), listener.local_addr().unwrap())
            .unwrap_or_else(|e| panic!("{from} cannot reach {to}: {e}"));
    }
    fabric.cut("c").unwrap();
    let listener = listen(fabric.netns("c").unwrap(), fabric.node_ip("c").unwrap());
    assert!(connect(fabric.netns("a").unwrap(), listener.local_addr().unwrap()).is_err());
    // The others still talk while c is cut.
    let listener = listen(fabric.netns("b").unwrap(), fabric.node_ip("b").unwrap());
    connect(fabric.netns("a").unwrap(), listener.local_addr().unwrap()).unwrap();
}

#[tokio::test]
async fn teardown_leaves_no_namespace_and_no_process() {
    if !privileged_tests_enabled("teardown_leaves_no_namespace_and_no_process") {
        return;
    }
    let fabric = Fabric::create("icbt", &["x", "y", "z"]).unwrap();
    let tag = fabric.tag().clone();
    let mut pods = Vec::new();
    for node in ["x", "y", "z"] {
        let spec = PodSpec::new("sh")
            .args(["-c", "sleep 1000 & sleep 1000 & echo up; wait"])
            .netns(fabric.netns(node).unwrap())
            .tag(&tag);
        let mut pod = spec.spawn().unwrap();
        let mut lines = BufReader::new(pod.take_stdout().unwrap()).lines();
        let line = tokio::time::timeout(Duration::from_secs(10), lines.next_line())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(line.as_deref(), Some("up"));
        pods.push(pod);
    }
    // A plain process of the same run, outside every namespace: found by its tag.
    pods.push(PodSpec::plain("sleep").arg("1000").tag(&tag).spawn().unwrap());
    // Per node: unshare, sh and two sleeps; plus the plain sleep.
    let started = wait_until_at_least(&tag.to_string(), 13).await.len();
    assert!(started >= 13, "only {started} processes of the run are alive");
    let namespaces = fabric.namespaces().to_vec();
    fabric.teardown().unwrap();
    let listing = std::process::Command::new("ip")
        .args(["netns", "list"])
        .output()
        .unwrap();
    let listing = String::from_utf8_lossy(&listing.stdout);
    assert!(!listing.contains(&tag.to_string()), "{listing}");
    for ns in namespaces {
        assert!(!netns_exists(&ns));
    }
    assert_eq!(wait_until_gone(&tag.to_string()).await, Vec::<u32>::new());
    for pod in &mut pods {
        let status = tokio::time::timeout(Duration::from_secs(5), pod.wait())
            .await
            .unwrap()
            .unwrap();
        assert!(!status.success());
    }
}

#[test]
fn a_panic_still_tears_down() {
    if !privileged_tests_enabled("a_panic_still_tears_down") {
        return;
    }
    let (tx, rx) = std::sync::mpsc::channel();
    let outcome = std::thread::spawn(move || {
        let fabric = Fabric::create("icbt", &["p", "q"]).unwrap();
        tx.send(fabric.namespaces().to_vec()).unwrap();
        panic!("deliberate panic while the fabric is up");
    })
    .join();
    assert!(outcome.is_err());
    let namespaces = rx.recv().unwrap();
    assert_eq!(namespaces.len(), 2);
    for ns in namespaces {
        assert!(!netns_exists(&ns), "{ns} survived the panic");
    }
}

#[tokio::test]
async fn killing_a_pod_kills_its_whole_tree() {
    // Plain pods need no root: only the process group is involved.
    let mut specs = vec![("plain", PodSpec::plain("sh"))];
    if nix::unistd::geteuid().is_root() {
        specs.push(("pid namespace", PodSpec::new("sh")));
        specs.push(("host pid, own ipc", PodSpec::new("sh").host_pid(true)));
    }
    for (what, spec) in specs {
        for use_drop in [false, true] {
            let mut pod = spec
                .clone()
                .args(["-c", "sleep 1000 & sleep 1000 & echo up; wait"])
                .spawn()
                .unwrap();
            let tag = pod.tag().to_string();
            let mut lines = BufReader::new(pod.take_stdout().unwrap()).lines();
            let line = tokio::time::timeout(Duration::from_secs(10), lines.next_line())
                .await
                .unwrap()
                .unwrap();
            assert_eq!(line.as_deref(), Some("up"), "{what}");
            // A scan can miss a process that is in the middle of exec (its /proc environ reads
            // empty for a moment): look again until all three are seen, within a deadline.
            let seen = wait_until_at_least(&tag, 3).await;
            assert!(seen.len() >= 3, "{what}: {seen:?}");
            if use_drop {
                drop(pod);
            } else {
                pod.kill().await.unwrap();
            }
            assert_eq!(
                wait_until_gone(&tag).await,
                Vec::<u32>::new(),
                "{what}, drop={use_drop}"
            );
        }
    }
}

/// Not a test on its own: the owner that `a_sigkilled_owner_leaves_no_process_behind` starts in
/// each isolation mode and SIGKILLs.
#[tokio::test]
#[ignore = "helper process for a_sigkilled_owner_leaves_no_process_behind"]
async fn crashed_owner_helper() {
    let Some(isolation) = std::env::var_os("ICB_ISOLATE_CRASH_HELPER") else {
        return;
    };
    let isolation: Isolation = isolation.to_str().unwrap().parse().unwrap();
    let pair = LocalPair::create(isolation, "icbs").unwrap();
    let tag = pair.tag().clone();
    let decode = pair.pod(pair.decode(), "sleep").arg("1000").spawn().unwrap();
    let prefill = pair.pod(pair.prefill(), "sleep").arg("1000").spawn().unwrap();
    let plain = PodSpec::plain("sleep").arg("1000").tag(&tag).spawn().unwrap();
    // Owners die long after their pods started; wait until the wrappers are done (see below).
    for pod in [&decode, &prefill, &plain] {
        wait_until_it_runs(pod, "sleep").await;
    }
    println!("TAG {tag}");
    for ns in pair.fabric().map(|f| f.namespaces().to_vec()).unwrap_or_default() {
        println!("NS {ns}");
    }
    println!("READY");
    tokio::time::sleep(Duration::from_secs(60)).await;
}

/// Waits until the pod's program (behind its wrappers) runs `comm`. An owner that dies in the
/// microseconds between a forking wrapper's fork and its child's PR_SET_PDEATHSIG leaves that
/// child running until the next `cleanup_stale`; that window is not what these tests measure.
async fn wait_until_it_runs(pod: &Pod, comm: &str) {
    let main = pod
        .main_pid(Duration::from_secs(5))
        .await
        .expect("the pod's program started");
    let deadline = Instant::now() + Duration::from_secs(5);
    while !std::fs::read_to_string(format!("/proc/{main}/comm")).is_ok_and(|c| c.trim() == comm) {
        assert!(Instant::now() < deadline, "pid {main} never ran {comm}");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// Starts the helper owner in `isolation`; returns it with its run tag and namespaces.
fn start_crashing_owner(isolation: Isolation) -> (std::process::Child, String, Vec<String>) {
    let mut helper = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--ignored",
            "--exact",
            helper_test_name(concat!(module_path!(), "::crashed_owner_helper")),
            "--nocapture",
            "--test-threads=1",
        ])
        .env("ICB_ISOLATE_CRASH_HELPER", isolation.as_str())
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
    let (mut tag, mut namespaces): (String, Vec<String>) = (String::new(), Vec::new());
    loop {
        let line = rx
            .recv_timeout(Duration::from_secs(20))
            .unwrap_or_else(|_| panic!("{isolation}: helper did not get ready in 20 s"));
        // libtest may print "test crashed_owner_helper ... " in front of the first marker.
        if let Some((_, t)) = line.split_once("TAG ") {
            tag = t.trim().to_string();
        } else if let Some((_, ns)) = line.split_once("NS ") {
            namespaces.push(ns.trim().to_string());
        } else if line.ends_with("READY") {
            break;
        }
    }
    (helper, tag, namespaces)
}

#[test]
fn a_sigkilled_owner_leaves_no_process_behind_and_its_namespaces_are_collected() {
    if !privileged_tests_enabled("a_sigkilled_owner_leaves_no_process_behind_and_its_namespaces_are_collected") {
        return;
    }
    for isolation in Isolation::ALL {
        let (mut helper, tag, namespaces) = start_crashing_owner(isolation);
        let started = live_processes(&tag);
        // Two pods and a plain process (plus wrappers and node inits in namespaced modes).
        assert!(started.len() >= 3, "{isolation}: {started:?}");
        assert_eq!(namespaces.is_empty(), isolation == Isolation::None, "{isolation}");

        helper.kill().unwrap();
        helper.wait().unwrap();
        let killed = Instant::now();
        // Every process of the run dies with its owner (parent death signal through the chain).
        while !live_processes(&tag).is_empty() && killed.elapsed() < Duration::from_secs(5) {
            std::thread::sleep(Duration::from_millis(5));
        }
        let gone_after = killed.elapsed();
        assert_eq!(live_processes(&tag), Vec::<u32>::new(), "{isolation}: orphans survived");
        assert!(
            gone_after < Duration::from_secs(1),
            "{isolation}: orphans took {gone_after:?} to die"
        );
        eprintln!("{isolation}: all processes of the run gone {gone_after:?} after the owner's SIGKILL");

        // Only the namespaces stay behind, and a later run (or `ic-bench gc --local`) removes
        // them without touching live runs.
        assert!(namespaces.iter().all(|ns| netns_exists(ns)), "{isolation}");
        let live = Fabric::create("icbs", &["alive"]).unwrap();
        let Leftovers {
            namespaces: removed, ..
        } = cleanup_stale("icbs").unwrap();
        // (Leftovers of earlier crashed test runs may be removed too.)
        assert!(
            namespaces.iter().all(|ns| removed.contains(ns)),
            "{isolation}: {namespaces:?} vs {removed:?}"
        );
        assert!(namespaces.iter().all(|ns| !netns_exists(ns)));
        assert!(
            live.namespaces().iter().all(|ns| netns_exists(ns)),
            "a live run was touched"
        );
        let owner: u32 = tag.split('-').nth(1).unwrap().parse().unwrap();
        assert_eq!(leftovers_of("icbs", owner), Leftovers::default(), "{isolation}");
        let mut found = leftovers_of("icbs", std::process::id()).namespaces;
        let mut expected = live.namespaces().to_vec();
        found.sort();
        expected.sort();
        assert_eq!(found, expected);
        assert!(cleanup_stale("icbs").unwrap().is_empty());
        live.teardown().unwrap();
    }
}

#[test]
fn a_failed_create_removes_what_it_made_and_nothing_else() {
    if !privileged_tests_enabled("a_failed_create_removes_what_it_made_and_nothing_else") {
        return;
    }
    let tag = icb_isolate::RunTag::new("icbt").unwrap();
    // Someone else's namespace under the hub's name makes the build fail half-way through.
    let squatter = tag.hub_netns();
    assert!(
        std::process::Command::new("ip")
            .args(["netns", "add", &squatter])
            .status()
            .unwrap()
            .success()
    );
    let err = Fabric::create_tagged(tag.clone(), &["a", "b", "c"])
        .unwrap_err()
        .to_string();
    assert!(err.contains(&format!("ip netns add {squatter}")), "{err}");
    for node in ["a", "b", "c"] {
        assert!(!netns_exists(&tag.node_netns(node)), "{node} left behind");
    }
    assert!(netns_exists(&squatter), "a namespace we did not create was deleted");
    assert!(
        std::process::Command::new("ip")
            .args(["netns", "delete", &squatter])
            .status()
            .unwrap()
            .success()
    );
}

#[test]
fn bad_node_sets_are_refused_before_anything_is_created() {
    for (nodes, needle) in [
        (vec![], "between 1 and"),
        (vec!["a", "a"], "distinct names"),
        (vec!["Bad_Name"], "bad node name 'Bad_Name'"),
    ] {
        let err = Fabric::create("icbt", &nodes).unwrap_err().to_string();
        assert!(err.contains(needle), "{nodes:?}: {err}");
    }
}

/// libtest's name for the test at `path` (`module_path!()` and its name): the path without the
/// crate's (the test binary's) name, `namespaces::crashed_owner_helper` in the package's one test binary.
fn helper_test_name(path: &str) -> &str {
    path.split_once("::").map_or(path, |(_, name)| name)
}
