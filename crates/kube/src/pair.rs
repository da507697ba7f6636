//! One pair run on Kubernetes: resolve both targets, start the server (decode side), learn its
//! port from its log, start the client (prefill side) against the server pod's IP, read the
//! client's JSON report, and delete both pods on every path — success, failure, deadline, or an
//! interrupt (Ctrl-C / SIGTERM, passed in as a future).

use crate::access::Cluster;
use crate::error::{KubeError, one_line};
use crate::lifecycle::{self, PodState};
use crate::podspec::{self, BenchPod, Role, SERVER_ENV, SERVER_PLACEHOLDER};
use crate::spec::TransportSpec;
use crate::target::{self, Resolved, Target};
use icb_core::model::{Endpoint, Locality, PAIR_SCHEMA, PairReport, Placement};
use k8s_openapi::api::core::v1::{EnvVar, Pod};
use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::time::Instant;

/// What the user asked for.
#[derive(Debug, Clone)]
pub struct PairPlan {
    pub prefill: Target,
    pub decode: Target,
    pub run_id: String,
    pub image: String,
    pub image_pull_policy: Option<String>,
    /// Flags after `ic-bench serve --listen 0.0.0.0:0 --once`.
    pub serve_args: Vec<String>,
    /// Flags after `ic-bench connect $(IC_BENCH_SERVER)` (the run settings); `--json-line` is added.
    pub connect_args: Vec<String>,
    pub privileged: bool,
    pub host_ipc: bool,
    pub host_pid: bool,
    pub service_account: Option<String>,
    /// Deadline for the whole run (scheduling, start, transfer); cleanup has its own.
    pub timeout: Duration,
    /// Deadline for deleting the pods afterwards.
    pub cleanup_timeout: Duration,
}

impl PairPlan {
    /// Pods outlive a killed ic-bench by at most this much (activeDeadlineSeconds).
    pub fn active_deadline_s(&self) -> i64 {
        (self.timeout.as_secs() + 60) as i64
    }
}

/// Targets resolved and both pods decided; what `--dry-run` prints and a real run creates.
#[derive(Debug, Clone)]
pub struct Prepared {
    pub namespace: String,
    pub decode: Resolved,
    pub prefill: Resolved,
    pub server: BenchPod,
    pub client: BenchPod,
    /// What was not copied from the reference pods, and which pod a selector picked.
    pub notes: Vec<String>,
}

impl Prepared {
    pub fn server_pod(&self) -> Pod {
        self.server.build()
    }

    /// The client pod for a server address (`SERVER_PLACEHOLDER` in a dry run).
    pub fn client_pod(&self, server_address: &str) -> Pod {
        let mut c = self.client.clone();
        c.env.push(EnvVar {
            name: SERVER_ENV.into(),
            value: Some(server_address.into()),
            ..Default::default()
        });
        c.build()
    }

    /// Both objects as a multi-document YAML stream, exactly what a real run creates (the client's
    /// server address aside, which exists only once the server runs).
    pub fn to_yaml(&self) -> Result<String, KubeError> {
        let mut out = String::new();
        for pod in [self.server_pod(), self.client_pod(SERVER_PLACEHOLDER)] {
            let mut value =
                serde_json::to_value(&pod).map_err(|e| KubeError::Output(format!("cannot render pod: {e}")))?;
            strip_nulls(&mut value);
            if let serde_json::Value::Object(map) = &mut value {
                // apiVersion/kind first, as kubectl prints them.
                let mut ordered = serde_json::Map::new();
                ordered.insert("apiVersion".into(), "v1".into());
                ordered.insert("kind".into(), "Pod".into());
                for (k, v) in std::mem::take(map) {
                    ordered.entry(k).or_insert(v);
                }
                *map = ordered;
            }
            out.push_str("---\n");
            out.push_str(
                &serde_saphyr::to_string(&value).map_err(|e| KubeError::Output(format!("cannot render YAML: {e}")))?,
            );
        }
        Ok(out)
    }
}

fn strip_nulls(v: &mut serde_json::Value) {
    match v {
        serde_json::Value::Object(m) => {
            m.retain(|_, x| !x.is_null());
            m.values_mut().for_each(strip_nulls);
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(strip_nulls),
        _ => {}
    }
}

/// Resolves the targets and decides both pods (reads the reference pods; creates nothing).
pub async fn prepare(cluster: &Cluster, plan: &PairPlan) -> Result<Prepared, KubeError> {
    podspec::check_run_id(&plan.run_id).map_err(KubeError::Target)?;
    let decode = target::resolve(cluster, &plan.decode).await?;
    let prefill = target::resolve(cluster, &plan.prefill).await?;
    let mut notes = Vec::new();
    let mut model = |r: &Resolved, side: &str| -> Option<TransportSpec> {
        if let Some(n) = &r.note {
            notes.push(format!("{side}: {n}"));
        }
        r.reference.as_ref().map(|p| {
            let spec = TransportSpec::from_pod(p);
            notes.extend(spec.not_copied.iter().map(|n| format!("{side}: {n}")));
            spec
        })
    };
    let server_model = model(&decode, "decode");
    let client_model = model(&prefill, "prefill");
    let base = |role: Role, node: &str, args: Vec<String>, model: Option<TransportSpec>| BenchPod {
        run_id: plan.run_id.clone(),
        role,
        namespace: cluster.namespace().to_string(),
        node: node.to_string(),
        image: plan.image.clone(),
        image_pull_policy: plan.image_pull_policy.clone(),
        args,
        env: vec![],
        model,
        active_deadline_s: plan.active_deadline_s(),
        privileged: plan.privileged,
        host_ipc: plan.host_ipc,
        host_pid: plan.host_pid,
        service_account: plan.service_account.clone(),
    };
    let mut serve_args: Vec<String> = ["serve", "--listen", "0.0.0.0:0", "--once"].map(String::from).to_vec();
    serve_args.extend(plan.serve_args.iter().cloned());
    let mut connect_args = vec!["connect".to_string(), format!("$({SERVER_ENV})")];
    connect_args.extend(plan.connect_args.iter().cloned());
    connect_args.push("--json-line".into());
    Ok(Prepared {
        namespace: cluster.namespace().to_string(),
        server: base(Role::Server, &decode.node, serve_args, server_model),
        client: base(Role::Client, &prefill.node, connect_args, client_model),
        decode,
        prefill,
        notes,
    })
}

/// A finished run: the client's report with the placement filled in.
#[derive(Debug, Clone)]
pub struct PairOutcome {
    pub report: PairReport,
    pub notes: Vec<String>,
    /// Pods deleted at the end.
    pub deleted: Vec<String>,
    /// Time spent outside the measurement: create → verdict → cleanup minus the client's own run.
    pub orchestration: Duration,
}

/// Runs the pair; `interrupt` resolving (Ctrl-C) stops it. Pods are deleted on every path.
pub async fn run(
    cluster: &Cluster,
    prepared: &Prepared,
    plan: &PairPlan,
    interrupt: impl Future<Output = String>,
) -> Result<PairOutcome, KubeError> {
    let started = Instant::now();
    let until = started + plan.timeout;
    // The waits inside stop at `until` with a message naming the pod and its state; this outer
    // bound only catches what has no wait of its own, so it fires a little later.
    let maybe_created = AtomicBool::new(false);
    let body = tokio::time::timeout_at(
        until + Duration::from_secs(2),
        run_pods(cluster, prepared, until, &maybe_created),
    );
    let result = tokio::select! {
        r = body => match r {
            Ok(r) => r,
            Err(_) => Err(KubeError::Pod(format!(
                "the pair did not finish within --timeout {}; raise it or check the pods' nodes",
                lifecycle::deadline_text(plan.timeout)
            ))),
        },
        why = interrupt => Err(KubeError::Interrupted(why)),
    };
    // Nothing of this run can exist (no create ever reached the server): no cleanup, and no
    // cleanup error stacked on the real one.
    if result.is_err() && !maybe_created.load(Ordering::SeqCst) {
        return result;
    }
    // After an interrupt or a deadline a create may still be in flight: look twice.
    let settle = if result.is_ok() {
        Duration::ZERO
    } else {
        Duration::from_millis(300)
    };
    let cleanup = lifecycle::delete_matching_settled(
        cluster,
        &podspec::instance_selector(&plan.run_id),
        Instant::now() + plan.cleanup_timeout,
        settle,
    )
    .await;
    match (result, cleanup) {
        (Ok(mut ran), Ok(deleted)) => {
            ran.deleted = deleted;
            ran.orchestration = started
                .elapsed()
                .saturating_sub(Duration::from_secs_f64(ran.report.duration_s.max(0.0)));
            Ok(ran)
        }
        (Ok(_), Err(e)) => Err(e),
        (Err(KubeError::Interrupted(why)), Ok(deleted)) => Err(KubeError::Interrupted(format!(
            "{why}; deleted {} ic-bench pod(s) of run {}",
            deleted.len(),
            plan.run_id
        ))),
        (Err(e), Ok(_)) => Err(e),
        (Err(e), Err(c)) => Err(with_cleanup_failure(e, &c)),
    }
}

fn with_cleanup_failure(e: KubeError, cleanup: &KubeError) -> KubeError {
    match e {
        // The caller prints "interrupted: " itself; only the reason goes inside.
        KubeError::Interrupted(why) => KubeError::Interrupted(format!("{why}; also: {cleanup}")),
        _ => KubeError::Pod(format!("{e}; also: {cleanup}")),
    }
}

async fn run_pods(
    cluster: &Cluster,
    prepared: &Prepared,
    until: Instant,
    maybe_created: &AtomicBool,
) -> Result<PairOutcome, KubeError> {
    let server_pod = prepared.server_pod();
    let server_name = server_pod.metadata.name.clone().unwrap_or_default();
    lifecycle::create_pod_tracked(cluster, &server_pod, maybe_created).await?;
    let (server_running, server_ip) = lifecycle::wait_running(cluster, &server_name, until).await?;
    let port = lifecycle::read_listening_port(cluster, &server_name, until).await?;
    let address = join_host_port(&server_ip, port);

    let client_pod = prepared.client_pod(&address);
    let client_name = client_pod.metadata.name.clone().unwrap_or_default();
    // The server pod exists by now, so `maybe_created` stays set whatever this create does.
    lifecycle::create_pod_tracked(cluster, &client_pod, maybe_created).await?;

    // Wait for the client to finish; a server that dies first ends the wait early (after a short
    // grace for the client to notice and print its own error).
    let client_done = lifecycle::wait_finished(cluster, &client_name, until);
    let server_failed = watch_server_failure(cluster, &server_name, until);
    tokio::pin!(client_done);
    let (client_final, _client_ok) = tokio::select! {
        r = &mut client_done => r?,
        failure = server_failed => {
            let grace = (Instant::now() + Duration::from_secs(10)).min(until);
            match tokio::time::timeout_at(grace, &mut client_done).await {
                Ok(Ok(done)) => done,
                _ => return Err(KubeError::Pod(format!("the server (decode side) failed mid-run: {failure}"))),
            }
        }
    };

    let logs = lifecycle::read_logs(cluster, &client_name).await?;
    let mut report = match find_report(&logs) {
        Some(r) => r?,
        None => {
            let server_note = server_summary(cluster, &server_name).await;
            return Err(KubeError::Pod(format!(
                "the client (prefill side) pod {client_name} produced no report ({}){}{server_note}",
                lifecycle::exit_summary(&client_final),
                last_error_line(&logs).map(|l| format!(": {l}")).unwrap_or_default()
            )));
        }
    };

    let client_node = target::node_of(&client_final).unwrap_or_else(|| prepared.prefill.node.clone());
    let server_node = target::node_of(&server_running).unwrap_or_else(|| prepared.decode.node.clone());
    report.placement = Placement {
        locality: if client_node == server_node {
            Locality::SameHost
        } else {
            Locality::DifferentHosts
        },
        mode: "kubernetes".into(),
        prefill: Endpoint {
            host: client_node,
            pod: Some(client_name.clone()),
            namespace: Some(prepared.namespace.clone()),
            address: client_final.status.as_ref().and_then(|s| s.pod_ip.clone()),
            modelled_on: prepared.prefill.modelled_on.clone(),
        },
        decode: Endpoint {
            host: server_node,
            pod: Some(server_name),
            namespace: Some(prepared.namespace.clone()),
            address: Some(address),
            modelled_on: prepared.decode.modelled_on.clone(),
        },
    };
    Ok(PairOutcome {
        report,
        notes: prepared.notes.clone(),
        deleted: Vec::new(),
        orchestration: Duration::ZERO,
    })
}

/// Resolves only when the server pod fails or finishes badly; never on success.
async fn watch_server_failure(cluster: &Cluster, name: &str, until: Instant) -> String {
    let r = lifecycle::watch_pod(cluster, name, until, |pod| match lifecycle::pod_state(pod) {
        PodState::Terminated { success: false, detail } => lifecycle::Step::Done(format!("pod {name}: {detail}")),
        PodState::Stuck(why) => lifecycle::Step::Done(why),
        _ => lifecycle::Step::Continue,
    })
    .await;
    match r {
        Ok(why) => why,
        // The watch itself failing is not a server failure: let the client's wait decide.
        Err(_) => std::future::pending().await,
    }
}

async fn server_summary(cluster: &Cluster, name: &str) -> String {
    let api = cluster.pods();
    match tokio::time::timeout(cluster.request_timeout(), api.get(name)).await {
        Ok(Ok(p)) => match lifecycle::pod_state(&p) {
            PodState::Terminated { success: false, detail } => format!("; the server pod {name} failed: {detail}"),
            PodState::Stuck(why) => format!("; {why}"),
            _ => String::new(),
        },
        _ => String::new(),
    }
}

fn join_host_port(ip: &str, port: u16) -> String {
    if ip.contains(':') {
        format!("[{ip}]:{port}")
    } else {
        format!("{ip}:{port}")
    }
}

/// The last line of the log that is an `ic-bench.pair/v1` report (other lines are ignored).
pub fn find_report(logs: &str) -> Option<Result<PairReport, KubeError>> {
    let schema_major = PAIR_SCHEMA.rsplit_once('/').map(|(s, _)| s).unwrap_or(PAIR_SCHEMA);
    logs.lines().rev().map(str::trim).filter(|l| l.starts_with('{')).find_map(|l| {
        let v: serde_json::Value = serde_json::from_str(l).ok()?;
        let schema = v.get("schema")?.as_str()?.to_string();
        if !schema.starts_with(schema_major) {
            return None;
        }
        Some(if schema != PAIR_SCHEMA {
            Err(KubeError::Output(format!(
                "the client printed a report with schema {schema}, this ic-bench reads {PAIR_SCHEMA}: use a bench image of the same version (--image)"
            )))
        } else {
            serde_json::from_value::<PairReport>(v)
                .map_err(|e| KubeError::Output(format!("the client's report does not parse: {e}; use a bench image of the same version")))
        })
    })
}

/// The most useful line to quote from a failed pod's log: the last error, else the last line.
pub fn last_error_line(logs: &str) -> Option<String> {
    let lines: Vec<&str> = logs.lines().map(str::trim).filter(|l| !l.is_empty()).collect();
    lines
        .iter()
        .rev()
        .find(|l| l.contains("error"))
        .or(lines.last())
        .map(|l| one_line(l.trim_start_matches("ic-bench: error: ")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn report_line_is_found_among_other_output() {
        assert!(find_report("hello\nworld\n").is_none());
        let wrong = r#"{"schema":"ic-bench.pair/v2","x":1}"#;
        assert!(find_report(wrong).unwrap().is_err());
        let broken = r#"{"schema":"ic-bench.pair/v1","x":1}"#;
        let err = find_report(broken).unwrap().unwrap_err().to_string();
        assert!(err.contains("does not parse"), "{err}");
        assert!(find_report(r#"{"schema":"ic-bench.serve/v1"}"#).is_none());
    }

    #[test]
    fn error_lines() {
        assert_eq!(
            last_error_line("a\nic-bench: error: cannot reach 1.2.3.4:5\nbye\n").as_deref(),
            Some("cannot reach 1.2.3.4:5")
        );
        assert_eq!(last_error_line("a\nb\n").as_deref(), Some("b"));
        assert_eq!(last_error_line(""), None);
        assert_eq!(join_host_port("fd00::1", 5), "[fd00::1]:5");
    }
}

#[cfg(test)]
mod dry_run_tests {
    use super::*;
    use crate::target::Resolved;
    use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

    #[test]
    fn yaml_round_trips_into_the_same_pods() {
        let mut model = TransportSpec {
            source: "pod/ref".into(),
            container: "main".into(),
            host_ipc: true,
            shm: Some(Some(Quantity("8Gi".into()))),
            ..Default::default()
        };
        model.devices.insert("nvidia.com/gpu".into(), Quantity("2".into()));
        model.devices.insert("rdma/ib".into(), Quantity("1".into()));
        model.env.push(EnvVar {
            name: "UCX_TLS".into(),
            value: Some("rc,cuda_ipc,cuda_copy".into()),
            ..Default::default()
        });
        let resolved = |node: &str| Resolved {
            target: Target::Node(node.into()),
            node: node.into(),
            reference: None,
            modelled_on: None,
            note: None,
        };
        let pod = |role, args: &[&str], model| BenchPod {
            run_id: "r1".into(),
            role,
            namespace: "ns".into(),
            node: "gpu-1".into(),
            image: "img:1".into(),
            image_pull_policy: Some("IfNotPresent".into()),
            args: args.iter().map(|s| s.to_string()).collect(),
            env: vec![],
            model,
            active_deadline_s: 300,
            privileged: false,
            host_ipc: false,
            host_pid: false,
            service_account: None,
        };
        let prepared = Prepared {
            namespace: "ns".into(),
            decode: resolved("gpu-1"),
            prefill: resolved("gpu-1"),
            server: pod(Role::Server, &["serve", "--once"], Some(model)),
            client: pod(
                Role::Client,
                &["connect", "$(IC_BENCH_SERVER)", "--sizes", "8,1024"],
                None,
            ),
            notes: vec![],
        };
        let text = prepared.to_yaml().unwrap();
        let back = crate::yaml::pods(&text).unwrap();
        assert_eq!(back.len(), 2);
        assert_eq!(back[0], prepared.server_pod(), "{text}");
        assert_eq!(back[1], prepared.client_pod(SERVER_PLACEHOLDER), "{text}");
        assert!(text.starts_with("---\napiVersion: v1\nkind: Pod\n"), "{text}");
    }
}
