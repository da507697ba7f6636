//! `ic-bench pair --prefill node/A --decode node/B --rails …`: every rail of two Kubernetes nodes
//! at once, through `icb_pair::rails::kube` (one idle bench pod per node holding all of its GPUs
//! and RDMA devices, each rank exec'd into it). Here only the flags, read once, and the wiring.

use super::interrupt::Interrupt;
use super::kube_args::ClusterArgs;
use super::pair::PairCommand;
use super::pair_rails::{rails_plan, run_plan};
use icb_kube::target::Target;
use icb_pair::rails::Choice;
use icb_pair::rails::kube::{KubeRails, KubeRailsPlan};
use icb_pair::rails::{RailSelection, RailSite, read_selection};
use icb_pair::{PairError, SideRole};
use std::time::Duration;

/// How long the rails may take, after Ctrl-C, to stop their rows and hand back the cases measured
/// so far (each row's own stop is bounded; this keeps a stuck one from holding the exit).
const RAILS_STOP_GRACE: Duration = Duration::from_secs(15);

/// A Kubernetes rails run, decided.
pub struct KubeRailsTarget {
    pub cluster: ClusterArgs,
    pub pods: KubeRailsPlan,
    pub choice: Choice,
}

/// Reads the rails flags of a Kubernetes run (`--prefill node/A --decode node/B`).
pub fn target(args: &super::pair::Args, plan: &icb_pair::PairPlan) -> anyhow::Result<KubeRailsTarget> {
    let nodes = nodes(args)?;
    refuse_flags(args)?;
    let selection = selection(&args.rails)?;
    Ok(KubeRailsTarget {
        cluster: args.kube.cluster.clone(),
        pods: pods(args, nodes, plan)?,
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
fn selection(rails: &super::pair_rails::RailArgs) -> anyhow::Result<RailSelection> {
    let devices = rails.rail_devices.as_deref();
    Ok(read_selection(rails.rails.as_deref(), devices, RailSite::Kubernetes)?.1)
}

/// The bench pods of the two nodes (also `--kv-shape`'s ranks').
pub(super) fn pods(
    args: &super::pair::Args,
    nodes: (String, String),
    plan: &icb_pair::PairPlan,
) -> anyhow::Result<KubeRailsPlan> {
    let k = &args.kube;
    let run_id = icb_kube::podspec::run_id_or_new(k.run_id.as_deref()).map_err(anyhow::Error::msg)?;
    let start_timeout = k.timeout.unwrap_or(Duration::from_secs(300));
    let image = k.image.clone().unwrap_or_else(icb_kube::podspec::default_image);
    let mut pods = KubeRailsPlan::new(
        (&nodes.0, &nodes.1),
        run_id,
        image,
        start_timeout,
        k.cluster.request_timeout,
        plan,
    );
    pods.image_pull_policy = k.image_pull_policy.map(|p| p.as_str().to_string());
    pods.privileged = k.privileged;
    pods.memlock_unlimited = k.memlock_unlimited;
    pods.service_account = k.service_account.clone();
    pods.side_args = args.engine.side_flags();
    Ok(pods)
}

pub fn run(cmd: &PairCommand, t: &KubeRailsTarget) -> anyhow::Result<i32> {
    let interrupt = Interrupt::install()?;
    super::common::runtime()?.block_on(async {
        let cluster = tokio::select! {
            c = t.cluster.connect() => c?,
            _ = interrupt.token().cancelled() => return Ok(interrupt.report("nothing was left to clean up")),
        };
        let mut seam = KubeRails::new(cluster, t.pods.clone());
        // Everything until the pods are deleted stops at Ctrl-C; the cleanup then runs anyway.
        // Once the rails measure, they stop on the token themselves and bring back the cases
        // measured so far (a partial report), within RAILS_STOP_GRACE.
        let measuring = std::cell::Cell::new(false);
        let result = {
            let run = measure(cmd, t, &mut seam, &interrupt, &measuring);
            tokio::pin!(run);
            tokio::select! {
                r = &mut run => r,
                _ = interrupt.token().cancelled() => match measuring.get() {
                    true => tokio::time::timeout(RAILS_STOP_GRACE, &mut run)
                        .await
                        .unwrap_or_else(|_| Err(PairError::Interrupted(Default::default()).into())),
                    false => Err(PairError::Interrupted(Default::default()).into()),
                },
            }
        };
        for note in seam.notes() {
            tracing::info!("{note}");
        }
        let removed = seam.cleanup().await;
        let interrupted = |e: &anyhow::Error| match e.downcast_ref::<PairError>() {
            Some(PairError::Interrupted(i)) => Some(i.clone()),
            _ => None,
        };
        match (result, removed) {
            (Ok(outcome), Ok(_)) => super::common::emit_pair(&outcome.report, &cmd.output, cmd.history.as_ref()),
            (Err(e), removed) if interrupted(&e).is_some() => {
                let mut i = interrupted(&e).unwrap_or_default();
                i.cleanup = match removed {
                    Ok(what) => [i.cleanup.as_str(), what.as_str()]
                        .into_iter()
                        .filter(|s| !s.is_empty())
                        .collect::<Vec<_>>()
                        .join("; "),
                    Err(e) => format!("{}; cleaning up failed: {e}", i.cleanup),
                };
                super::common::emit_interrupted(&i, &cmd.output, &interrupt, cmd.history.as_ref())
            }
            (Err(e), _) => Err(e),
            (Ok(_), Err(e)) => Err(anyhow::anyhow!("the run finished, but cleaning up failed: {e}")),
        }
    })
}

/// Starts the pods, reads both nodes' rails, plans the rows and runs them.
async fn measure(
    cmd: &PairCommand,
    t: &KubeRailsTarget,
    seam: &mut KubeRails,
    interrupt: &Interrupt,
    measuring: &std::cell::Cell<bool>,
) -> anyhow::Result<icb_pair::PairOutcome> {
    seam.start().await?;
    let prefill = seam.node_info(SideRole::Prefill).await?;
    let decode = seam.node_info(SideRole::Decode).await?;
    let plan = rails_plan(cmd, &t.choice, &prefill, &decode)?;
    measuring.set(true);
    Ok(run_plan(&plan, &cmd.controls, seam, interrupt).await?)
}
