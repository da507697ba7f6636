//! The Kubernetes side of `probe node` and `probe nixl` (`icb_probe::vantage::Remote`): `--pod`
//! runs the snapshot script through the exec API (nothing is created), `--node` runs it as one
//! short-lived probe pod, deleted on every path (`crate::probe_pod`). [`open`] reads the node at
//! its vantage, the probe pod under the binary's signal handler.

use crate::access::{ClusterOptions, connect};
use crate::error::KubeError;
use crate::probe_pod::{ProbePodOptions, run_probe_pod};
use icb_interrupt::{Interrupt, Interrupted};
use icb_probe::Vantage;
use icb_probe::vantage::{ExecOutput, Opened, Remote, SnapshotAt};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Where the cluster is and how long a remote probe may take.
pub struct KubeRemote<'a> {
    /// The caller's runtime: the probe calls are blocking.
    pub runtime: &'a tokio::runtime::Runtime,
    pub cluster: ClusterOptions,
    /// Container of `--pod` (else the pod's default container).
    pub container: Option<String>,
    /// Deadline of the whole remote probe (`--timeout`).
    pub deadline: Duration,
    /// Image of the probe pod (else the default bench image).
    pub image: Option<String>,
    /// Cancelled on an interrupt: the probe pod is deleted and the call ends in
    /// `KubeError::Interrupted`; `None` waits for the deadline only.
    pub stopped: Option<CancellationToken>,
}

/// A remote probe that could not be read: the cluster's error or the snapshot's.
#[derive(Debug, thiserror::Error)]
pub enum ProbeRemoteError {
    #[error(transparent)]
    Kube(#[from] KubeError),
    #[error(transparent)]
    Snapshot(#[from] SnapshotAt),
}

/// Where a remote probe finds the node and how long it may take (`probe node|nixl`'s flags).
#[derive(Debug, Clone)]
pub struct RemoteFlags {
    pub cluster: ClusterOptions,
    /// `--container` of `--pod`.
    pub container: Option<String>,
    /// `--timeout`: the whole remote probe.
    pub deadline: Duration,
    /// `--image` of the `--node` probe pod.
    pub image: Option<String>,
}

/// Why the node could not be read at its vantage.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error(transparent)]
    Remote(#[from] ProbeRemoteError),
    #[error(transparent)]
    Handler(#[from] icb_interrupt::InstallError),
    #[error("cannot start the async runtime: {0}")]
    Runtime(std::io::Error),
    /// A signal while the probe pod ran: the pod is deleted and the handler's one line said;
    /// the process exits with its code.
    #[error(transparent)]
    Interrupted(Interrupted),
}

/// Reads the node at its vantage: this machine, `--pod` (the exec API) or `--node` (one
/// short-lived probe pod, which claims the signal handler for its life: an interrupt deletes it
/// and ends in [`OpenError::Interrupted`]).
pub fn open(vantage: Vantage, script: &str, flags: RemoteFlags) -> Result<Opened, OpenError> {
    let interrupt = matches!(vantage, Vantage::ProbePod(_))
        .then(Interrupt::install)
        .transpose()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(OpenError::Runtime)?;
    let mut kube = KubeRemote {
        runtime: &runtime,
        cluster: flags.cluster,
        container: flags.container,
        deadline: flags.deadline,
        image: flags.image,
        stopped: interrupt.as_ref().map(|i| i.token().clone()),
    };
    match (vantage.open(script, &mut kube), interrupt) {
        (Err(ProbeRemoteError::Kube(KubeError::Interrupted(what))), Some(i)) => {
            Err(OpenError::Interrupted(Interrupted(i.report(&what))))
        }
        (opened, _) => Ok(opened?),
    }
}

impl Remote for KubeRemote<'_> {
    type Error = ProbeRemoteError;

    fn exec(&mut self, pod: &str, script: &str) -> Result<ExecOutput, ProbeRemoteError> {
        self.runtime.block_on(async {
            let cluster = connect(&self.cluster).await?;
            let cmd = vec!["sh".to_string(), "-c".to_string(), script.to_string()];
            let out = cluster
                .exec(pod, self.container.as_deref(), &cmd, self.deadline)
                .await?;
            Ok(ExecOutput {
                stdout: out.stdout_lossy(),
                stderr: out.stderr_lossy(),
                exit_code: out.exit_code,
            })
        })
    }

    fn probe_pod(&mut self, node: &str, script: &str) -> Result<String, ProbeRemoteError> {
        let opts = ProbePodOptions {
            image: self.image.clone().unwrap_or_else(crate::podspec::default_image),
            image_pull_policy: None,
            run_id: crate::podspec::new_run_id(),
            deadline: self.deadline,
        };
        let stopped = self.stopped.clone().unwrap_or_default();
        self.runtime.block_on(async {
            let cluster = connect(&self.cluster).await?;
            Ok(run_probe_pod(&cluster, node, script, &opts, stopped.cancelled()).await?)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flags(kubeconfig: &std::path::Path) -> RemoteFlags {
        RemoteFlags {
            cluster: ClusterOptions {
                kubeconfig: Some(kubeconfig.to_path_buf()),
                ..Default::default()
            },
            container: None,
            deadline: Duration::from_secs(5),
            image: None,
        }
    }

    /// This machine opens without a cluster (its own env read); `--pod` with a kubeconfig that
    /// is not there is the cluster's error, said once, not a hang.
    #[test]
    fn this_machine_needs_no_cluster_and_a_pod_needs_one() {
        let missing = std::path::Path::new("/nonexistent/kubeconfig");
        let local = icb_probe::request::node_vantage(None, None, &Default::default()).unwrap();
        let opened = open(local, "true", flags(missing)).unwrap();
        assert!(opened.env.is_some());
        let Err(e) = open(Vantage::Pod("p".into()), "true", flags(missing)) else {
            panic!("a pod opened without a cluster")
        };
        assert!(matches!(e, OpenError::Remote(ProbeRemoteError::Kube(_))), "{e:?}");
    }
}
