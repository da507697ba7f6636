//! Init containers as a kubelet runs them: in order, each to completion before the next starts,
//! then the main containers. A failing one is restarted unless the pod's restartPolicy is Never;
//! under Never the pod fails there (`kubectl get` shows `Init:Error`) and its main containers
//! never start. A native sidecar (an init container with `restartPolicy: Always`, Kubernetes
//! 1.29+) is started, and the next one waits only for it to be running; it runs beside the main
//! containers and is stopped after they end.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::core::v1::{Container, ContainerStatus, Pod, PodStatus};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use super::{Prepared, RunContext, run_container};
use crate::cluster::{PodHandle, Shared, lock, set_condition};

/// How far a pod's init containers got, from its status.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Progress {
    /// Still running one (or waiting to).
    Running,
    /// Every one completed (a sidecar: started).
    Done,
    /// One ended with a non-zero exit code and will not be restarted.
    Failed,
}

impl Progress {
    /// Writes the pod's `Initialized` condition, and the phase of a pod whose init failed.
    pub fn record(self, st: &mut PodStatus) {
        match self {
            Progress::Done => set_condition(st, "Initialized", "True", None, None),
            Progress::Running => set_condition(st, "Initialized", "False", Some("ContainersNotInitialized"), None),
            Progress::Failed => {
                set_condition(st, "Initialized", "False", Some("ContainersNotInitialized"), None);
                st.phase = Some("Failed".into());
                set_condition(st, "ContainersReady", "False", Some("PodFailed"), None);
                set_condition(st, "Ready", "False", Some("PodFailed"), None);
            }
        }
    }
}

fn is_sidecar(c: &Container) -> bool {
    c.restart_policy.as_deref() == Some("Always")
}

/// The pod's init progress; None when it has no init containers.
pub fn progress(pod: &Pod) -> Option<Progress> {
    let init = pod.spec.as_ref()?.init_containers.as_ref().filter(|i| !i.is_empty())?;
    let statuses = pod.status.as_ref().and_then(|s| s.init_container_statuses.as_ref());
    let status_of = |name: &str| -> Option<&ContainerStatus> { statuses?.iter().find(|s| s.name == name) };
    for c in init {
        let state = status_of(&c.name).and_then(|s| s.state.as_ref());
        let terminated = state.and_then(|s| s.terminated.as_ref());
        let done = match (is_sidecar(c), terminated) {
            (true, _) => state.is_some_and(|s| s.running.is_some()) || terminated.is_some(),
            (false, Some(t)) if t.exit_code != 0 => return Some(Progress::Failed),
            (false, Some(_)) => true,
            (false, None) => false,
        };
        if !done {
            return Some(Progress::Running);
        }
    }
    Some(Progress::Done)
}

/// The native sidecars running beside the main containers.
pub(super) struct Sidecars {
    stop: CancellationToken,
    tasks: Vec<JoinHandle<Option<i32>>>,
}

impl Sidecars {
    /// Stops them and waits for their ends (each bounded by its own kill path).
    pub(super) async fn stop(self) {
        self.stop.cancel();
        for t in self.tasks {
            let _ = t.await;
        }
    }
}

/// How often a sidecar's start is looked at.
const START_POLL: Duration = Duration::from_millis(10);

/// Runs `init` in order; the sidecars started, or None when the pod ends here (an init
/// container failed for good, or the pod was stopped), its sidecars stopped.
pub(super) async fn run_in_order(
    shared: &Arc<Shared>,
    handle: &Arc<PodHandle>,
    init: Vec<Prepared>,
    run: &RunContext,
) -> Option<Sidecars> {
    let mut sidecars = Sidecars {
        stop: handle.kill.child_token(),
        tasks: Vec::new(),
    };
    // A failing init container is retried under Always and OnFailure; under Never the pod fails.
    let policy = if run.policy == "Never" { "Never" } else { "OnFailure" };
    for mut p in init {
        let name = p.container.name.clone();
        if is_sidecar(&p.container) {
            p.stop = sidecars.stop.clone();
            let (sh, h, r) = (shared.clone(), handle.clone(), run.clone());
            let task = tokio::spawn(async move { run_container(&sh, &h, p, &r, "Always").await });
            // The next init container waits for the sidecar to run (its process started), as
            // long as the pod lives: a kubelet waits the same way.
            while !task.is_finished() && !handle.kill.is_cancelled() && !started(handle, &name) {
                tokio::time::sleep(START_POLL).await;
            }
            sidecars.tasks.push(task);
            continue;
        }
        let code = run_container(shared, handle, p, run, policy).await;
        if code != Some(0) || handle.kill.is_cancelled() {
            sidecars.stop().await;
            return None;
        }
    }
    Some(sidecars)
}

/// The container's process has started (and not yet ended).
fn started(handle: &PodHandle, name: &str) -> bool {
    lock(&handle.containers)
        .get(name)
        .is_some_and(|slot| slot.main_pid.is_some())
}
