//! The KV transfer's runs on Kubernetes, as `pair --kv-shape` and `gate --kv-shape` both drive
//! them: each run (the main one, then a control) in two rank pods of its own
//! ([`super::kube_ranks`]), the descriptor sweep in two bench pods shaped as the command's own.

use super::control::{KvRuns, run_kv_with_controls};
use super::directions::{KvConnector, worker_connector};
use super::kube_ranks::{KubeRanks, modelled};
use super::{KvOp, KvPlan, KvProgress, KvSeam};
use icb_core::model::ControlKind;
use icb_kube::Cluster;
use icb_kube::pair::{BenchPodsPlan, SideTemplates};
use icb_kube::target::Target;
use icb_pair::kube::{KubeLauncher, rearmed_run_id};
use icb_pair::launcher::LaunchError;
use icb_pair::{PairError, PairOutcome};
use icb_rails::kube::KubeRailsPlan;
use tokio_util::sync::CancellationToken;

/// The descriptor sweep's two bench pods (`<id>-ks`), modelled as the command's own bench pods
/// are (on the running workers, or on a recipe's templates); for READ the initiator (the client
/// pod) runs on the decode node.
pub struct SweepPods {
    pub cluster: Cluster,
    pub pods: BenchPodsPlan,
    pub templates: SideTemplates,
    pub op: KvOp,
}

impl KvSeam for SweepPods {
    type L = KubeLauncher;

    async fn launcher(&mut self) -> Result<KubeLauncher, LaunchError> {
        let mut pods = self.pods.clone();
        pods.run_id = format!("{}-ks", pods.run_id);
        let mut templates = self.templates.clone();
        if self.op == KvOp::Read {
            std::mem::swap(&mut pods.prefill, &mut pods.decode);
            templates = templates.swapped();
        }
        KubeLauncher::prepare_with_templates(self.cluster.clone(), pods, &templates)
            .await
            .map_err(|e| LaunchError::new(e.to_string()))
    }
}

/// Each run of the KV transfer in two rank pods of its own (a control's named `<run>-c<n>`, so
/// that its creates never meet the main run's pods while they are being deleted); the descriptor
/// sweep on [`SweepPods`].
pub struct KubeRuns {
    pub cluster: Cluster,
    /// The ranks' pods ([`super::kube_ranks::ranks_plan`]).
    pub pods: KubeRailsPlan,
    pub sweep: SweepPods,
    /// This build, for the per-rank report.
    pub tool: icb_core::ToolInfo,
}

impl KvRuns for KubeRuns {
    async fn run(
        &mut self,
        plan: &KvPlan,
        run: u32,
        cancel: &CancellationToken,
        progress: &mut KvProgress<'_>,
    ) -> Result<PairOutcome, PairError> {
        let mut pods = self.pods.clone();
        if run > 0 {
            pods.run_id = rearmed_run_id(&pods.run_id, run);
        }
        let ranks = KubeRanks::new(self.cluster.clone(), pods, plan);
        super::kube_ranks::run(plan, ranks, &mut self.sweep, &self.tool, cancel, progress).await
    }
}

/// No `--recipe`: the connector the worker pods the ranks' pods are modelled on run (decode's
/// first), read from their specs as a recipe is ([`worker_connector`]).
fn workers_connector(prepared: &icb_kube::pair::Prepared) -> KvConnector {
    let workers: Vec<(String, &_)> = [&prepared.decode, &prepared.prefill]
        .into_iter()
        .filter_map(|side| {
            let pod = side.reference.as_ref()?;
            let name = side.modelled_on.clone().unwrap_or_else(|| "a worker pod".into());
            Some((name, pod))
        })
        .collect();
    worker_connector(&workers)
}

/// `pair --kv-shape` on Kubernetes, once connected: the transfer and `controls`, the ranks in
/// `ranks`' pods. Worker-shaped targets (`pod/…`, `deployment/…`): those pods are modelled on
/// the bench pods `bench` would create ([`modelled`]; reading the cluster creates nothing).
pub async fn run_kube_kv(
    cluster: Cluster,
    (bench, ranks): (BenchPodsPlan, KubeRailsPlan),
    kv: &KvPlan,
    (controls, tool): (&[ControlKind], icb_core::ToolInfo),
    cancel: &CancellationToken,
    progress: &mut KvProgress<'_>,
) -> Result<PairOutcome, PairError> {
    let node = |t: &Target| matches!(t, Target::Node(_));
    let mut with_workers = None;
    let ranks = if node(&bench.prefill) && node(&bench.decode) {
        ranks
    } else {
        let prepared = tokio::select! {
            p = KubeLauncher::prepare(cluster.clone(), bench.clone()) => p.map_err(|e| PairError::Setup(e.to_string()))?,
            _ = cancel.cancelled() => return Err(PairError::Interrupted(Default::default())),
        };
        if kv.connector.is_none() && kv.both_ops {
            with_workers = Some(KvPlan {
                connector: Some(workers_connector(prepared.prepared())),
                ..kv.clone()
            });
        }
        modelled(ranks, prepared.prepared())
    };
    let kv = with_workers.as_ref().unwrap_or(kv);
    let sweep = SweepPods {
        cluster: cluster.clone(),
        pods: bench,
        templates: SideTemplates::default(),
        op: kv.op,
    };
    let mut runs = KubeRuns {
        cluster,
        pods: ranks,
        sweep,
        tool,
    };
    run_kv_with_controls(controls, kv, &mut runs, cancel, progress).await
}
