//! The emulated cluster as a demo: `cargo run -p icb-testcluster --example cluster -- --nodes 4
//! [--gpus-per-node G] [--slow-node NAME=RATE]… [--tcp-only-node NAME]… [--rails K [--slow-rail
//! NODE/I=RATE]… [--dead-rail NODE/I]…] --kubeconfig PATH` (root:
//! namespaces). Nodes are node-1 … node-N; RATE as tc writes it (e.g. 200mbit); a tcp-only node's
//! containers get UCX_TLS=tcp whatever their pod says (seen by `sweep --schedule intra-node
//! --host-ipc`: across nodes the emulated fabric is tcp anyway). Runs in the foreground; Ctrl-C removes
//! every pod, namespace and temp file. With `--rails K` every node gets K rail NICs (rail I of every
//! node on its own switch): `pair --prefill node/node-1 --decode node/node-2 --rails auto`. From another shell: `ic-bench sweep --kubeconfig PATH`,
//! `ic-bench gate …`, `ic-bench pair --prefill node/node-1 --decode node/node-2 --kubeconfig PATH`.
//! Pods run the ic-bench binary named by $IC_BENCH_BIN (default: target/release/ic-bench when
//! it was built, else target/debug/ic-bench), with the UCX and NIXL that scripts/setup installed
//! (or $IC_BENCH_UCX_LIB / $IC_BENCH_NIXL_LIB), so it works from a plain shell as under `cargo
//! run`. SIGINT, SIGTERM and SIGHUP all remove everything.

use icb_testcluster::{ClusterConfig, ImageConfig, Isolation, NodeConfig, TestCluster};
use std::path::{Path, PathBuf};

const USAGE: &str = "usage: cluster --nodes N [--gpus-per-node G] [--slow-node NAME=RATE]... [--tcp-only-node NAME]... [--rails K] [--slow-rail NODE/I=RATE]... [--dead-rail NODE/I]... --kubeconfig PATH";
/// The checkout this example was built from.
const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");

struct Opts {
    nodes: usize,
    gpus: u32,
    slow: Vec<(String, String)>,
    tcp_only: Vec<String>,
    rails: usize,
    slow_rails: Vec<(String, usize, String)>,
    dead_rails: Vec<(String, usize)>,
    kubeconfig: PathBuf,
}

/// `node-2/3` → (`node-2`, 3).
fn node_rail(flag: &str, text: &str) -> Result<(String, usize), String> {
    let bad = || format!("{flag} {text}: use NODE/I, e.g. node-2/3");
    let (node, rail) = text.split_once('/').ok_or_else(bad)?;
    Ok((node.to_string(), rail.parse().map_err(|_| bad())?))
}

fn parse() -> Result<Opts, String> {
    let mut args = std::env::args().skip(1);
    let mut o = Opts {
        nodes: 0,
        gpus: 0,
        slow: vec![],
        tcp_only: vec![],
        rails: 0,
        slow_rails: vec![],
        dead_rails: vec![],
        kubeconfig: PathBuf::new(),
    };
    let usage = USAGE;
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
            "--rails" => o.rails = value()?.parse().map_err(|_| format!("--rails: a number; {usage}"))?,
            "--slow-rail" => {
                let v = value()?;
                let (at, rate) = v
                    .split_once('=')
                    .ok_or_else(|| format!("--slow-rail {v}: use NODE/I=RATE, e.g. node-2/3=200mbit"))?;
                let (node, rail) = node_rail("--slow-rail", at)?;
                o.slow_rails.push((node, rail, rate.to_string()));
            }
            "--dead-rail" => {
                let (node, rail) = node_rail("--dead-rail", &value()?)?;
                o.dead_rails.push((node, rail));
            }
            "--kubeconfig" => o.kubeconfig = PathBuf::from(value()?),
            "-h" | "--help" => {
                println!("{}\n\n{USAGE}", HELP);
                std::process::exit(0);
            }
            other => return Err(format!("unknown argument {other}; {usage}")),
        }
    }
    if o.nodes == 0 || o.kubeconfig.as_os_str().is_empty() {
        return Err(usage.to_string());
    }
    let names: Vec<String> = (1..=o.nodes).map(|i| format!("node-{i}")).collect();
    let rail_nodes = o.slow_rails.iter().map(|(n, k, _)| (n, *k));
    for (n, k) in rail_nodes.chain(o.dead_rails.iter().map(|(n, k)| (n, *k))) {
        if k >= o.rails {
            return Err(format!("{n}/{k}: rails are 0 to K-1 with --rails K (K = {})", o.rails));
        }
    }
    let named = o.slow_rails.iter().map(|(n, _, _)| n);
    let named = named.chain(o.dead_rails.iter().map(|(n, _)| n));
    for n in o.slow.iter().map(|(n, _)| n).chain(&o.tcp_only).chain(named) {
        if !names.contains(n) {
            return Err(format!("no node {n}: nodes are node-1 … node-{}", o.nodes));
        }
    }
    Ok(o)
}

const HELP: &str = "The emulated Kubernetes cluster, for trying ic-bench without one (root: namespaces).
Nodes are node-1 … node-N. --slow-node limits a node's link both ways (tc tbf, RATE as tc writes it, e.g. 200mbit);
--tcp-only-node gives that node's containers UCX_TLS=tcp. --rails K gives every node K rail NICs
(rail I of every node on its own switch); --slow-rail NODE/I=RATE limits one, --dead-rail NODE/I
takes one down. Then, from another shell:
  ic-bench sweep --kubeconfig PATH --allow-tcp --min-host-bw 0.001
  ic-bench pair --prefill node/node-1 --decode node/node-2 --kubeconfig PATH
  ic-bench pair --prefill node/node-1 --decode node/node-2 --rails auto --kubeconfig PATH
  kubectl --kubeconfig PATH get nodes -L ic-bench.dev/fabric
Runs in the foreground; Ctrl-C (or SIGTERM) removes every pod, namespace and temp file.";

/// The checkout, as a plain path (for messages).
fn root() -> PathBuf {
    Path::new(ROOT).canonicalize().unwrap_or_else(|_| PathBuf::from(ROOT))
}

/// The ic-bench the pods run: $IC_BENCH_BIN, else the release build when there is one.
fn program() -> PathBuf {
    if let Some(bin) = std::env::var_os("IC_BENCH_BIN") {
        return PathBuf::from(bin);
    }
    let release = root().join("target/release/ic-bench");
    if release.is_file() {
        return release;
    }
    root().join("target/debug/ic-bench")
}

/// The pods' image: the program, with the UCX and NIXL libraries it loads from this checkout's
/// `.deps` (what `cargo run` would have put in the environment), unless the caller set them.
fn image(program: PathBuf) -> ImageConfig {
    let mut image = ImageConfig::new(program);
    for (var, dir) in [
        ("IC_BENCH_UCX_LIB", ".deps/ucx/lib"),
        ("IC_BENCH_NIXL_LIB", ".deps/nixl/site/.nixl_cu12.mesonpy.libs"),
    ] {
        let path = root().join(dir);
        if std::env::var_os(var).is_none() && path.is_dir() {
            image = image.env(var, &path.display().to_string());
        }
    }
    image
}

/// Waits for SIGINT, SIGTERM or SIGHUP (a closed terminal, a `kill`, a CI timeout).
async fn stop_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut hup)) = (signal(SignalKind::terminate()), signal(SignalKind::hangup())) else {
        let _ = tokio::signal::ctrl_c().await;
        return;
    };
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
        _ = hup.recv() => {}
    }
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
    let program = program();
    if !program.is_file() {
        eprintln!(
            "cluster: no ic-bench at {}: run `cargo build --release` (or set IC_BENCH_BIN)",
            program.display()
        );
        std::process::exit(2);
    }
    eprintln!("cluster: pods run {}", program.display());
    let mut config = ClusterConfig::new()
        .default_image(image(program))
        .isolation(Isolation::Namespaces)
        .rails(o.rails);
    for (node, k, rate) in &o.slow_rails {
        config = config.slow_rail(node, *k, rate);
    }
    for (node, k) in &o.dead_rails {
        config = config.dead_rail(node, *k);
    }
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
        "cluster: {} nodes at {}; kubeconfig {}; Ctrl-C (or SIGTERM) to remove everything",
        o.nodes,
        cluster.url(),
        o.kubeconfig.display()
    );
    stop_signal().await;
    cluster.shutdown().await;
    let _ = std::fs::remove_file(&o.kubeconfig);
    eprintln!("cluster: stopped, nothing left");
}
