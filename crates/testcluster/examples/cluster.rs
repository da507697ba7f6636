//! The emulated cluster as a demo: `cargo run -p icb-testcluster --example cluster -- --nodes 4
//! [--gpus-per-node G] [--slow-node NAME=RATE]… [--tcp-only-node NAME]… --kubeconfig PATH` (root:
//! namespaces). Nodes are node-1 … node-N; RATE as tc writes it (e.g. 200mbit); a tcp-only node's
//! containers get UCX_TLS=tcp whatever their pod says (seen by `sweep --schedule intra-node
//! --host-ipc`: across nodes the emulated fabric is tcp anyway). Runs in the foreground; Ctrl-C removes
//! every pod, namespace and temp file. From another shell: `ic-bench sweep --kubeconfig PATH`,
//! `ic-bench gate …`, `ic-bench pair --prefill node/node-1 --decode node/node-2 --kubeconfig PATH`.
//! Pods run the ic-bench binary named by $IC_BENCH_BIN (default: target/debug/ic-bench).

use icb_testcluster::{ClusterConfig, Isolation, NodeConfig, TestCluster};
use std::path::PathBuf;

struct Opts {
    nodes: usize,
    gpus: u32,
    slow: Vec<(String, String)>,
    tcp_only: Vec<String>,
    kubeconfig: PathBuf,
}

fn parse() -> Result<Opts, String> {
    let mut args = std::env::args().skip(1);
    let mut o = Opts {
        nodes: 0,
        gpus: 0,
        slow: vec![],
        tcp_only: vec![],
        kubeconfig: PathBuf::new(),
    };
    let usage = "usage: cluster --nodes N [--gpus-per-node G] [--slow-node NAME=RATE]... [--tcp-only-node NAME]... --kubeconfig PATH";
    while let Some(a) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{a} needs a value; {usage}"));
        match a.as_str() {
            "--nodes" => o.nodes = value()?.parse().map_err(|_| format!("--nodes: a number; {usage}"))?,
            "--gpus-per-node" => {
                o.gpus = value()?
                    .parse()
                    .map_err(|_| format!("--gpus-per-node: a number; {usage}"))?
            }
            "--slow-node" => {
                let v = value()?;
                let (n, r) = v
                    .split_once('=')
                    .ok_or_else(|| format!("--slow-node {v}: use NAME=RATE, e.g. node-2=200mbit"))?;
                o.slow.push((n.to_string(), r.to_string()));
            }
            "--tcp-only-node" => o.tcp_only.push(value()?),
            "--kubeconfig" => o.kubeconfig = PathBuf::from(value()?),
            other => return Err(format!("unknown argument {other}; {usage}")),
        }
    }
    if o.nodes == 0 || o.kubeconfig.as_os_str().is_empty() {
        return Err(usage.to_string());
    }
    let names: Vec<String> = (1..=o.nodes).map(|i| format!("node-{i}")).collect();
    for n in o.slow.iter().map(|(n, _)| n).chain(&o.tcp_only) {
        if !names.contains(n) {
            return Err(format!("no node {n}: nodes are node-1 … node-{}", o.nodes));
        }
    }
    Ok(o)
}

#[tokio::main]
async fn main() {
    let o = match parse() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("cluster: {e}");
            std::process::exit(2);
        }
    };
    let program = std::env::var_os("IC_BENCH_BIN")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../../target/debug/ic-bench")));
    let mut config = ClusterConfig::new().program(program).isolation(Isolation::Namespaces);
    for i in 1..=o.nodes {
        let name = format!("node-{i}");
        let tcp_only = o.tcp_only.contains(&name);
        let node = if o.gpus > 0 {
            NodeConfig::gpu(name, o.gpus)
        } else {
            NodeConfig::new(name)
        };
        config = config.node(if tcp_only { node.tcp_only() } else { node });
    }
    let cluster = match TestCluster::start(config).await {
        Ok(c) => c,
        Err(e) => {
            eprintln!("cluster: cannot start ({e}); it needs root for the namespaces");
            std::process::exit(2);
        }
    };
    for (node, rate) in &o.slow {
        if let Err(e) = cluster.rate_limit_node(node, rate) {
            eprintln!("cluster: --slow-node {node}={rate}: {e}");
            cluster.shutdown().await;
            std::process::exit(2);
        }
    }
    if let Err(e) = std::fs::copy(cluster.kubeconfig_path(), &o.kubeconfig) {
        eprintln!("cluster: cannot write {}: {e}", o.kubeconfig.display());
        cluster.shutdown().await;
        std::process::exit(2);
    }
    eprintln!(
        "cluster: {} nodes at {}; kubeconfig {}; Ctrl-C to remove everything",
        o.nodes,
        cluster.url(),
        o.kubeconfig.display()
    );
    let _ = tokio::signal::ctrl_c().await;
    cluster.shutdown().await;
    let _ = std::fs::remove_file(&o.kubeconfig);
    eprintln!("cluster: stopped, nothing left");
}
