//! The object store: pods by (namespace, name), one monotonically increasing resourceVersion, and
//! a bounded event history so watches can resume from a version or learn it expired.

use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use tokio::sync::watch;

/// (namespace, name).
pub type PodKey = (String, String);

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    Added,
    Modified,
    Deleted,
}

/// One change, with the object before it (for selector transitions in watches).
#[derive(Debug, Clone)]
pub struct Event {
    pub rv: u64,
    pub kind: EventKind,
    pub object: Arc<Pod>,
    pub previous: Option<Arc<Pod>>,
}

pub struct Store {
    rv: u64,
    pods: BTreeMap<PodKey, Pod>,
    history: VecDeque<Event>,
    /// Versions below this can no longer be resumed from.
    floor: u64,
    /// How many events a watch can resume across before it must re-list.
    history_limit: usize,
    changed: watch::Sender<u64>,
}

pub fn now() -> Time {
    Time(jiff::Timestamp::now())
}

pub fn key_of(pod: &Pod) -> PodKey {
    (
        pod.metadata.namespace.clone().unwrap_or_default(),
        pod.metadata.name.clone().unwrap_or_default(),
    )
}

impl Store {
    pub fn new(history_limit: usize) -> Self {
        // Start above 0 so "0" keeps its special "any version" meaning for clients.
        let (changed, _) = watch::channel(100);
        Store {
            rv: 100,
            pods: BTreeMap::new(),
            history: VecDeque::new(),
            floor: 0,
            history_limit: history_limit.max(1),
            changed,
        }
    }

    pub fn resource_version(&self) -> u64 {
        self.rv
    }

    /// A fresh version for an object kept outside this store (deployments share the counter).
    pub fn next_version(&mut self) -> u64 {
        self.rv += 1;
        self.rv
    }

    /// Wakes when anything changes; subscribe while holding the store lock so nothing is missed.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    pub fn get(&self, key: &PodKey) -> Option<&Pod> {
        self.pods.get(key)
    }

    pub fn pods(&self) -> impl Iterator<Item = &Pod> {
        self.pods.values()
    }

    fn record(&mut self, kind: EventKind, object: &Pod, previous: Option<Pod>) {
        self.history.push_back(Event {
            rv: self.rv,
            kind,
            object: Arc::new(object.clone()),
            previous: previous.map(Arc::new),
        });
        while self.history.len() > self.history_limit {
            if let Some(dropped) = self.history.pop_front() {
                self.floor = dropped.rv;
            }
        }
        self.changed.send_replace(self.rv);
    }

    /// Stores a new pod (the caller checked it does not exist) and returns it as stored.
    pub fn insert(&mut self, mut pod: Pod) -> Pod {
        self.rv += 1;
        pod.metadata.resource_version = Some(self.rv.to_string());
        self.record(EventKind::Added, &pod, None);
        self.pods.insert(key_of(&pod), pod.clone());
        pod
    }

    /// Applies `change` to the pod with `key` (and `uid`, when given); records MODIFIED only when
    /// something changed. Returns the pod as it now is.
    pub fn modify(&mut self, key: &PodKey, uid: Option<&str>, change: impl FnOnce(&mut Pod)) -> Option<Pod> {
        let current = self.pods.get(key)?;
        if uid.is_some_and(|u| current.metadata.uid.as_deref() != Some(u)) {
            return None;
        }
        let before = current.clone();
        let mut after = before.clone();
        change(&mut after);
        if after == before {
            return Some(after);
        }
        self.rv += 1;
        after.metadata.resource_version = Some(self.rv.to_string());
        self.pods.insert(key.clone(), after.clone());
        self.record(EventKind::Modified, &after, Some(before));
        Some(after)
    }

    /// Removes the pod (only the one with `uid`, when given) and records DELETED.
    pub fn remove(&mut self, key: &PodKey, uid: Option<&str>) -> Option<Pod> {
        let current = self.pods.get(key)?;
        if uid.is_some_and(|u| current.metadata.uid.as_deref() != Some(u)) {
            return None;
        }
        let mut pod = self.pods.remove(key)?;
        let before = pod.clone();
        self.rv += 1;
        pod.metadata.resource_version = Some(self.rv.to_string());
        if pod.metadata.deletion_timestamp.is_none() {
            pod.metadata.deletion_timestamp = Some(now());
            pod.metadata.deletion_grace_period_seconds = Some(0);
        }
        self.record(EventKind::Deleted, &pod, Some(before));
        Some(pod)
    }

    /// Events newer than `rv`, or `Err(oldest version still resumable)` when history moved past it.
    pub fn events_after(&self, rv: u64) -> Result<Vec<Event>, u64> {
        if rv < self.floor {
            return Err(self.floor);
        }
        Ok(self.history.iter().filter(|e| e.rv > rv).cloned().collect())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(name: &str) -> Pod {
        let mut p = Pod::default();
        p.metadata.name = Some(name.to_string());
        p.metadata.namespace = Some("default".to_string());
        p.metadata.uid = Some(format!("uid-{name}"));
        p
    }

    #[test]
    fn versions_increase_and_history_resumes() {
        let mut s = Store::new(100);
        let a = s.insert(pod("a"));
        let rv_a: u64 = a.metadata.resource_version.as_deref().unwrap().parse().unwrap();
        let key = key_of(&a);
        let same = s.modify(&key, None, |_| {}).unwrap();
        assert_eq!(
            same.metadata.resource_version, a.metadata.resource_version,
            "no-op must not bump"
        );
        let m = s
            .modify(&key, None, |p| {
                p.metadata.labels = Some([("x".into(), "1".into())].into())
            })
            .unwrap();
        assert!(m.metadata.resource_version.as_deref().unwrap().parse::<u64>().unwrap() > rv_a);
        assert!(
            s.modify(&key, Some("other-uid"), |p| p.metadata.labels = None)
                .is_none()
        );
        let d = s.remove(&key, None).unwrap();
        assert!(d.metadata.deletion_timestamp.is_some());
        let kinds: Vec<_> = s.events_after(rv_a - 1).unwrap().iter().map(|e| e.kind).collect();
        assert_eq!(kinds, [EventKind::Added, EventKind::Modified, EventKind::Deleted]);
        assert_eq!(s.events_after(s.resource_version()).unwrap().len(), 0);
    }
}
