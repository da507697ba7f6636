//! Cluster access the way kubectl users expect it, plus the deadline every API call runs under.
//!
//! Resolution order: `--kubeconfig FILE` (that file only), else `$KUBECONFIG` (a merged list),
//! else `~/.kube/config`, else the in-cluster service account. `--context` picks a context,
//! `-n` overrides the context's namespace. Tests hand [`connect`] the emulated cluster's
//! kubeconfig, so product code never knows the difference.

use crate::error::{KubeError, humanize};
use k8s_openapi::api::core::v1::Pod;
use kube::config::{KubeConfigOptions, Kubeconfig};
use std::future::Future;
use std::path::PathBuf;
use std::time::Duration;

/// What `ClusterArgs` (`--kubeconfig`, `--context`, `-n`, `--request-timeout`) carry.
#[derive(Debug, Clone)]
pub struct ClusterOptions {
    pub kubeconfig: Option<PathBuf>,
    pub context: Option<String>,
    pub namespace: Option<String>,
    /// Deadline for each API request, kube's own retries included.
    pub request_timeout: Duration,
}

impl Default for ClusterOptions {
    fn default() -> Self {
        ClusterOptions {
            kubeconfig: None,
            context: None,
            namespace: None,
            request_timeout: Duration::from_secs(30),
        }
    }
}

/// A connected client, the namespace ic-bench works in, and the per-request deadline.
#[derive(Clone)]
pub struct Cluster {
    client: kube::Client,
    namespace: String,
    request_timeout: Duration,
    /// The API server's URL as the kubeconfig names it, for "cannot reach" errors.
    server: String,
}

/// How long connection-level failures (refused, DNS, TLS) are retried before giving up: long
/// enough to ride out an API server restart's blip, short enough that a wrong kubeconfig is
/// reported at once instead of after the whole request deadline.
pub const UNREACHABLE_RETRY_WINDOW: Duration = Duration::from_secs(3);

/// A single connect attempt may not take longer than this (a black-holed address would otherwise
/// hang each attempt for the whole request deadline).
const CONNECT_TIMEOUT_CAP: Duration = Duration::from_secs(10);

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("namespace", &self.namespace)
            .field("request_timeout", &self.request_timeout)
            .field("server", &self.server)
            .finish_non_exhaustive()
    }
}

/// Loads the client configuration (see the module docs for the order).
pub async fn load_config(opts: &ClusterOptions) -> Result<kube::Config, KubeError> {
    let kopts = KubeConfigOptions {
        context: opts.context.clone(),
        ..Default::default()
    };
    let mut config = if let Some(path) = &opts.kubeconfig {
        let kc = Kubeconfig::read_from(path).map_err(|e| {
            KubeError::Config(format!(
                "cannot read --kubeconfig {}: {}",
                path.display(),
                crate::error::one_line(&e.to_string())
            ))
        })?;
        kube::Config::from_custom_kubeconfig(kc, &kopts).await.map_err(|e| {
            KubeError::Config(format!(
                "kubeconfig {}: {}",
                path.display(),
                crate::error::one_line(&e.to_string())
            ))
        })?
    } else if user_kubeconfig_present() {
        kube::Config::from_kubeconfig(&kopts).await.map_err(|e| {
            KubeError::Config(format!(
                "kubeconfig ($KUBECONFIG or ~/.kube/config): {}",
                crate::error::one_line(&e.to_string())
            ))
        })?
    } else {
        if let Some(ctx) = &opts.context {
            return Err(KubeError::Config(format!(
                "--context {ctx} needs a kubeconfig, but none was found: pass --kubeconfig FILE or set KUBECONFIG"
            )));
        }
        kube::Config::incluster().map_err(|e| {
            KubeError::Config(format!(
                "no kubeconfig found (--kubeconfig, $KUBECONFIG, ~/.kube/config) and not running in a pod ({}): pass --kubeconfig FILE",
                crate::error::one_line(&e.to_string())
            ))
        })?
    };
    config.connect_timeout = Some(opts.request_timeout.min(CONNECT_TIMEOUT_CAP));
    resolve_proxy(&mut config)?;
    if let Some(ns) = &opts.namespace {
        config.default_namespace = ns.clone();
    }
    Ok(config)
}

/// Builds a client from [`ClusterOptions`]; the namespace is `-n`, else the context's.
pub async fn connect(opts: &ClusterOptions) -> Result<Cluster, KubeError> {
    let config = load_config(opts).await?;
    let namespace = config.default_namespace.clone();
    let server = config.cluster_url.to_string().trim_end_matches('/').to_string();
    let client = kube::Client::try_from(config).map_err(|e| {
        KubeError::Config(format!(
            "cannot build a Kubernetes client: {}",
            crate::error::one_line(&e.to_string())
        ))
    })?;
    Ok(Cluster::from_client(client, namespace, opts.request_timeout).with_server(server))
}

fn user_kubeconfig_present() -> bool {
    let env_set = std::env::var_os("KUBECONFIG")
        .map(|v| std::env::split_paths(&v).any(|p| !p.as_os_str().is_empty()))
        .unwrap_or(false);
    env_set || home_kubeconfig().is_some_and(|p| p.exists())
}

fn home_kubeconfig() -> Option<PathBuf> {
    std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".kube").join("config"))
}

/// kube-rs reads HTTPS_PROXY on its own but this build has no proxy support (and kube only honours
/// NO_PROXY with it), so apply NO_PROXY here and otherwise say what to set.
fn resolve_proxy(config: &mut kube::Config) -> Result<(), KubeError> {
    let Some(proxy) = config.proxy_url.clone() else {
        return Ok(());
    };
    let host = config
        .cluster_url
        .host()
        .unwrap_or_default()
        .trim_matches(['[', ']'])
        .to_string();
    let no_proxy = std::env::var("NO_PROXY")
        .or_else(|_| std::env::var("no_proxy"))
        .unwrap_or_default();
    if bypasses_proxy(&host, &no_proxy) {
        config.proxy_url = None;
        return Ok(());
    }
    Err(KubeError::Config(format!(
        "a proxy ({proxy}) is configured for the API server {host}, but ic-bench talks to the API server directly: add {host} to NO_PROXY (or unset HTTPS_PROXY / the kubeconfig's proxy-url)"
    )))
}

/// NO_PROXY semantics as curl and Go use them: `*`, exact hosts/IPs, and domain suffixes.
pub(crate) fn bypasses_proxy(host: &str, no_proxy: &str) -> bool {
    if host == "localhost" || host.starts_with("127.") || host == "::1" {
        return true;
    }
    no_proxy
        .split(',')
        .map(str::trim)
        .filter(|e| !e.is_empty())
        .any(|entry| {
            if entry == "*" {
                return true;
            }
            let entry = entry.split(':').next().unwrap_or(entry);
            let bare = entry.trim_start_matches('.');
            host == bare || host.ends_with(&format!(".{bare}")) || cidr_contains(entry, host)
        })
}

fn cidr_contains(entry: &str, host: &str) -> bool {
    let (Some((net, bits)), Ok(ip)) = (entry.split_once('/'), host.parse::<std::net::Ipv4Addr>()) else {
        return false;
    };
    let (Ok(net), Ok(bits)) = (net.parse::<std::net::Ipv4Addr>(), bits.parse::<u32>()) else {
        return false;
    };
    if bits > 32 {
        return false;
    }
    let mask = if bits == 0 { 0 } else { u32::MAX << (32 - bits) };
    u32::from(ip) & mask == u32::from(net) & mask
}

impl Cluster {
    /// Wraps an already-built client (e.g. one tests made by hand).
    pub fn from_client(client: kube::Client, namespace: impl Into<String>, request_timeout: Duration) -> Self {
        Cluster {
            client,
            namespace: namespace.into(),
            request_timeout,
            server: String::new(),
        }
    }

    /// Names the API server in "cannot reach" errors (`connect` sets it from the kubeconfig).
    pub fn with_server(mut self, server: impl Into<String>) -> Self {
        self.server = server.into();
        self
    }

    /// The API server's address as the kubeconfig names it (empty for a client built in code).
    pub fn server(&self) -> &str {
        &self.server
    }

    pub fn client(&self) -> &kube::Client {
        &self.client
    }

    /// The namespace bench pods are created in and `pod/NAME` is looked up in.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    pub fn request_timeout(&self) -> Duration {
        self.request_timeout
    }

    /// The same client working in another namespace.
    pub fn with_namespace(&self, namespace: impl Into<String>) -> Self {
        Cluster {
            namespace: namespace.into(),
            ..self.clone()
        }
    }

    /// Pods in this cluster's namespace.
    pub fn pods(&self) -> kube::Api<Pod> {
        kube::Api::namespaced(self.client.clone(), &self.namespace)
    }

    /// Runs one API call under the request deadline, retrying transient failures (500/502/503/504,
    /// 429, connections lost mid-request) until that deadline. A server that cannot be reached at
    /// all (refused, DNS, TLS) is retried only for [`UNREACHABLE_RETRY_WINDOW`], then reported as
    /// [`KubeError::Unreachable`]. `make` is called once per attempt.
    pub async fn call<T, F, Fut>(&self, what: &str, mut make: F) -> Result<T, KubeError>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<T, kube::Error>>,
    {
        let started = tokio::time::Instant::now();
        let deadline = started + self.request_timeout;
        let unreachable_until = (started + UNREACHABLE_RETRY_WINDOW).min(deadline);
        let mut delays = crate::retry::api_backoff();
        let mut last: Option<KubeError> = None;
        loop {
            let now = tokio::time::Instant::now();
            if now >= deadline {
                return Err(last_or_timeout(last, what, self.request_timeout));
            }
            let mut retry_until = deadline;
            let backoff = delays.next_delay();
            match tokio::time::timeout_at(deadline, make()).await {
                Err(_) => return Err(last_or_timeout(last, what, self.request_timeout)),
                Ok(Ok(v)) => return Ok(v),
                Ok(Err(e)) => {
                    let err = KubeError::from_kube(what, e).at_server(&self.server);
                    if err.is_unreachable() {
                        retry_until = unreachable_until;
                        if tokio::time::Instant::now() + backoff >= unreachable_until {
                            return Err(err);
                        }
                    } else if !err.is_transient() {
                        return Err(err);
                    }
                    tracing::debug!("{err}; retrying");
                    last = Some(err);
                }
            }
            let wake = (tokio::time::Instant::now() + backoff).min(retry_until);
            tokio::time::sleep_until(wake).await;
        }
    }
}

/// A deadline that passed while the server kept failing reports the failure, which says more.
fn last_or_timeout(last: Option<KubeError>, what: &str, timeout: Duration) -> KubeError {
    match last {
        Some(KubeError::Api {
            what: w,
            code,
            reason,
            message,
        }) => KubeError::Api {
            what: w,
            code,
            reason,
            message: format!("{message}; still failing after retrying for {}", humanize(timeout)),
        },
        Some(other) => other,
        None => KubeError::Timeout {
            what: what.to_string(),
            timeout,
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_proxy_matching() {
        assert!(bypasses_proxy("127.0.0.1", ""));
        assert!(bypasses_proxy("api.example.com", "example.com"));
        assert!(bypasses_proxy("api.example.com", ".example.com"));
        assert!(bypasses_proxy("10.1.2.3", "10.0.0.0/8"));
        assert!(bypasses_proxy("10.1.2.3", "foo,*"));
        assert!(!bypasses_proxy("10.1.2.3", "192.168.0.0/16,example.com"));
        assert!(!bypasses_proxy("notexample.com", "example.com"));
    }

    #[tokio::test]
    async fn kubeconfig_flag_reads_that_file_only() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kc");
        std::fs::write(
            &path,
            "apiVersion: v1\nkind: Config\ncurrent-context: a\nclusters:\n- name: c\n  cluster:\n    server: http://127.0.0.1:1\ncontexts:\n- name: a\n  context:\n    cluster: c\n    user: u\n    namespace: team-a\n- name: b\n  context:\n    cluster: c\n    user: u\n    namespace: team-b\nusers:\n- name: u\n  user: {}\n",
        )
        .unwrap();
        let mut opts = ClusterOptions {
            kubeconfig: Some(path.clone()),
            ..Default::default()
        };
        let cfg = load_config(&opts).await.unwrap();
        assert_eq!(cfg.default_namespace, "team-a");
        opts.context = Some("b".into());
        assert_eq!(load_config(&opts).await.unwrap().default_namespace, "team-b");
        opts.namespace = Some("override".into());
        assert_eq!(load_config(&opts).await.unwrap().default_namespace, "override");
        opts.context = Some("nope".into());
        let err = load_config(&opts).await.unwrap_err().to_string();
        assert!(err.contains("nope"), "{err}");
        opts.kubeconfig = Some(dir.path().join("missing"));
        let err = load_config(&opts).await.unwrap_err().to_string();
        assert!(err.contains("cannot read --kubeconfig"), "{err}");
    }

    #[tokio::test]
    async fn a_refused_connection_fails_fast_and_creates_nothing() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("kc");
        std::fs::write(
            &path,
            format!("apiVersion: v1\nkind: Config\ncurrent-context: a\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:{port}\ncontexts:\n- name: a\n  context:\n    cluster: c\n    user: u\n    namespace: ns\nusers:\n- name: u\n  user: {{}}\n"),
        )
        .unwrap();
        let cluster = connect(&ClusterOptions {
            kubeconfig: Some(path),
            request_timeout: Duration::from_secs(300),
            ..Default::default()
        })
        .await
        .unwrap();
        let pod: Pod = serde_json::from_value(serde_json::json!({"metadata": {"name": "p"}})).unwrap();
        let maybe_created = std::sync::atomic::AtomicBool::new(false);
        // Bounded well below the 300s request timeout: only the short unreachable window applies.
        let err = tokio::time::timeout(
            Duration::from_secs(60),
            crate::lifecycle::create_pod_tracked(&cluster, &pod, &maybe_created),
        )
        .await
        .expect("a refused connection was retried for the whole request timeout")
        .unwrap_err();
        assert!(err.is_unreachable(), "{err}");
        assert_eq!(
            err.to_string(),
            format!(
                "cannot reach the Kubernetes API at https://127.0.0.1:{port} (connection refused): check --kubeconfig/--context"
            )
        );
        assert!(!maybe_created.load(std::sync::atomic::Ordering::SeqCst));
    }
}
