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
    #[error("{what}: {message} (HTTP {code}, {reason}){}", hint_for(*.code))]
    Api {
        what: String,
        code: u16,
        reason: String,
        message: String,
    },

    /// No connection to the API server at all (refused, DNS, TLS, unreachable): retrying for the
    /// whole deadline would only hide a wrong kubeconfig, so this fails fast.
    #[error("cannot reach the Kubernetes API at {server} ({reason}): check --kubeconfig/--context")]
    Unreachable { server: String, reason: String },

    /// Transport-level failure after a connection was made (reset mid-stream, bad response).
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

    /// A pod will not start on its own: unschedulable, image pull failure, crash loop … (the text
    /// names the pod, the reason and the fix). Callers tell "cannot place a bench pod here" from a
    /// fabric failure by this variant.
    #[error("{0}")]
    Stuck(String),

    /// The namespace refused a pod at admission (HTTP 403): the text names the Pod Security
    /// label or the flag that lets it in ([`crate::admission`]).
    #[error("{0}")]
    Refused(String),

    /// A wait on a pod reached the run's deadline.
    #[error(
        "pod {pod}: gave up waiting at the --timeout deadline (last seen: {last_seen}); raise --timeout or check the node"
    )]
    Deadline { pod: String, last_seen: String },
}

/// A name, label value, selector or run id given to ic-bench that Kubernetes would refuse:
/// the one line names it and what is allowed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidName {
    #[error("'{0}' is not a valid object name (lowercase letters, digits, '-' and '.')")]
    Object(String),
    #[error("'{0}' is not a valid component name")]
    Component(String),
    #[error("--run-id '{0}': use 1-40 lowercase letters, digits and '-'")]
    RunId(String),
    #[error("the label selector is empty")]
    EmptySelector,
    #[error("the label selector spans several lines")]
    MultilineSelector,
}

/// For callers that keep a message (`LaunchError::new` takes `impl Into<String>`).
impl From<InvalidName> for String {
    fn from(e: InvalidName) -> String {
        e.to_string()
    }
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

    /// 409 AlreadyExists (not a Conflict on an update).
    pub fn is_already_exists(&self) -> bool {
        matches!(self, KubeError::Api { code: 409, reason, .. } if reason == "AlreadyExists")
    }

    /// Worth another try within the same deadline: server-side hiccups and lost connections.
    pub fn is_transient(&self) -> bool {
        match self {
            KubeError::Api { code, .. } => matches!(code, 429 | 500 | 502 | 503 | 504),
            KubeError::Transport { .. } => true,
            _ => false,
        }
    }

    /// The API server could not be reached or kept failing beyond the retries of one call
    /// (unreachable, timing out, a broken connection, 429/5xx): no pod's or node's fault.
    pub fn cluster_level(&self) -> bool {
        match self {
            KubeError::Unreachable { .. } | KubeError::Timeout { .. } | KubeError::Transport { .. } => true,
            KubeError::Api { code, .. } => *code == 429 || *code >= 500,
            _ => false,
        }
    }

    /// Never reached the server (refused, DNS, TLS, connect timeout): the request was not sent.
    pub fn is_unreachable(&self) -> bool {
        matches!(self, KubeError::Unreachable { .. })
    }

    /// Converts a kube-rs error, naming the call that failed.
    pub fn from_kube(what: impl Into<String>, err: kube::Error) -> Self {
        let what = what.into();
        match err {
            // Every API server error is a Status document with `metadata`; kube-rs makes one up
            // (without it) when the body was something else: a web server, a proxy's page.
            kube::Error::Api(status) if status.metadata.is_none() => KubeError::Api {
                what,
                code: status.code,
                reason: "not a Kubernetes API server".into(),
                message: format!(
                    "the server answered with {}, not a Kubernetes Status: check that the kubeconfig's server is the cluster's API server",
                    describe_body(&status.message)
                ),
            },
            kube::Error::Api(status) => KubeError::Api {
                what,
                code: status.code,
                reason: status.reason.clone(),
                message: one_line(&status.message),
            },
            other => match connect_failure(&other) {
                Some(reason) => KubeError::Unreachable {
                    server: String::new(),
                    reason,
                },
                None => KubeError::Transport {
                    what,
                    detail: error_chain(&other),
                },
            },
        }
    }

    /// Fills in the API server's address of an [`KubeError::Unreachable`] made by `from_kube`.
    pub(crate) fn at_server(self, server: &str) -> Self {
        match self {
            KubeError::Unreachable { reason, .. } => KubeError::Unreachable {
                server: if server.is_empty() {
                    "the configured server".to_string()
                } else {
                    server.to_string()
                },
                reason,
            },
            other => other,
        }
    }
}

/// True when the call failed before a connection to the API server existed (the request was
/// never sent), as [`KubeError::Unreachable`] classifies it.
pub(crate) fn never_connected(err: &kube::Error) -> bool {
    !matches!(err, kube::Error::Api(_)) && connect_failure(err).is_some()
}

/// Why a connection to the API server could not be made at all, or `None` when it was made (or
/// the failure is of another kind). Decided on types: hyper-util's client error of the connect
/// kind (every connector failure, DNS and the TLS handshake included) or an I/O error whose kind
/// is a connection failure. The words of the reason come from the innermost cause, with the
/// resolver's and the TLS library's recognised for a clearer prefix (presentation only).
fn connect_failure(err: &(dyn std::error::Error + 'static)) -> Option<String> {
    let mut connect = false;
    let mut reason: Option<String> = None;
    let mut innermost = String::new();
    let mut dns = false;
    let mut cur: Option<&(dyn std::error::Error + 'static)> = Some(err);
    while let Some(e) = cur {
        if e.downcast_ref::<hyper_util::client::legacy::Error>()
            .is_some_and(hyper_util::client::legacy::Error::is_connect)
        {
            connect = true;
        }
        if let Some(io) = e.downcast_ref::<std::io::Error>() {
            use std::io::ErrorKind as K;
            let why = match io.kind() {
                K::ConnectionRefused => Some("connection refused"),
                K::HostUnreachable => Some("host unreachable"),
                K::NetworkUnreachable => Some("network unreachable"),
                K::AddrNotAvailable => Some("address not available"),
                K::TimedOut if connect => Some("connect timed out"),
                _ => None,
            };
            if let Some(why) = why {
                connect = true;
                reason.get_or_insert_with(|| why.to_string());
            }
        }
        let text = e.to_string();
        let lower = text.to_ascii_lowercase();
        if lower.contains("dns error") || lower.contains("failed to lookup address") {
            dns = true;
        }
        if lower.contains("certificate") || lower.contains("tls handshake") || lower.contains("invalidcontenttype") {
            reason.get_or_insert_with(|| format!("TLS handshake failed: {}", one_line(&text)));
        }
        if !text.trim().is_empty() {
            innermost = one_line(&text);
        }
        cur = e.source();
    }
    if !connect {
        return None;
    }
    if dns && reason.is_none() {
        // The resolver's own words ("Name or service not known") are the innermost cause.
        return Some(format!("DNS lookup failed: {innermost}"));
    }
    Some(reason.unwrap_or(innermost))
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

/// A hint by the status code alone (the text is the server's: never decided on); a Pod Security
/// refusal of our own pods is told apart before this, by [`crate::admission`].
fn hint_for(code: u16) -> &'static str {
    match code {
        401 => "; your credentials were rejected: refresh the kubeconfig's user token",
        403 => {
            "; the account lacks RBAC permission (apply manifests/rbac.yaml for ic-bench's ServiceAccount), or an admission policy of the namespace (a ResourceQuota, a webhook) refused the object"
        }
        _ => "",
    }
}

/// A short description of a body that is not a Kubernetes Status: an HTML page by its title, an
/// empty body as such, other text by its first words (a page never floods the one error line).
fn describe_body(body: &str) -> String {
    let body = one_line(body);
    if body.is_empty() {
        return "an empty body".into();
    }
    let lower = body.to_ascii_lowercase();
    if lower.starts_with('<') {
        let title = lower
            .find("<title>")
            .and_then(|start| {
                lower[start + 7..]
                    .find("</title>")
                    .map(|len| &body[start + 7..start + 7 + len])
            })
            .map(str::trim)
            .filter(|t| !t.is_empty());
        return match title {
            Some(t) => format!("an HTML page ('{}')", truncate(t, 60)),
            None => "an HTML page".into(),
        };
    }
    format!("'{}'", truncate(&body, 60))
}

fn truncate(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &text[..i]),
        None => text.to_string(),
    }
}

/// Collapses whitespace so a multi-line server message stays on one line.
pub(crate) fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// The one duration rule (`icb_core::units::format_duration`).
pub(crate) fn humanize(d: Duration) -> String {
    icb_core::units::format_duration(d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_closed_port_and_an_unknown_host_are_unreachable_by_the_errors_kind() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        for (url, want) in [
            (format!("http://127.0.0.1:{port}"), "connection refused"),
            (
                "http://no-such-api-server.invalid:6443".to_string(),
                "DNS lookup failed",
            ),
        ] {
            let err = rt.block_on(async {
                let config = kube::Config::new(url.parse().unwrap());
                let client = kube::Client::try_from(config).unwrap();
                let api: kube::Api<k8s_openapi::api::core::v1::Node> = kube::Api::all(client);
                api.list(&Default::default()).await.unwrap_err()
            });
            assert!(never_connected(&err), "{url}: {err:?}");
            match KubeError::from_kube("list nodes", err) {
                KubeError::Unreachable { reason, .. } => assert!(reason.starts_with(want), "{url}: {reason}"),
                other => panic!("{url}: {other:?}"),
            }
        }
    }

    #[test]
    fn a_web_server_at_the_kubeconfig_url_is_named_not_dumped() {
        let html =
            "<!DOCTYPE HTML>\n<html><head><title>Error response</title></head>\n<body><h1>404</h1></body></html>";
        let foreign = kube::core::Status::failure(html, "Failed to parse error data").with_code(404);
        let e = KubeError::from_kube("list nodes", kube::Error::Api(foreign.boxed())).to_string();
        assert!(e.contains("an HTML page ('Error response')"), "{e}");
        assert!(e.contains("not a Kubernetes API server"), "{e}");
        assert!(!e.contains("<html") && !e.contains("<h1>"), "{e}");
        let empty = kube::core::Status::failure("", "Failed to parse error data").with_code(502);
        let e = KubeError::from_kube("list nodes", kube::Error::Api(empty.boxed()));
        assert_eq!(e.status_code(), Some(502), "still retryable by code");
        assert!(e.to_string().contains("an empty body"), "{e}");
        // A real API server's Status (it always carries metadata) keeps its own words.
        let mut real = kube::core::Status::failure("nodes \"x\" not found", "NotFound").with_code(404);
        real.metadata = Some(Default::default());
        let e = KubeError::from_kube("get node x", kube::Error::Api(real.boxed())).to_string();
        assert!(e.contains("nodes \"x\" not found (HTTP 404, NotFound)"), "{e}");
    }

    #[test]
    fn a_forbidden_call_names_rbac_and_admission_by_its_code_alone() {
        let api = |message: &str| KubeError::Api {
            what: "create pod ns/p".into(),
            code: 403,
            reason: "Forbidden".into(),
            message: message.into(),
        };
        let rbac =
            api("pods is forbidden: User \"system:serviceaccount:x:y\" cannot create resource \"pods\"").to_string();
        assert!(rbac.contains("apply manifests/rbac.yaml"), "{rbac}");
        let quota = api("pods \"p\" is forbidden: failed quota: q: must specify limits.cpu for: bench").to_string();
        assert!(quota.contains("a ResourceQuota"), "{quota}");
        assert!(crate::admission::is_forbidden(&api("anything")));
    }
}
