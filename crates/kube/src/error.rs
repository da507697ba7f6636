//! One error type whose messages are single lines that say what to fix.

use std::time::Duration;

/// Everything that can go wrong talking to a cluster or running bench pods there.
#[derive(Debug, thiserror::Error)]
pub enum KubeError {
    /// The kubeconfig / in-cluster credentials could not be loaded.
    #[error("{0}")]
    Config(String),

    /// A call did not complete within its deadline (kube's own 429/503 retries included).
    #[error(
        "{what}: no successful answer within {} (the API server is unreachable, slow, or answering 429/503 throttling); check the cluster or raise --request-timeout",
        humanize(*.timeout)
    )]
    Timeout { what: String, timeout: Duration },

    /// The API server answered with an error status.
    #[error("{what}: {message} (HTTP {code}, {reason}){}", hint_for(*.code, message))]
    Api {
        what: String,
        code: u16,
        reason: String,
        message: String,
    },

    /// Transport-level failure (connection refused, TLS, bad response).
    #[error("{what}: {detail}; check that the API server in your kubeconfig is reachable")]
    Transport { what: String, detail: String },

    /// A target (`node/NAME`, `pod/NAME`, …) was malformed or could not be resolved.
    #[error("{0}")]
    Target(String),

    /// A bench pod could not be scheduled, started or finished as expected.
    #[error("{0}")]
    Pod(String),

    /// The run was stopped (Ctrl-C / SIGTERM); the text says what was cleaned up.
    #[error("interrupted: {0}")]
    Interrupted(String),

    /// The bench pods' output was not what `ic-bench serve` / `connect` print.
    #[error("{0}")]
    Output(String),
}

impl KubeError {
    /// HTTP status when the API server answered with an error.
    pub fn status_code(&self) -> Option<u16> {
        match self {
            KubeError::Api { code, .. } => Some(*code),
            _ => None,
        }
    }

    pub fn is_not_found(&self) -> bool {
        self.status_code() == Some(404)
    }

    /// Worth another try within the same deadline: server-side hiccups and lost connections.
    pub fn is_transient(&self) -> bool {
        match self {
            KubeError::Api { code, .. } => matches!(code, 429 | 500 | 502 | 503 | 504),
            KubeError::Transport { .. } => true,
            _ => false,
        }
    }

    /// Converts a kube-rs error, naming the call that failed.
    pub fn from_kube(what: impl Into<String>, err: kube::Error) -> Self {
        let what = what.into();
        match err {
            kube::Error::Api(status) => KubeError::Api {
                what,
                code: status.code,
                reason: status.reason.clone(),
                message: one_line(&status.message),
            },
            other => KubeError::Transport {
                what,
                detail: error_chain(&other),
            },
        }
    }
}

/// The error and its causes ("client error (Connect): tcp connect error: Connection refused"),
/// skipping causes already spelled out by the level above.
fn error_chain(err: &(dyn std::error::Error + 'static)) -> String {
    let mut parts: Vec<String> = Vec::new();
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = cur {
        let text = one_line(&e.to_string());
        let text = text.strip_prefix("ServiceError: ").unwrap_or(&text).to_string();
        if !parts.last().is_some_and(|p| p.contains(&text)) && !text.is_empty() {
            parts.push(text);
        }
        cur = e.source();
    }
    parts.join(": ")
}

fn hint_for(code: u16, message: &str) -> &'static str {
    match code {
        401 => "; your credentials were rejected: refresh the kubeconfig's user token",
        403 if message.contains("PodSecurity") => {
            "; the namespace's Pod Security level forbids what the bench pod copies (host namespaces, privileged, capabilities): use a namespace labelled pod-security.kubernetes.io/enforce=privileged, or a plainer reference"
        }
        403 => "; the account lacks RBAC permission: apply manifests/rbac.yaml for ic-bench's ServiceAccount",
        _ => "",
    }
}

/// Collapses whitespace so a multi-line server message stays on one line.
pub(crate) fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

pub(crate) fn humanize(d: Duration) -> String {
    if d.subsec_millis() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{:.1}s", d.as_secs_f64())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn forbidden_hints_tell_rbac_from_pod_security() {
        let api = |message: &str| KubeError::Api {
            what: "create pod ns/p".into(),
            code: 403,
            reason: "Forbidden".into(),
            message: message.into(),
        };
        let rbac =
            api("pods is forbidden: User \"system:serviceaccount:x:y\" cannot create resource \"pods\"").to_string();
        assert!(rbac.contains("apply manifests/rbac.yaml"), "{rbac}");
        let psa =
            api("pods \"p\" is forbidden: violates PodSecurity \"baseline:latest\": host namespaces (hostIPC=true)")
                .to_string();
        assert!(
            psa.contains("pod-security.kubernetes.io/enforce=privileged") && !psa.contains("rbac"),
            "{psa}"
        );
    }
}
