//! `ic-bench pair --prefill node/A --decode node/B --rails …`: every rail of two Kubernetes nodes
//! at once, through `icb_rails::kube` (one idle bench pod per node holding all of its GPUs
//! and RDMA devices, each rank exec'd into it). Here only the flags, read once, and the wiring.

use icb_kube::PodOptions;
use icb_kube::target::Target;
use icb_rails::kube::KubeRailsPlan;
use icb_rails::{RailSelection, RailSite, read_selection};
use icb_target::KubeRailsTarget;
use std::time::Duration;

/// Reads the rails flags of a Kubernetes run (`--prefill node/A --decode node/B`).
pub fn target(
    args: &super::pair::Args,
    options: &PodOptions,
    plan: &icb_pair::PairPlan,
) -> anyhow::Result<KubeRailsTarget> {
    let nodes = nodes(args)?;
    refuse_flags(args)?;
    let selection = selection(&args.rails)?;
    let k = &args.kube;
    let run_id = icb_kube::podspec::run_id_or_new(k.run_id.as_deref()).map_err(anyhow::Error::msg)?;
    let times = (node_pods_start(k), k.cluster.request_timeout);
    Ok(KubeRailsTarget {
        cluster: k.cluster.options(),
        pods: KubeRailsPlan::new((&nodes.0, &nodes.1), run_id, options, times, plan),
        choice: args.rails.choice(selection),
    })
}

/// The two whole nodes a Kubernetes rails run pairs.
fn nodes(args: &super::pair::Args) -> anyhow::Result<(String, String)> {
    let (prefill, decode) = super::pair_kube::targets(args)?;
    let (Target::Node(prefill), Target::Node(decode)) = (prefill, decode) else {
        anyhow::bail!("--rails on Kubernetes runs on whole nodes: give --prefill node/NAME --decode node/NAME");
    };
    if prefill == decode {
        anyhow::bail!("--rails pairs two nodes (each side takes all of its node's devices): give two different nodes");
    }
    Ok((prefill, decode))
}

/// Refuses the flags a Kubernetes rails run cannot honour.
fn refuse_flags(args: &super::pair::Args) -> anyhow::Result<()> {
    let (faults, k) = (&args.emulated_rails, &args.kube);
    let refused = [
        (k.dry_run.is_some(), "--dry-run"),
        (k.host_ipc, "--host-ipc"),
        (k.host_pid, "--host-pid"),
        (k.devices.request() != Default::default(), "--gpus/--rdma/--resource"),
        (!faults.slow_rail.is_empty(), "--slow-rail"),
        (!faults.dead_rail.is_empty(), "--dead-rail"),
        (!faults.congested_rail.is_empty(), "--congested-rail"),
        (!faults.lossy_rail.is_empty(), "--lossy-rail"),
    ];
    if let Some((_, flag)) = refused.iter().find(|(given, _)| *given) {
        anyhow::bail!(
            "{flag} does not apply to --rails on Kubernetes (each pod takes all of its node's devices; slow or dead rails are the cluster's): drop it"
        );
    }
    Ok(())
}

/// Which rails `--rails`/`--rail-devices` choose (a count emulates NICs: not on Kubernetes).
fn selection(rails: &icb_flags::rails::RailArgs) -> anyhow::Result<RailSelection> {
    let devices = rails.rail_devices.as_deref();
    Ok(read_selection(rails.rails.as_deref(), devices, RailSite::Kubernetes)?.1)
}

/// How long the node pods (rails', and `--kv-shape`'s ranks') may take to start: `--timeout`,
/// else five minutes (an image pull on a fresh node).
pub(super) fn node_pods_start(k: &super::pair_kube::KubePairArgs) -> Duration {
    k.timeout.unwrap_or(Duration::from_secs(300))
}
