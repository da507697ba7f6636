//! `ic-bench gc`: deletes pods ic-bench left behind (a killed run, a lost connection), found by
//! the `app.kubernetes.io/managed-by=ic-bench` label, optionally only those older than a duration.
//!
//! Token Secrets are never listed (`list` on Secrets would return every Secret's data in the
//! namespace): each is owned by its run's server pod, so Kubernetes' garbage collector deletes it
//! with that pod (`crate::secret`). gc also deletes, by name, the Secret of each run whose pods
//! it deletes, which takes one made before Secrets had owners while its pods are still there.

use crate::access::Cluster;
use crate::error::KubeError;
use crate::lifecycle;
use crate::podspec::{LABEL_INSTANCE, LABEL_SWEEP_ID, MANAGED_SELECTOR};
use k8s_openapi::api::core::v1::Pod;
use kube::api::{DeleteParams, ListParams};
use std::collections::BTreeSet;
use std::time::Duration;

/// What to collect.
#[derive(Debug, Clone, Default)]
pub struct GcOptions {
    /// Only pods created at least this long ago.
    pub older_than: Option<Duration>,
    /// Only this run's pods (`app.kubernetes.io/instance`).
    pub run_id: Option<String>,
    /// Every namespace (needs cluster-wide list/delete on pods).
    pub all_namespaces: bool,
    /// List what would be deleted, delete nothing.
    pub dry_run: bool,
}

/// One pod gc found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Collected {
    pub namespace: String,
    pub name: String,
    pub age: Option<Duration>,
    /// Its run (`app.kubernetes.io/instance`), whose token Secret goes with it.
    pub run_id: Option<String>,
    /// The ResourceClaimTemplates its DRA claims were made from (`crate::dra`), deleted by name
    /// with it (read from the pod: a run without DRA devices needs no verb on templates).
    pub claim_templates: Vec<String>,
}

/// What `gc` says it deleted (or, with `dry_run`, would delete), one line a pod.
pub fn report_lines(taken: &[Collected], dry_run: bool) -> Vec<String> {
    let verb = if dry_run { "would delete" } else { "deleted" };
    if taken.is_empty() {
        return vec!["no ic-bench pods to delete".into()];
    }
    let age = |c: &Collected| {
        c.age.map_or("unknown".to_string(), |a| {
            humantime::format_duration(Duration::from_secs(a.as_secs())).to_string()
        })
    };
    taken
        .iter()
        .map(|c| format!("{verb} pod {}/{} (age {})", c.namespace, c.name, age(c)))
        .collect()
}

pub fn selector(opts: &GcOptions) -> String {
    match &opts.run_id {
        Some(id) => format!("{MANAGED_SELECTOR},{}={id}", crate::podspec::LABEL_INSTANCE),
        None => MANAGED_SELECTOR.to_string(),
    }
}

/// Which of `pods` gc takes (pure, for tests).
pub fn select(pods: &[Pod], opts: &GcOptions, now: jiff::Timestamp) -> Vec<Collected> {
    pods.iter()
        .filter_map(|p| {
            let age = lifecycle::age(p, now);
            if let Some(min) = opts.older_than
                && age.is_none_or(|a| a < min)
            {
                return None;
            }
            Some(Collected {
                namespace: p.metadata.namespace.clone().unwrap_or_default(),
                name: p.metadata.name.clone()?,
                age,
                run_id: p.metadata.labels.as_ref().and_then(|l| l.get(LABEL_INSTANCE)).cloned(),
                claim_templates: claim_templates(p),
            })
        })
        .collect()
}

/// The pod's own template (`crate::dra`, named like the pod) when a claim is made from it; a
/// template a bench pod copied from a worker it was modelled on is the worker's, never deleted.
fn claim_templates(pod: &Pod) -> Vec<String> {
    let own = pod.metadata.name.as_deref();
    pod.spec
        .iter()
        .flat_map(|s| s.resource_claims.iter().flatten())
        .filter_map(|c| c.resource_claim_template_name.clone())
        .filter(|t| Some(t.as_str()) == own)
        .collect()
}

/// Finds and (unless dry-run) deletes leftovers; returns what it took.
pub async fn collect(cluster: &Cluster, opts: &GcOptions) -> Result<Vec<Collected>, KubeError> {
    let api: kube::Api<Pod> = if opts.all_namespaces {
        kube::Api::all(cluster.client().clone())
    } else {
        cluster.pods()
    };
    let lp = ListParams::default().labels(&selector(opts));
    let scope = if opts.all_namespaces {
        "all namespaces".to_string()
    } else {
        format!("namespace {}", cluster.namespace())
    };
    let pods = cluster
        .call(&format!("list ic-bench pods in {scope}"), || api.list(&lp))
        .await?
        .items;
    let chosen = select(&pods, opts, jiff::Timestamp::now());
    if opts.dry_run {
        return Ok(chosen);
    }
    let dp = DeleteParams {
        grace_period_seconds: Some(1),
        ..DeleteParams::background()
    };
    for c in &chosen {
        let napi: kube::Api<Pod> = kube::Api::namespaced(cluster.client().clone(), &c.namespace);
        match cluster
            .call(&format!("delete pod {}/{}", c.namespace, c.name), || {
                napi.delete(&c.name, &dp)
            })
            .await
        {
            Ok(_) => {}
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(e),
        }
    }
    let runs: BTreeSet<(&str, &str)> = chosen
        .iter()
        .filter_map(|c| Some((c.namespace.as_str(), c.run_id.as_deref()?)))
        .collect();
    for (namespace, run_id) in runs {
        crate::secret::delete_named(cluster, namespace, run_id).await?;
    }
    for c in chosen.iter().filter(|c| !c.claim_templates.is_empty()) {
        let names = c.claim_templates.iter().cloned().collect();
        crate::dra::delete_named(cluster, &c.namespace, &names).await?;
    }
    Ok(chosen)
}

/// Deletes the bench pods an earlier run of this sweep left (a killed process cannot clean up);
/// returns how many.
pub async fn clean_sweep_leftovers(cluster: &Cluster, sweep_id: &str) -> Result<usize, KubeError> {
    let api = cluster.pods();
    let lp = ListParams::default().labels(MANAGED_SELECTOR);
    let pods = cluster
        .call("list the bench pods of an earlier run of this sweep", || api.list(&lp))
        .await?
        .items;
    let ours: Vec<&Pod> = pods.iter().filter(|p| belongs_to(p, sweep_id)).collect();
    let dp = DeleteParams {
        grace_period_seconds: Some(1),
        ..DeleteParams::background()
    };
    for name in ours.iter().filter_map(|p| p.metadata.name.as_ref()) {
        match cluster
            .call(&format!("delete leftover bench pod {name}"), || api.delete(name, &dp))
            .await
        {
            Ok(_) => {}
            Err(e) if e.is_not_found() => {}
            Err(e) => return Err(e),
        }
    }
    // Their runs' token Secrets, by name (collected with their server pods anyway).
    let runs: BTreeSet<&String> = ours
        .iter()
        .filter_map(|p| p.metadata.labels.as_ref()?.get(LABEL_INSTANCE))
        .collect();
    for run_id in runs {
        crate::secret::delete_run(cluster, run_id).await?;
    }
    let templates: BTreeSet<String> = ours.iter().flat_map(|p| claim_templates(p)).collect();
    if !templates.is_empty() {
        crate::dra::delete_named(cluster, cluster.namespace(), &templates).await?;
    }
    Ok(ours.len())
}

/// A pod of this sweep: its `ic-bench.dev/sweep-id` label, or (pods of versions before that
/// label) its run id, the instance label, `<sweep_id>-…`.
fn belongs_to(pod: &Pod, sweep_id: &str) -> bool {
    let Some(labels) = pod.metadata.labels.as_ref() else {
        return false;
    };
    labels.get(LABEL_SWEEP_ID).is_some_and(|id| id == sweep_id)
        || labels
            .get(LABEL_INSTANCE)
            .is_some_and(|id| id.strip_prefix(sweep_id).is_some_and(|rest| rest.starts_with('-')))
}

#[cfg(test)]
mod tests {
    #[test]
    fn gc_names_each_pod_with_its_age_or_says_there_are_none() {
        let pod = |age| super::Collected {
            namespace: "ns".into(),
            name: "p".into(),
            age,
            run_id: None,
            claim_templates: vec![],
        };
        let taken = [pod(Some(super::Duration::from_millis(90_500))), pod(None)];
        assert_eq!(
            super::report_lines(&taken, true),
            [
                "would delete pod ns/p (age 1m 30s)",
                "would delete pod ns/p (age unknown)"
            ]
        );
        assert_eq!(
            super::report_lines(&taken[..1], false),
            ["deleted pod ns/p (age 1m 30s)"]
        );
        assert_eq!(super::report_lines(&[], false), ["no ic-bench pods to delete"]);
    }

    use super::*;

    fn pod(name: &str, created_s: i64) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": "ns", "labels": {LABEL_INSTANCE: format!("run-{name}")},
                "creationTimestamp": jiff::Timestamp::from_second(created_s).unwrap().to_string()},
        }))
        .unwrap()
    }

    #[test]
    fn older_than_filters_by_creation_time() {
        let now = jiff::Timestamp::from_second(10_000).unwrap();
        let pods = vec![pod("old", 10_000 - 7200), pod("new", 10_000 - 60)];
        let all = select(&pods, &GcOptions::default(), now);
        assert_eq!(all.len(), 2);
        let old = select(
            &pods,
            &GcOptions {
                older_than: Some(Duration::from_secs(3600)),
                ..Default::default()
            },
            now,
        );
        assert_eq!(old.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(), ["old"]);
        assert_eq!(old[0].age, Some(Duration::from_secs(7200)));
        assert_eq!(
            old[0].run_id.as_deref(),
            Some("run-old"),
            "its Secret is deleted by name"
        );
        assert!(old[0].claim_templates.is_empty());
        let mut dra = pod("ic-bench-r-server", 10_000);
        dra.spec = Some(
            serde_json::from_value(serde_json::json!({"containers": [],
            "resourceClaims": [{"name": "devices", "resourceClaimTemplateName": "ic-bench-r-server"},
                               {"name": "gpu", "resourceClaimTemplateName": "worker-gpu"},
                               {"name": "nic", "resourceClaimName": "worker-nic"}]}))
            .unwrap(),
        );
        let took = select(&[dra], &GcOptions::default(), now);
        assert_eq!(
            took[0].claim_templates,
            ["ic-bench-r-server"],
            "its own template is deleted by name with the pod; the worker's template it copied is not"
        );
    }

    #[test]
    fn selector_always_requires_managed_by() {
        assert_eq!(selector(&GcOptions::default()), "app.kubernetes.io/managed-by=ic-bench");
        let s = selector(&GcOptions {
            run_id: Some("abc".into()),
            ..Default::default()
        });
        assert_eq!(
            s,
            "app.kubernetes.io/managed-by=ic-bench,app.kubernetes.io/instance=abc"
        );
    }

    #[test]
    fn only_this_sweeps_pods_are_leftovers() {
        let pod = |id: &str| -> Pod {
            serde_json::from_value(serde_json::json!({"metadata": {"name": "p", "labels": {LABEL_INSTANCE: id}}}))
                .unwrap()
        };
        let labelled: Pod = serde_json::from_value(
            serde_json::json!({"metadata": {"name": "p", "labels": {LABEL_SWEEP_ID: "sw1", LABEL_INSTANCE: "x"}}}),
        )
        .unwrap();
        assert!(belongs_to(&labelled, "sw1"));
        assert!(!belongs_to(&labelled, "sw2"));
        assert!(belongs_to(&pod("sw1-p1r0x0"), "sw1"));
        assert!(belongs_to(&pod("sw1-a2p1r0x0"), "sw1"));
        assert!(!belongs_to(&pod("sw12-p1r0x0"), "sw1"));
        assert!(!belongs_to(&pod("other"), "sw1"));
    }
}
