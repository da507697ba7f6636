//! Running a command in an existing pod (what `kubectl exec` does), under a deadline.
//!
//! `probe node --pod` uses this to read a node's view from inside a workload pod.

use crate::access::Cluster;
use crate::error::{KubeError, humanize, one_line};
use kube::api::AttachParams;
use std::time::Duration;
use tokio::io::AsyncReadExt;

/// What a command printed and how it ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExecOutput {
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    pub exit_code: i32,
}

impl ExecOutput {
    pub fn stdout_lossy(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }
    pub fn stderr_lossy(&self) -> String {
        String::from_utf8_lossy(&self.stderr).into_owned()
    }
}

impl Cluster {
    /// Runs `command` in `pod` (in this cluster's namespace; `container` None = the pod's only or
    /// default container). The whole exchange, upgrade included, must finish within `deadline`.
    /// A non-zero exit is an `Ok` with that code; failing to run at all is an error.
    pub async fn exec(
        &self,
        pod: &str,
        container: Option<&str>,
        command: &[String],
        deadline: Duration,
    ) -> Result<ExecOutput, KubeError> {
        let what = format!("exec in pod {}/{pod}", self.namespace());
        if command.is_empty() {
            return Err(KubeError::Target(format!("{what}: no command given")));
        }
        let api = self.pods();
        let mut params = AttachParams::default().stdin(false).stdout(true).stderr(true);
        if let Some(c) = container {
            params = params.container(c);
        }
        let run = async {
            let mut proc = api
                .exec(pod, command.iter().map(String::as_str), &params)
                .await
                .map_err(|e| KubeError::from_kube(what.clone(), e))?;
            let (Some(mut out), Some(mut err)) = (proc.stdout(), proc.stderr()) else {
                return Err(KubeError::Transport {
                    what: what.clone(),
                    detail: "no stdout/stderr streams were opened".into(),
                });
            };
            let status = proc.take_status();
            // Both pipes are small: drain them together or the remote side stalls.
            let mut stdout = Vec::new();
            let mut stderr = Vec::new();
            let (r1, r2) = tokio::join!(out.read_to_end(&mut stdout), err.read_to_end(&mut stderr));
            r1.and(r2).map_err(|e| KubeError::Transport {
                what: what.clone(),
                detail: format!("reading output: {e}"),
            })?;
            let status = match status {
                Some(s) => s.await,
                None => None,
            };
            let exit_code = exit_code_of(status.as_ref()).map_err(|detail| KubeError::Transport {
                what: what.clone(),
                detail,
            })?;
            let _ = proc.join().await;
            Ok(ExecOutput {
                stdout,
                stderr,
                exit_code,
            })
        };
        match tokio::time::timeout(deadline, run).await {
            Ok(r) => r,
            Err(_) => Err(KubeError::Timeout {
                what: format!("{what} (command did not finish within {})", humanize(deadline)),
                timeout: deadline,
            }),
        }
    }
}

/// Exit code from the exec status channel: Success → 0; NonZeroExitCode carries it in a cause.
fn exit_code_of(status: Option<&k8s_openapi::apimachinery::pkg::apis::meta::v1::Status>) -> Result<i32, String> {
    let Some(status) = status else {
        return Err("the connection closed without an exit status".into());
    };
    if status.status.as_deref() == Some("Success") {
        return Ok(0);
    }
    let code = status
        .details
        .as_ref()
        .and_then(|d| d.causes.as_ref())
        .into_iter()
        .flatten()
        .find(|c| c.reason.as_deref() == Some("ExitCode"))
        .and_then(|c| c.message.as_deref())
        .and_then(|m| m.trim().parse::<i32>().ok());
    code.ok_or_else(|| {
        format!(
            "command failed to run: {}",
            one_line(status.message.as_deref().unwrap_or("no message from the API server"))
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Status, StatusCause, StatusDetails};

    #[test]
    fn exit_codes_from_status() {
        let ok = Status {
            status: Some("Success".into()),
            ..Default::default()
        };
        assert_eq!(exit_code_of(Some(&ok)), Ok(0));
        let three = Status {
            status: Some("Failure".into()),
            reason: Some("NonZeroExitCode".into()),
            details: Some(StatusDetails {
                causes: Some(vec![StatusCause {
                    reason: Some("ExitCode".into()),
                    message: Some("3".into()),
                    ..Default::default()
                }]),
                ..Default::default()
            }),
            ..Default::default()
        };
        assert_eq!(exit_code_of(Some(&three)), Ok(3));
        let broken = Status {
            status: Some("Failure".into()),
            message: Some("exec: \"nope\": executable file not found".into()),
            ..Default::default()
        };
        assert!(
            exit_code_of(Some(&broken))
                .unwrap_err()
                .contains("executable file not found")
        );
        assert!(exit_code_of(None).is_err());
    }
}
