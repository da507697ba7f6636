//! Creating, watching, reading and deleting bench pods, each step under a deadline.
//!
//! Waiting uses a watch on the one pod (list + watch, as `await_condition` does) but, unlike
//! `await_condition`, survives transient API errors: the watcher re-lists on the next poll, and
//! only the caller's deadline ends the wait.

use crate::access::Cluster;
use crate::error::{KubeError, humanize, one_line};
use crate::podspec::{CONTAINER, LABEL_INSTANCE};
use futures::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, ListParams, LogParams, PostParams};
use kube::runtime::watcher;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tokio::time::Instant;

/// Container waiting reasons that will not resolve on their own within a bench run.
const FATAL_WAITING: &[&str] = &[
    "ErrImagePull",
    "ImagePullBackOff",
    "InvalidImageName",
    "ErrImageNeverPull",
    "CreateContainerConfigError",
    "CreateContainerError",
    "RunContainerError",
    "CrashLoopBackOff",
];

/// A container whose Secret is not there yet waits in `CreateContainerConfigError` while the
/// kubelet retries it; the run's token Secret is created just after the server pod (it is owned
/// by it: `crate::secret`), so only a wait that outlasts this grace is stuck.
const CONFIG_GRACE: Duration = Duration::from_secs(30);

/// `reason` is a missing-config wait of a pod younger than [`CONFIG_GRACE`] (age unknown: no).
fn config_may_still_appear(pod: &Pod, reason: &str) -> bool {
    reason == "CreateContainerConfigError" && age(pod, jiff::Timestamp::now()).is_some_and(|a| a < CONFIG_GRACE)
}

/// Where a pod stands, reduced to what the orchestration acts on.
#[derive(Debug, Clone, PartialEq)]
pub enum PodState {
    /// Not yet running; the text says why (ContainerCreating, not scheduled yet, …).
    Pending(String),
    /// Running with an IP.
    Running { ip: String },
    /// Finished (exit code of the bench container when known).
    Terminated { success: bool, detail: String },
    /// Will not start: unschedulable, image pull failure, crash loop … (one-line reason).
    Stuck(String),
}

/// The scheduler cannot place the pod: its `PodScheduled` condition is `False` with reason
/// `Unschedulable` (the API's own fields, for callers that must tell "no room here" from a
/// failure without reading messages).
pub fn unschedulable(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| c.type_ == "PodScheduled" && c.status == "False" && c.reason.as_deref() == Some("Unschedulable"))
}

/// Classifies a pod's status.
pub fn pod_state(pod: &Pod) -> PodState {
    let name = pod.metadata.name.as_deref().unwrap_or("?");
    let Some(status) = pod.status.as_ref() else {
        return PodState::Pending("no status yet".into());
    };
    let phase = status.phase.as_deref().unwrap_or("Pending");
    let container = status
        .container_statuses
        .iter()
        .flatten()
        .find(|c| c.name == CONTAINER)
        .or_else(|| status.container_statuses.as_ref().and_then(|v| v.first()));
    let image = container.map(|c| c.image.clone()).unwrap_or_default();
    let terminated = container
        .and_then(|c| c.state.as_ref())
        .and_then(|s| s.terminated.as_ref())
        .map(|t| (t.exit_code, t.reason.clone(), t.message.clone()));
    match phase {
        "Succeeded" | "Failed" => {
            let mut detail = match &terminated {
                Some((code, reason, message)) => format!(
                    "exit code {code}{}{}",
                    reason.as_deref().map(|r| format!(" ({r})")).unwrap_or_default(),
                    message
                        .as_deref()
                        .map(|m| format!(": {}", one_line(m)))
                        .unwrap_or_default()
                ),
                None => String::new(),
            };
            if let Some(reason) = &status.reason {
                let msg = status.message.as_deref().map(one_line).unwrap_or_default();
                let pod_level = if msg.is_empty() {
                    reason.clone()
                } else {
                    format!("{reason}: {msg}")
                };
                detail = if detail.is_empty() {
                    pod_level
                } else {
                    format!("{pod_level}; {detail}")
                };
            }
            if detail.is_empty() {
                detail = format!("phase {phase}");
            }
            PodState::Terminated {
                success: phase == "Succeeded",
                detail,
            }
        }
        _ => {
            if let Some(c) = status
                .conditions
                .iter()
                .flatten()
                .find(|c| c.type_ == "PodScheduled" && c.status == "False")
                && c.reason.as_deref() == Some("Unschedulable")
            {
                let msg = one_line(c.message.as_deref().unwrap_or("the scheduler gave no reason"));
                let node = crate::podspec::pinned_node(pod)
                    .map(|n| format!(" on node {n}"))
                    .unwrap_or_default();
                let fix = if msg.contains("Insufficient") {
                    " The bench pod requests the same devices as the pod it is modelled on: free some on that node, or target node/NAME to run without device requests."
                } else if msg.contains("affinity") || msg.contains("selector") {
                    " Check that the node exists (kubectl get nodes)."
                } else {
                    ""
                };
                return PodState::Stuck(format!("pod {name} cannot be scheduled{node}: {msg}{fix}"));
            }
            if let Some(w) = container
                .and_then(|c| c.state.as_ref())
                .and_then(|s| s.waiting.as_ref())
            {
                let reason = w.reason.clone().unwrap_or_default();
                let msg = w.message.as_deref().map(one_line).unwrap_or_default();
                if FATAL_WAITING.contains(&reason.as_str()) && !config_may_still_appear(pod, &reason) {
                    let fix = match reason.as_str() {
                        "ErrImagePull" | "ImagePullBackOff" | "InvalidImageName" | "ErrImageNeverPull" => {
                            format!("; check --image {image} and the namespace's imagePullSecrets")
                        }
                        "CrashLoopBackOff" | "RunContainerError" => "; see the container's logs".to_string(),
                        _ => String::new(),
                    };
                    let msg = if msg.is_empty() {
                        String::new()
                    } else {
                        format!(": {msg}")
                    };
                    return PodState::Stuck(format!("pod {name}: {reason}{msg}{fix}"));
                }
                return PodState::Pending(if msg.is_empty() {
                    reason
                } else {
                    format!("{reason}: {msg}")
                });
            }
            if let Some((code, reason, _)) = &terminated
                && *code != 0
            {
                return PodState::Stuck(format!(
                    "pod {name}: container exited with code {code}{}",
                    reason.as_deref().map(|r| format!(" ({r})")).unwrap_or_default()
                ));
            }
            match (phase, status.pod_ip.as_deref()) {
                ("Running", Some(ip)) if !ip.is_empty() => PodState::Running { ip: ip.to_string() },
                ("Running", _) => PodState::Pending("running, waiting for a pod IP".into()),
                _ => PodState::Pending(if pod.spec.as_ref().and_then(|s| s.node_name.as_ref()).is_none() {
                    "not scheduled yet".into()
                } else {
                    "ContainerCreating".into()
                }),
            }
        }
    }
}

/// What a wait does with each state it sees.
pub enum Step<T> {
    Continue,
    Done(T),
    Fail(KubeError),
}

/// Watches pod `name` until `decide` returns Done or Fail, the pod disappears, or `until` passes.
pub async fn watch_pod<T>(
    cluster: &Cluster,
    name: &str,
    until: Instant,
    mut decide: impl FnMut(&Pod) -> Step<T>,
) -> Result<T, KubeError> {
    let stream = watcher::watch_object(cluster.pods(), name);
    futures::pin_mut!(stream);
    let mut last_state = String::from("no state seen yet");
    let mut delays = crate::retry::api_backoff();
    let mut outage = crate::retry::Outage::new();
    loop {
        let next = match tokio::time::timeout_at(until, stream.next()).await {
            Ok(n) => n,
            Err(_) => {
                return Err(KubeError::Deadline {
                    pod: name.to_string(),
                    last_seen: last_state,
                });
            }
        };
        match next {
            Some(Ok(Some(pod))) => {
                delays = crate::retry::api_backoff();
                outage.reset();
                last_state = describe(&pod_state(&pod));
                match decide(&pod) {
                    Step::Continue => {}
                    Step::Done(v) => return Ok(v),
                    Step::Fail(e) => return Err(e),
                }
            }
            Some(Ok(None)) => {
                return Err(KubeError::Pod(format!(
                    "pod {name} was deleted while ic-bench waited for it (by someone else, or a namespace cleanup)"
                )));
            }
            Some(Err(e)) => {
                let err = watcher_error(name, e).at_server(cluster.server());
                // Refused while the API server restarts: ridden out as one call would be.
                if !outage.retry(&err) {
                    return Err(err);
                }
                tracing::debug!("{err}; watching again");
                last_state = format!("last API error: {err}");
                tokio::time::sleep_until((Instant::now() + delays.next_delay()).min(until)).await;
            }
            None => {
                return Err(KubeError::Pod(format!("pod {name}: the watch ended unexpectedly")));
            }
        }
    }
}

/// One line for a pod state, as messages quote it (`Pending: not scheduled yet`).
pub fn describe(state: &PodState) -> String {
    match state {
        PodState::Pending(why) => format!("Pending: {why}"),
        PodState::Running { ip } => format!("Running at {ip}"),
        PodState::Terminated { detail, .. } => format!("finished: {detail}"),
        PodState::Stuck(why) => why.clone(),
    }
}

fn watcher_error(name: &str, e: watcher::Error) -> KubeError {
    let what = format!("watch pod {name}");
    match e {
        watcher::Error::InitialListFailed(k) | watcher::Error::WatchStartFailed(k) | watcher::Error::WatchFailed(k) => {
            KubeError::from_kube(what, k)
        }
        watcher::Error::WatchError(status) => KubeError::Api {
            what,
            code: status.code,
            reason: status.reason.clone(),
            message: one_line(&status.message),
        },
        watcher::Error::NoResourceVersion => KubeError::Transport {
            what,
            detail: "the list carried no resourceVersion".into(),
        },
    }
}

/// Waits until the pod runs with an IP; Stuck or finished pods fail with their one-line reason.
pub async fn wait_running(cluster: &Cluster, name: &str, until: Instant) -> Result<(Pod, String), KubeError> {
    watch_pod(cluster, name, until, |pod| match pod_state(pod) {
        PodState::Running { ip } => Step::Done((pod.clone(), ip)),
        PodState::Pending(_) => Step::Continue,
        PodState::Stuck(why) => Step::Fail(KubeError::Stuck(why)),
        PodState::Terminated { detail, .. } => Step::Fail(KubeError::Pod(format!(
            "pod {name} finished before it was expected to: {detail}"
        ))),
    })
    .await
}

/// Waits until the pod has finished (either way); Stuck pods fail.
pub async fn wait_finished(cluster: &Cluster, name: &str, until: Instant) -> Result<(Pod, bool), KubeError> {
    watch_pod(cluster, name, until, |pod| match pod_state(pod) {
        PodState::Terminated { success, .. } => Step::Done((pod.clone(), success)),
        PodState::Stuck(why) => Step::Fail(KubeError::Stuck(why)),
        PodState::Pending(_) | PodState::Running { .. } => Step::Continue,
    })
    .await
}

/// Creates a pod. A retried create that meets its own earlier attempt (409 with our run's label)
/// counts as success: the first attempt reached the server even though its answer was lost.
pub async fn create_pod(cluster: &Cluster, pod: &Pod) -> Result<Pod, KubeError> {
    create_pod_tracked(cluster, pod, &AtomicBool::new(false)).await
}

/// [`create_pod`], setting `maybe_created` as soon as an attempt may have reached the API server
/// (and leaving it set): while it is unset, the pod certainly does not exist, so there is nothing
/// to clean up.
pub async fn create_pod_tracked(cluster: &Cluster, pod: &Pod, maybe_created: &AtomicBool) -> Result<Pod, KubeError> {
    let name = pod.metadata.name.clone().unwrap_or_default();
    let api = cluster.pods();
    let pp = PostParams::default();
    let what = format!("create pod {}/{name}", cluster.namespace());
    // An attempt in flight counts as "maybe created" (an interrupt may drop it after the server
    // got it); one that failed without ever connecting is taken back unless an earlier one might
    // have landed (or something was already created before this call).
    let reached = AtomicBool::new(maybe_created.load(Ordering::SeqCst));
    let attempt = || {
        maybe_created.store(true, Ordering::SeqCst);
        let fut = api.create(&pp, pod);
        let reached = &reached;
        async move {
            let r = fut.await;
            let never_connected = r.as_ref().err().is_some_and(crate::error::never_connected);
            if never_connected {
                if !reached.load(Ordering::SeqCst) {
                    maybe_created.store(false, Ordering::SeqCst);
                }
            } else {
                reached.store(true, Ordering::SeqCst);
            }
            r
        }
    };
    match cluster.call(&what, attempt).await {
        Ok(p) => Ok(p),
        Err(e) if e.status_code() == Some(409) => {
            let existing = cluster.call(&format!("get pod {name}"), || api.get(&name)).await?;
            let ours = |p: &Pod| p.metadata.labels.as_ref().and_then(|l| l.get(LABEL_INSTANCE)).cloned();
            if ours(&existing).is_some() && ours(&existing) == ours(pod) {
                Ok(existing)
            } else {
                Err(KubeError::Pod(format!(
                    "pod {name} already exists and is not from this run: pick another --run-id or run `ic-bench gc`"
                )))
            }
        }
        Err(e) if crate::admission::is_forbidden(&e) => Err(crate::admission::explain_forbidden(cluster, pod, e).await),
        Err(e) => Err(e),
    }
}

/// The whole log of a finished pod's bench container.
pub async fn read_logs(cluster: &Cluster, name: &str) -> Result<String, KubeError> {
    let api = cluster.pods();
    let lp = LogParams {
        container: Some(CONTAINER.into()),
        ..Default::default()
    };
    cluster
        .call(&format!("logs of pod {name}"), || api.logs(name, &lp))
        .await
}

/// Deletes every pod matching `selector`, then waits (until `until`) for them to be gone.
/// Returns the names deleted; an error lists what is left.
pub async fn delete_matching(cluster: &Cluster, selector: &str, until: Instant) -> Result<Vec<String>, KubeError> {
    delete_matching_settled(cluster, selector, until, Duration::ZERO).await
}

/// Deletes every pod of run `run_id` (its instance label) within `timeout`, looking twice (a
/// create may still be in flight after an interrupt or a deadline); says what was deleted.
pub async fn delete_run(cluster: &Cluster, run_id: &str, timeout: Duration) -> Result<String, KubeError> {
    let deleted = delete_matching_settled(
        cluster,
        &crate::podspec::instance_selector(run_id),
        Instant::now() + timeout,
        Duration::from_millis(300),
    )
    .await?;
    // The run's token Secret goes with its pods (`crate::secret`).
    let secret = crate::secret::delete_run(cluster, run_id).await.map_err(|e| {
        KubeError::Pod(format!(
            "cleanup of the token secret of run {run_id} failed: {e}; run `ic-bench gc`"
        ))
    })?;
    Ok(format!(
        "deleted {} ic-bench pod(s){} of run {run_id}",
        deleted.len(),
        if secret { " and its token secret" } else { "" }
    ))
}

/// [`delete_matching`], and once nothing matches, looks again after `settle`: a create that was
/// in flight when the run was interrupted can land after the first empty list.
pub async fn delete_matching_settled(
    cluster: &Cluster,
    selector: &str,
    until: Instant,
    settle: Duration,
) -> Result<Vec<String>, KubeError> {
    let api = cluster.pods();
    let lp = ListParams::default().labels(selector);
    let dp = DeleteParams {
        grace_period_seconds: Some(1),
        ..DeleteParams::background()
    };
    let mut deleted: Vec<String> = Vec::new();
    let bounded = async {
        let mut settled = settle.is_zero();
        loop {
            let pods = cluster
                .call(&format!("list pods -l {selector}"), || api.list(&lp))
                .await?
                .items;
            if pods.is_empty() {
                if settled {
                    return Ok(());
                }
                settled = true;
                tokio::time::sleep(settle).await;
                continue;
            }
            // Delete what is not already terminating (a late arrival included), then look again.
            for pod in pods.iter().filter(|p| p.metadata.deletion_timestamp.is_none()) {
                let Some(name) = pod.metadata.name.clone() else {
                    continue;
                };
                match cluster
                    .call(&format!("delete pod {name}"), || api.delete(&name, &dp))
                    .await
                {
                    Ok(_) => {}
                    Err(e) if e.is_not_found() => {}
                    Err(e) => return Err(e),
                }
                if !deleted.contains(&name) {
                    deleted.push(name);
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    };
    match tokio::time::timeout_at(until, bounded).await {
        Ok(Ok(())) => Ok(deleted),
        Ok(Err(e)) => Err(KubeError::Pod(format!(
            "cleanup of pods -l {selector} failed: {e}; run `ic-bench gc`"
        ))),
        Err(_) => Err(KubeError::Pod(format!(
            "cleanup of pods -l {selector} did not finish in time (deleted {}); run `ic-bench gc`",
            deleted.len()
        ))),
    }
}

/// How long ago a pod was created.
pub fn age(pod: &Pod, now: jiff::Timestamp) -> Option<Duration> {
    let created = pod.metadata.creation_timestamp.as_ref()?.0;
    let secs = now.as_second() - created.as_second();
    Some(Duration::from_secs(secs.max(0) as u64))
}

/// One-line explanation of a deadline for messages.
pub fn deadline_text(d: Duration) -> String {
    humanize(d)
}

/// State of the bench container for messages about a finished pod.
pub fn exit_summary(pod: &Pod) -> String {
    match pod_state(pod) {
        PodState::Terminated { detail, .. } => detail,
        other => describe(&other),
    }
}

/// The node of a bench pod the scheduler cannot place (`PodScheduled=False`, reason
/// `Unschedulable`): the node it was pinned to, else its side's (server = decode, client =
/// prefill, by its label). `None`: every pod was placed; `Some(None)`: stuck, node unknown.
pub fn unschedulable_node(pods: &[Pod], prefill: &str, decode: &str) -> Option<Option<String>> {
    let stuck = pods.iter().find(|p| unschedulable(p))?;
    let role = stuck
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(crate::podspec::LABEL_COMPONENT))
        .map(String::as_str);
    Some(crate::podspec::pinned_node(stuck).or_else(|| match role {
        Some("server") => Some(decode.to_string()),
        Some("client") => Some(prefill.to_string()),
        _ => None,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod_json(status: serde_json::Value) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p"},
            "spec": {"containers": [{"name": "bench"}], "nodeName": "n1"},
            "status": status,
        }))
        .unwrap()
    }

    #[test]
    fn states_from_status() {
        let unsched = pod_json(
            serde_json::json!({"phase":"Pending","conditions":[{"type":"PodScheduled","status":"False","reason":"Unschedulable","message":"0/2 nodes are available: 2 Insufficient nvidia.com/gpu."}]}),
        );
        match pod_state(&unsched) {
            PodState::Stuck(m) => {
                assert!(
                    m.starts_with(
                        "pod p cannot be scheduled on node n1: 0/2 nodes are available: 2 Insufficient nvidia.com/gpu."
                    ),
                    "{m}"
                );
                assert!(m.contains("free some on that node"), "{m}");
            }
            s => panic!("{s:?}"),
        }
        let pull = pod_json(
            serde_json::json!({"phase":"Pending","containerStatuses":[{"name":"bench","image":"x:1","imageID":"","ready":false,"restartCount":0,"state":{"waiting":{"reason":"ErrImagePull","message":"not found"}}}]}),
        );
        match pod_state(&pull) {
            PodState::Stuck(m) => assert!(m.contains("ErrImagePull: not found; check --image x:1"), "{m}"),
            s => panic!("{s:?}"),
        }
        // A missing Secret: retried by the kubelet while the pod is young, stuck after that.
        let mut config = pod_json(
            serde_json::json!({"phase":"Pending","containerStatuses":[{"name":"bench","image":"x","imageID":"","ready":false,"restartCount":0,"state":{"waiting":{"reason":"CreateContainerConfigError","message":"secret \"s\" not found"}}}]}),
        );
        assert!(matches!(pod_state(&config), PodState::Stuck(_)), "age unknown");
        let created = |ago: i64| {
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
                jiff::Timestamp::now() - jiff::SignedDuration::from_secs(ago),
            ))
        };
        config.metadata.creation_timestamp = created(2);
        assert!(
            matches!(pod_state(&config), PodState::Pending(_)),
            "{:?}",
            pod_state(&config)
        );
        config.metadata.creation_timestamp = created(31);
        assert!(matches!(pod_state(&config), PodState::Stuck(_)));
        let creating = pod_json(
            serde_json::json!({"phase":"Pending","containerStatuses":[{"name":"bench","image":"x","imageID":"","ready":false,"restartCount":0,"state":{"waiting":{"reason":"ContainerCreating"}}}]}),
        );
        assert_eq!(pod_state(&creating), PodState::Pending("ContainerCreating".into()));
        let running = pod_json(serde_json::json!({"phase":"Running","podIP":"10.0.0.5"}));
        assert_eq!(pod_state(&running), PodState::Running { ip: "10.0.0.5".into() });
        let failed = pod_json(
            serde_json::json!({"phase":"Failed","containerStatuses":[{"name":"bench","image":"x","imageID":"","ready":false,"restartCount":0,"state":{"terminated":{"exitCode":139,"reason":"Error"}}}]}),
        );
        assert_eq!(
            pod_state(&failed),
            PodState::Terminated {
                success: false,
                detail: "exit code 139 (Error)".into()
            }
        );
        let deadline = pod_json(
            serde_json::json!({"phase":"Failed","reason":"DeadlineExceeded","message":"Pod was active on the node longer than the specified deadline"}),
        );
        match pod_state(&deadline) {
            PodState::Terminated { success: false, detail } => {
                assert!(detail.starts_with("DeadlineExceeded: Pod was active"))
            }
            s => panic!("{s:?}"),
        }
    }

    fn bench_pod(role: &str, node: Option<&str>, scheduled: Option<(&str, &str)>) -> Pod {
        let mut v = serde_json::json!({
            "metadata": {"name": format!("ic-bench-x-{role}"), "labels": {crate::podspec::LABEL_COMPONENT: role}},
            "spec": {"containers": []},
            "status": {"phase": "Pending"},
        });
        if let Some(n) = node {
            v["spec"]["nodeName"] = n.into();
        }
        if let Some((status, reason)) = scheduled {
            v["status"]["conditions"] =
                serde_json::json!([{"type": "PodScheduled", "status": status, "reason": reason}]);
        }
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn unschedulable_is_decided_on_the_pods_status_not_the_message() {
        let stuck = bench_pod("server", None, Some(("False", "Unschedulable")));
        assert_eq!(
            unschedulable_node(std::slice::from_ref(&stuck), "node-1", "node-2"),
            Some(Some("node-2".to_string())),
            "the server side is decode"
        );
        let pinned = bench_pod("client", Some("node-9"), Some(("False", "Unschedulable")));
        assert_eq!(
            unschedulable_node(&[pinned], "node-1", "node-2"),
            Some(Some("node-9".to_string())),
            "the pinned node first"
        );
        let placed = bench_pod("server", Some("node-2"), Some(("True", "")));
        assert_eq!(unschedulable_node(&[placed], "node-1", "node-2"), None);
        assert_eq!(unschedulable_node(&[], "node-1", "node-2"), None);
    }
}
