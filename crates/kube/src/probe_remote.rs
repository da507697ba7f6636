//! The Kubernetes side of `probe node` and `probe nixl` (`icb_probe::vantage::Remote`): `--pod`
//! runs the snapshot script through the exec API (nothing is created), `--node` runs it as one
//! short-lived probe pod, deleted on every path (`crate::probe_pod`).

use crate::access::{ClusterOptions, connect};
use crate::error::KubeError;
use crate::probe_pod::{ProbePodOptions, run_probe_pod};
use icb_probe::vantage::{ExecOutput, Remote, SnapshotAt};
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
