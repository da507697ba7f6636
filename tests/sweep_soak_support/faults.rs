//! The soak's fault plan: drawn from one seed (printed, and settable with `IC_BENCH_SOAK_SEED`,
//! so a failure reproduces the same plan), each fault triggered by the sweep's progress (the
//! number of pairs in its results file), never by a clock, so a slow machine gets the same plan.

use icb_testcluster::{RequestMatch, TestCluster};
use rand::rngs::StdRng;
use rand::{Rng as _, SeedableRng as _};
use std::time::{Duration, Instant};

/// The environment variable that sets the seed.
pub const SEED_ENV: &str = "IC_BENCH_SOAK_SEED";

/// How many faults of each kind a soak injects (API errors are a rate, on every request).
#[derive(Debug, Clone, Copy)]
pub struct FaultBudget {
    pub pod_kills: usize,
    pub node_cuts: usize,
    pub api_restarts: usize,
    /// Probability of a 500 on any API request while the sweep runs.
    pub api_error_probability: f64,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Fault {
    /// SIGKILL the containers of a running bench pod (chosen at random when triggered).
    KillPod,
    /// Pull this node's cable; it stays cut to the end of the sweep.
    CutNode(String),
    /// Stop the API server for this long, then serve again on the same address and store.
    RestartApi(Duration),
}

/// One planned fault: injected once the results file holds `after_pairs` pairs.
#[derive(Debug, Clone)]
pub struct Planned {
    pub after_pairs: usize,
    pub fault: Fault,
}

/// What was really injected.
#[derive(Debug, Clone, Default)]
pub struct Injected {
    /// (pod name, node, pairs recorded at that moment).
    pub killed_pods: Vec<(String, String, usize)>,
    /// (node, the pairs recorded before the cut, as [`pair_key`]s).
    pub cut_nodes: Vec<(String, Vec<String>)>,
    /// (downtime, pairs recorded then).
    pub restarts: Vec<(Duration, usize)>,
    /// Planned faults the sweep ended before (or no running pod to kill turned up in time).
    pub not_injected: Vec<Fault>,
}

/// How a recorded pair is named here: `PASS:PREFILL>DECODE`.
pub fn pair_key(pair: &serde_json::Value) -> String {
    format!(
        "{}:{}>{}",
        pair["pass"],
        pair["prefill"].as_str().unwrap_or_default(),
        pair["decode"].as_str().unwrap_or_default()
    )
}

pub fn seed() -> u64 {
    match std::env::var(SEED_ENV) {
        Ok(s) => s
            .parse()
            .unwrap_or_else(|_| panic!("{SEED_ENV}={s:?}: not a number (u64)")),
        Err(_) => rand::random(),
    }
}

/// The plan for a sweep of `nodes` (named node-1 …) whose first pass has `pairs` pairs: the
/// faults spread over its first 90 % so most land while pairs run.
pub fn plan(seed: u64, nodes: usize, pairs: usize, budget: &FaultBudget) -> Vec<Planned> {
    let mut rng = StdRng::seed_from_u64(seed);
    let last = (pairs * 9 / 10).max(1);
    let mut planned = Vec::new();
    for _ in 0..budget.pod_kills {
        planned.push(Planned {
            after_pairs: rng.random_range(0..last),
            fault: Fault::KillPod,
        });
    }
    // Cuts land in the first third: most of the node's pairs then run without its network, so
    // the verdict has something to go on (a node cut after its last pair measured healthy).
    let mut cuttable: Vec<usize> = (1..=nodes).collect();
    for _ in 0..budget.node_cuts.min(nodes) {
        let node = cuttable.remove(rng.random_range(0..cuttable.len()));
        planned.push(Planned {
            after_pairs: rng.random_range(0..(pairs / 3).max(1)),
            fault: Fault::CutNode(format!("node-{node}")),
        });
    }
    for _ in 0..budget.api_restarts {
        planned.push(Planned {
            after_pairs: rng.random_range(0..last),
            fault: Fault::RestartApi(Duration::from_millis(rng.random_range(200..2000))),
        });
    }
    planned.sort_by_key(|p| p.after_pairs);
    planned
}

/// The rng the injector picks its victims with (another stream of the same seed).
pub fn victim_rng(seed: u64) -> StdRng {
    StdRng::seed_from_u64(seed ^ 0x5eed_f00d)
}

/// Starts the random API errors (every path under /api, any method), seeded.
pub fn start_api_errors(cluster: &TestCluster, budget: &FaultBudget, seed: u64) {
    if budget.api_error_probability > 0.0 {
        cluster
            .fail_requests_randomly(RequestMatch::path("/api/*"), 500, budget.api_error_probability, seed)
            .expect("a probability");
    }
}

fn is_running_bench_pod(p: &icb_kube::k8s_openapi::api::core::v1::Pod) -> bool {
    let managed = p
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get("app.kubernetes.io/managed-by"))
        .is_some_and(|v| v == "ic-bench");
    let running = p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running");
    managed && running && p.metadata.deletion_timestamp.is_none()
}

/// Injects `fault` now. A pod kill waits (up to 20 s, or until `ended` says the sweep is over)
/// for a running bench pod; `None` when none turned up.
pub fn inject(
    cluster: &TestCluster,
    fault: &Fault,
    rng: &mut StdRng,
    recorded: &[String],
    injected: &mut Injected,
    ended: &dyn Fn() -> bool,
) -> Option<()> {
    match fault {
        Fault::KillPod => {
            let deadline = Instant::now() + Duration::from_secs(20);
            loop {
                let killed = |p: &icb_kube::k8s_openapi::api::core::v1::Pod| {
                    injected
                        .killed_pods
                        .iter()
                        .any(|(n, _, _)| p.metadata.name.as_ref() == Some(n))
                };
                let running: Vec<_> = cluster
                    .pods()
                    .into_iter()
                    .filter(|p| is_running_bench_pod(p) && !killed(p))
                    .collect();
                if !running.is_empty() {
                    let pod = &running[rng.random_range(0..running.len())];
                    let ns = pod.metadata.namespace.clone().unwrap_or_default();
                    let name = pod.metadata.name.clone().unwrap_or_default();
                    let node = pod.spec.as_ref().and_then(|s| s.node_name.clone()).unwrap_or_default();
                    // It may end between the look and the kill: then try the next one.
                    if cluster.kill_pod_processes(&ns, &name).is_ok() {
                        injected.killed_pods.push((name, node, recorded.len()));
                        return Some(());
                    }
                }
                if Instant::now() > deadline || ended() {
                    return None;
                }
                std::thread::sleep(Duration::from_millis(25));
            }
        }
        Fault::CutNode(node) => {
            cluster.cut_node_network(node).expect("cut the node's link");
            let before: Vec<String> = recorded.to_vec();
            injected.cut_nodes.push((node.clone(), before));
            Some(())
        }
        Fault::RestartApi(downtime) => {
            cluster.restart_api_server(*downtime).expect("restart the API server");
            injected.restarts.push((*downtime, recorded.len()));
            Some(())
        }
    }
}
