//! Emulated rails on real namespaces (root only; CI runs as root): wiring, per-rail counters in
//! each node's own sysfs, slow and dead rails, the rail-map trees and their cleanup.

use icb_isolate::{
    Fabric, FabricOptions, IsolateError, Isolation, LocalPair, RunTag, Wiring, leftovers_of, netns_exists,
    privileged_tests_enabled, rail_netdev, run_in_netns,
};
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::time::{Duration, Instant};
use tokio::io::AsyncReadExt;

fn with_rails(prefix: &str, nodes: &[&str], rails: usize) -> Fabric {
    let tag = RunTag::new(prefix).unwrap();
    let opts = FabricOptions {
        wiring: Wiring::Auto,
        rails,
    };
    Fabric::create_with(tag, nodes, opts).unwrap()
}

fn connect(from_netns: &str, to: SocketAddr) -> std::io::Result<TcpStream> {
    run_in_netns(from_netns, || {
        TcpStream::connect_timeout(&to, Duration::from_millis(300))
    })
    .unwrap()
}

fn listen(netns: &str, ip: Ipv4Addr) -> TcpListener {
    run_in_netns(netns, || TcpListener::bind((ip, 0))).unwrap().unwrap()
}

fn counter(sys: &Path, dev: &str, which: &str) -> u64 {
    let p = sys.join("class/net").join(dev).join("statistics").join(which);
    std::fs::read_to_string(&p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .trim()
        .parse()
        .unwrap()
}

/// Sends `bytes` from `from` to `to` (a listener's address on `to_netns`) and waits until the
/// receiver has read them all.
fn send(from: &str, listener: &TcpListener, bytes: usize) {
    let addr = listener.local_addr().unwrap();
    let mut out = connect(from, addr).unwrap_or_else(|e| panic!("cannot reach {addr}: {e}"));
    let (mut conn, _) = listener.accept().unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let writer = std::thread::spawn(move || {
        out.write_all(&vec![7u8; bytes]).unwrap();
    });
    let mut got = 0;
    let mut buf = vec![0u8; 64 * 1024];
    while got < bytes {
        let n = conn.read(&mut buf).unwrap();
        assert!(n > 0, "connection closed after {got} of {bytes} bytes");
        got += n;
    }
    writer.join().unwrap();
}

#[test]
fn rails_are_wired_rail_optimized_and_counted_in_each_nodes_own_sysfs() {
    if !privileged_tests_enabled("rails_are_wired_rail_optimized_and_counted_in_each_nodes_own_sysfs") {
        return;
    }
    let fabric = with_rails("icbra", &["a", "b"], 2);
    assert_eq!(fabric.rails(), 2);
    assert_eq!(
        fabric.namespaces().len(),
        3,
        "two nodes and the hub holding the rail switches"
    );
    assert_eq!(fabric.rail_ip("a", 0).unwrap(), Ipv4Addr::new(10, 99, 1, 1));
    assert_eq!(fabric.rail_ip("b", 1).unwrap(), Ipv4Addr::new(10, 99, 2, 2));
    assert_eq!(
        fabric.node_ip("b").unwrap(),
        Ipv4Addr::new(10, 99, 0, 2),
        "eth0 keeps its address"
    );
    let (a, b) = (fabric.netns("a").unwrap(), fabric.netns("b").unwrap());

    // Each node's sysfs shows its own devices, not the host's nor the other node's.
    let (sys_a, sys_b) = (fabric.sys_root("a").unwrap(), fabric.sys_root("b").unwrap());
    for sys in [&sys_a, &sys_b] {
        for dev in ["eth0", "rail0", "rail1"] {
            assert!(sys.join("class/net").join(dev).exists(), "{}: no {dev}", sys.display());
        }
        let state = std::fs::read_to_string(sys.join("class/net/rail1/operstate")).unwrap();
        assert_eq!(state.trim(), "up", "handed out only once every rail runs");
    }
    let addr_a = std::fs::read_to_string(sys_a.join("class/net/rail0/address")).unwrap();
    let addr_b = std::fs::read_to_string(sys_b.join("class/net/rail0/address")).unwrap();
    assert_ne!(addr_a, addr_b, "two nodes' rail0 are two devices");

    // 4 MiB over rail 1 show up in rail1's counters on both sides, not in rail0's.
    const BYTES: usize = 4 << 20;
    let (tx1, tx0) = (
        counter(&sys_a, "rail1", "tx_bytes"),
        counter(&sys_a, "rail0", "tx_bytes"),
    );
    let (rx1, rx0) = (
        counter(&sys_b, "rail1", "rx_bytes"),
        counter(&sys_b, "rail0", "rx_bytes"),
    );
    send(a, &listen(b, fabric.rail_ip("b", 1).unwrap()), BYTES);
    let sent = counter(&sys_a, "rail1", "tx_bytes") - tx1;
    let received = counter(&sys_b, "rail1", "rx_bytes") - rx1;
    assert!(sent >= BYTES as u64, "a's rail1 sent {sent} B");
    assert!(received >= BYTES as u64, "b's rail1 received {received} B");
    assert!(sent < 2 * BYTES as u64, "a's rail1 sent {sent} B for {BYTES}");
    let other = (counter(&sys_a, "rail0", "tx_bytes") - tx0) + (counter(&sys_b, "rail0", "rx_bytes") - rx0);
    assert!(other < 64 * 1024, "rail0 carried {other} B of a rail1 transfer");

    // And rail 0 carries its own traffic, counted on rail0.
    let tx0 = counter(&sys_a, "rail0", "tx_bytes");
    send(a, &listen(b, fabric.rail_ip("b", 0).unwrap()), 1 << 20);
    assert!(counter(&sys_a, "rail0", "tx_bytes") - tx0 >= 1 << 20);

    let err = fabric.rail_ip("a", 2).unwrap_err();
    assert!(matches!(err, IsolateError::UnknownRail { rail: 2, .. }), "{err}");
    assert_eq!(err.to_string(), "no rail 2 on node 'a': rails are 0 to 1");
    assert!(
        fabric
            .limit_rail("nope", 0, "1mbit")
            .unwrap_err()
            .to_string()
            .contains("no node 'nope'")
    );
    fabric.teardown().unwrap();
}

#[test]
fn a_cut_rail_is_dead_while_the_others_run_and_a_limited_rail_has_its_tbf() {
    if !privileged_tests_enabled("a_cut_rail_is_dead_while_the_others_run_and_a_limited_rail_has_its_tbf") {
        return;
    }
    let fabric = with_rails("icbrb", &["a", "b", "c"], 2);
    let (a, b) = (fabric.netns("a").unwrap(), fabric.netns("b").unwrap());
    let on_rail0 = listen(b, fabric.rail_ip("b", 0).unwrap());
    let on_rail1 = listen(b, fabric.rail_ip("b", 1).unwrap());
    let on_eth0 = listen(b, fabric.node_ip("b").unwrap());
    fabric.cut_rail("b", 0).unwrap();
    let err = connect(a, on_rail0.local_addr().unwrap()).expect_err("b's rail0 is dead");
    assert_eq!(err.kind(), std::io::ErrorKind::TimedOut, "{err:?}");
    connect(a, on_rail1.local_addr().unwrap()).expect("rail1 still runs");
    connect(a, on_eth0.local_addr().unwrap()).expect("eth0 still runs");
    fabric.restore_rail("b", 0).unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while let Err(e) = connect(a, on_rail0.local_addr().unwrap()) {
        assert!(Instant::now() < deadline, "rail0 still dead after restore: {e}");
        std::thread::sleep(Duration::from_millis(20));
    }

    fabric.limit_rail("c", 1, "50mbit").unwrap();
    let qdisc = std::process::Command::new("tc")
        .args([
            "-n",
            fabric.netns("c").unwrap(),
            "qdisc",
            "show",
            "dev",
            &rail_netdev(1),
        ])
        .output()
        .unwrap();
    let qdisc = String::from_utf8_lossy(&qdisc.stdout);
    assert!(qdisc.contains("tbf") && qdisc.contains("50Mbit"), "{qdisc}");
    assert!(matches!(
        fabric.cut_rail("c", 5),
        Err(IsolateError::UnknownRail { rail: 5, .. })
    ));
}

#[test]
fn rail_trees_live_as_long_as_the_fabric_and_fabrics_without_rails_have_none() {
    if !privileged_tests_enabled("rail_trees_live_as_long_as_the_fabric_and_fabrics_without_rails_have_none") {
        return;
    }
    let plain = Fabric::create("icbrc", &["a", "b"]).unwrap();
    assert_eq!((plain.rails(), plain.rail_tree("a")), (0, None));
    assert_eq!(plain.namespaces().len(), 2, "no rails: two nodes share a veth, no hub");
    let err = plain.rail_ip("a", 0).unwrap_err().to_string();
    assert!(err.contains("this fabric has no rails"), "{err}");
    plain.teardown().unwrap();

    let fabric = with_rails("icbrc", &["a", "b"], 3);
    let tree = fabric.rail_tree("b").expect("a tree per node");
    assert!(tree.join("sys/class/infiniband/mlx5_2/ports/1/state").exists());
    assert!(tree.join("sys/class/net/rail2/device").exists());
    let mine = leftovers_of("icbrc", std::process::id());
    assert_eq!(mine.rail_trees.len(), 1, "{mine:?}");
    assert!(tree.starts_with(&mine.rail_trees[0]));
    let namespaces = fabric.namespaces().to_vec();
    drop(fabric);
    assert!(!tree.exists(), "the tree outlived its fabric");
    assert!(namespaces.iter().all(|ns| !netns_exists(ns)));
    assert!(leftovers_of("icbrc", std::process::id()).is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_local_pair_with_rails_runs_one_pod_per_rail_on_each_side() {
    if !privileged_tests_enabled("a_local_pair_with_rails_runs_one_pod_per_rail_on_each_side") {
        return;
    }
    let pair = LocalPair::create_with_rails(Isolation::Node, "icbrd", 2).unwrap();
    assert_eq!(pair.rails(), 2);
    let (decode, prefill) = (pair.decode().clone(), pair.prefill().clone());
    assert_eq!(pair.rail_ip(&decode, 1).unwrap(), Ipv4Addr::new(10, 99, 2, 1));
    assert_eq!(pair.rail_ip(&prefill, 1).unwrap(), Ipv4Addr::new(10, 99, 2, 2));
    assert!(
        pair.rail_tree(&prefill)
            .unwrap()
            .join("sys/class/infiniband/mlx5_1")
            .exists()
    );
    let sys = pair.sys_root(&decode).unwrap();
    assert!(sys.join("class/net/rail1/statistics/tx_bytes").exists());
    pair.limit_rail(&prefill, 0, "100mbit").unwrap();

    // Two pods on each side at once, one per rail, each seeing its node's rail.
    let mut pods = Vec::new();
    for side in [&decode, &prefill] {
        for k in 0..2 {
            let script = format!(
                "cat /sys/class/net/{}/operstate; ip -o -4 addr show dev rail{k}",
                rail_netdev(k)
            );
            let pod = pair.pod(side, "sh").arg("-c").arg(script).spawn().unwrap();
            pods.push((side.host.clone(), k, pod));
        }
    }
    for (host, k, mut pod) in pods {
        let mut stdout = pod.take_stdout().expect("stdout is piped");
        let mut out = String::new();
        tokio::time::timeout(Duration::from_secs(10), stdout.read_to_string(&mut out))
            .await
            .expect("pod output within 10 s")
            .unwrap();
        let status = tokio::time::timeout(Duration::from_secs(10), pod.wait())
            .await
            .expect("pod ends");
        assert!(status.unwrap().success(), "{host} rail{k}: {out}");
        let want = pair
            .rail_ip(if host == decode.host { &decode } else { &prefill }, k)
            .unwrap();
        assert!(
            out.starts_with("up\n") && out.contains(&format!("{want}/24")),
            "{host} rail{k}: {out}"
        );
    }
    let namespaces = pair.fabric().unwrap().namespaces().to_vec();
    let tree = pair.rail_tree(&decode).unwrap();
    pair.teardown().unwrap();
    assert!(namespaces.iter().all(|ns| !netns_exists(ns)) && !tree.exists());
}

#[test]
fn a_dead_owners_rail_trees_are_found_and_removed_by_stale_cleanup() {
    if !privileged_tests_enabled("a_dead_owners_rail_trees_are_found_and_removed_by_stale_cleanup") {
        return;
    }
    // A reaped child's pid is a dead owner (as a SIGKILLed ic-bench is).
    let mut child = std::process::Command::new("true").spawn().unwrap();
    child.wait().unwrap();
    let dead = child.id();
    let stale = std::env::temp_dir().join(format!("icbre-{dead}-0badcafe-rails"));
    icb_isolate::write_rail_tree(&stale.join("a"), 2).unwrap();
    // A live run's tree is never touched.
    let live = with_rails("icbre", &["a"], 1);
    let live_tree = live.rail_tree("a").unwrap();

    let found = icb_isolate::find_stale("icbre").unwrap();
    assert_eq!(found.rail_trees, vec![stale.clone()]);
    let removed = icb_isolate::cleanup_stale("icbre").unwrap();
    assert_eq!(removed.rail_trees, vec![stale.clone()]);
    assert!(!stale.exists() && live_tree.exists());
    assert!(icb_isolate::find_stale("icbre").unwrap().is_empty());
    live.teardown().unwrap();
    assert!(!live_tree.exists());
}

#[test]
fn a_create_with_rails_that_fails_late_removes_what_it_made_and_nothing_else() {
    if !privileged_tests_enabled("a_create_with_rails_that_fails_late_removes_what_it_made_and_nothing_else") {
        return;
    }
    let tag = RunTag::new("icbrf").unwrap();
    // Someone else's directory under the trees' name: the build fails after every rail is up.
    let squatter = std::env::temp_dir().join(format!("{tag}-rails"));
    std::fs::create_dir(&squatter).unwrap();
    std::fs::write(squatter.join("theirs"), "keep").unwrap();
    let opts = FabricOptions {
        wiring: Wiring::Auto,
        rails: 2,
    };
    let err = Fabric::create_with(tag.clone(), &["a", "b"], opts)
        .unwrap_err()
        .to_string();
    assert!(err.contains(&squatter.display().to_string()), "{err}");
    for ns in [tag.node_netns("a"), tag.node_netns("b"), tag.hub_netns()] {
        assert!(!netns_exists(&ns), "{ns} left behind");
    }
    assert!(
        squatter.join("theirs").exists(),
        "a directory we did not create was touched"
    );
    std::fs::remove_dir_all(&squatter).unwrap();
    let err = Fabric::create_with(tag, &["a"], FabricOptions { rails: 17, ..opts }).unwrap_err();
    assert!(matches!(err, IsolateError::TooManyRails { got: 17, max: 16 }), "{err}");
}
