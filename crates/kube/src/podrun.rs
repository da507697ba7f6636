//! Following one pod from creation to its end as a stream of log lines, under a deadline: the
//! one way ic-bench reads a pod's output, for bench pods (the pair pipeline reads the protocol
//! lines as they come) and for the node-probe pod (which collects them all).
//!
//! A background task watches the pod until it runs (or is stuck: unschedulable, image pull
//! failure …, which ends the stream with that reason), follows its log, and once the log ends
//! reads the pod's final state. A log stream that breaks (API blip, the container not started
//! yet) is followed again without repeating lines already delivered.

use crate::access::Cluster;
use crate::error::{KubeError, one_line};
use crate::lifecycle::{self, PodState, Step};
use crate::podspec::CONTAINER;
use futures::{AsyncBufReadExt, StreamExt};
use k8s_openapi::api::core::v1::Pod;
use kube::api::LogParams;
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// Log lines kept for error messages.
const KEEP_LINES: usize = 50;
/// How long `exit_note` waits for the task to report the pod's end.
const END_WAIT: Duration = Duration::from_secs(10);

enum Event {
    Line(String),
    /// The pod ended: `None` when it succeeded, else why not.
    Ended(Option<String>),
}

#[derive(Default)]
struct Seen {
    pod: Option<Pod>,
    state: String,
    lines: VecDeque<String>,
}

/// One pod being followed.
pub struct PodRun {
    name: String,
    events: mpsc::Receiver<Event>,
    ended: Option<Option<String>>,
    seen: Arc<Mutex<Seen>>,
    task: JoinHandle<()>,
}

impl PodRun {
    /// Starts following pod `name` (already created) until `until`.
    pub fn follow(cluster: &Cluster, name: &str, until: Instant) -> PodRun {
        let (tx, events) = mpsc::channel(256);
        let seen = Arc::new(Mutex::new(Seen {
            state: "no state seen yet".into(),
            ..Default::default()
        }));
        let task = tokio::spawn(follow_task(
            cluster.clone(),
            name.to_string(),
            until,
            tx,
            Arc::clone(&seen),
        ));
        PodRun {
            name: name.to_string(),
            events,
            ended: None,
            seen,
            task,
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    /// The next log line; `None` once the pod's output ended (then [`PodRun::exit_note`] says why).
    pub async fn next_line(&mut self) -> Option<String> {
        if self.ended.is_some() {
            return None;
        }
        match self.events.recv().await {
            Some(Event::Line(line)) => Some(line),
            Some(Event::Ended(note)) => {
                self.ended = Some(note);
                None
            }
            None => {
                self.ended = Some(Some("ic-bench stopped following it".into()));
                None
            }
        }
    }

    /// Why the pod ended: `None` when it succeeded. Waits (bounded) for the end if needed,
    /// dropping lines not yet read.
    pub async fn exit_note(&mut self) -> Option<String> {
        let wait = async { while self.next_line().await.is_some() {} };
        if tokio::time::timeout(END_WAIT, wait).await.is_err() {
            return Some(format!(
                "pod {} is still running (last seen: {})",
                self.name,
                self.state()
            ));
        }
        // A pod that failed says only its exit code: its own last error line says why.
        self.ended.clone().flatten().map(|note| {
            let words = self.seen.lock().ok().and_then(|s| last_error_line(&s.lines));
            match words {
                Some(words) if !note.contains(&words) => format!("{note}: {words}"),
                _ => note,
            }
        })
    }

    /// The pod as last seen by the watch (node, IP, statuses).
    pub fn last_pod(&self) -> Option<Pod> {
        self.observer().last_pod()
    }

    /// A handle that keeps seeing the pod's last state after this run is handed away.
    pub fn observer(&self) -> PodObserver {
        PodObserver(Arc::clone(&self.seen))
    }

    /// The pod's last known state, e.g. `Pending: not scheduled yet`.
    pub fn state(&self) -> String {
        self.seen.lock().map(|s| s.state.clone()).unwrap_or_default()
    }

    /// The most useful log line to quote (the last error, else the last line) and the pod's state.
    pub fn last_words(&self) -> String {
        let Ok(seen) = self.seen.lock() else {
            return String::new();
        };
        match last_error_line(&seen.lines) {
            Some(l) => format!("{l} (pod {}: {})", self.name, seen.state),
            None => format!("pod {}: {}", self.name, seen.state),
        }
    }

    /// Stops following (the pod itself is left to the caller's cleanup).
    pub fn stop(&mut self) {
        self.task.abort();
    }
}

/// The log line to quote: the last one that reads like an error, else the last one, without
/// ic-bench's `ic-bench: error: ` prefix. The protocol's JSON lines (a bench pod's stdout shares
/// its log with stderr) are never quoted: they are data for the parent, not words for a person.
fn last_error_line(lines: &VecDeque<String>) -> Option<String> {
    let words = || {
        lines
            .iter()
            .rev()
            .filter(|l| matches!(icb_core::protocol::parse_side_line(l), Ok(None)))
    };
    words()
        .find(|l| l.to_ascii_lowercase().contains("error"))
        .or_else(|| words().next())
        .map(|l| one_line(l.trim().trim_start_matches("ic-bench: error: ")))
}

/// What a [`PodRun`] last saw of its pod, readable from elsewhere.
#[derive(Clone)]
pub struct PodObserver(Arc<Mutex<Seen>>);

impl PodObserver {
    pub fn last_pod(&self) -> Option<Pod> {
        self.0.lock().ok().and_then(|s| s.pod.clone())
    }
}

impl Drop for PodRun {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn follow_task(cluster: Cluster, name: String, until: Instant, tx: mpsc::Sender<Event>, seen: Arc<Mutex<Seen>>) {
    let note = follow(&cluster, &name, until, &tx, &seen).await;
    let _ = tx.send(Event::Ended(note)).await;
}

fn remember_pod(seen: &Mutex<Seen>, pod: &Pod) {
    if let Ok(mut s) = seen.lock() {
        s.state = lifecycle::describe(&lifecycle::pod_state(pod));
        s.pod = Some(pod.clone());
    }
}

async fn follow(
    cluster: &Cluster,
    name: &str,
    until: Instant,
    tx: &mpsc::Sender<Event>,
    seen: &Mutex<Seen>,
) -> Option<String> {
    // 1. Until it runs (or already finished: a short-lived pod may be done before we look).
    let started = lifecycle::watch_pod(cluster, name, until, |pod| {
        remember_pod(seen, pod);
        match lifecycle::pod_state(pod) {
            PodState::Running { .. } | PodState::Terminated { .. } => Step::Done(()),
            PodState::Pending(_) => Step::Continue,
            PodState::Stuck(why) => Step::Fail(KubeError::Stuck(why)),
        }
    })
    .await;
    if let Err(e) = started {
        return Some(e.to_string());
    }
    // 2. Its log, followed to the end, re-followed after a break without repeating lines.
    let mut delivered = 0usize;
    let mut delays = crate::retry::api_backoff();
    let mut outage = crate::retry::Outage::new();
    loop {
        let before = delivered;
        let followed = tokio::time::timeout_at(until, follow_once(cluster, name, &mut delivered, tx, seen)).await;
        if delivered > before {
            outage.reset();
        }
        match followed {
            Err(_) => return Some(format!("pod {name}: its output did not end before the deadline")),
            // The receiver is gone: nobody reads any more.
            Ok(Err(None)) => return None,
            // Refused while the API server restarts: ridden out as one call would be.
            Ok(Err(Some(e))) if e.status_code() == Some(400) || outage.retry(&e) => {
                // 400: the container has not started yet ("waiting to start").
                tracing::debug!("{e}; reading the log again");
                tokio::time::sleep_until((Instant::now() + delays.next_delay()).min(until)).await;
            }
            Ok(Err(Some(e))) => return Some(e.to_string()),
            Ok(Ok(())) => {
                // The stream ended: the container finished, or the API server closed a long
                // follow. Only a finished pod ends the output.
                match lifecycle::wait_finished(cluster, name, (Instant::now() + Duration::from_secs(2)).min(until))
                    .await
                {
                    Ok((pod, success)) => {
                        remember_pod(seen, &pod);
                        return if success {
                            None
                        } else {
                            Some(match lifecycle::pod_state(&pod) {
                                PodState::Terminated { detail, .. } => format!("pod {name}: {detail}"),
                                other => lifecycle::describe(&other),
                            })
                        };
                    }
                    // Not finished within the short look: it still runs, follow its log again.
                    Err(KubeError::Deadline { .. }) if Instant::now() < until => continue,
                    Err(e) => return Some(e.to_string()),
                }
            }
        }
    }
}

/// One follow of the log. `Err(None)`: the receiver is gone.
async fn follow_once(
    cluster: &Cluster,
    name: &str,
    delivered: &mut usize,
    tx: &mpsc::Sender<Event>,
    seen: &Mutex<Seen>,
) -> Result<(), Option<KubeError>> {
    let lp = LogParams {
        container: Some(CONTAINER.into()),
        follow: true,
        ..Default::default()
    };
    let what = format!("logs of pod {name}");
    let stream = cluster
        .pods()
        .log_stream(name, &lp)
        .await
        .map_err(|e| Some(KubeError::from_kube(what.clone(), e).at_server(cluster.server())))?;
    let mut lines = stream.lines();
    let mut index = 0usize;
    while let Some(line) = lines.next().await {
        let line = line.map_err(|e| {
            Some(KubeError::Transport {
                what: what.clone(),
                detail: e.to_string(),
            })
        })?;
        index += 1;
        if index <= *delivered {
            continue;
        }
        *delivered = index;
        if let Ok(mut s) = seen.lock()
            && !line.trim().is_empty()
        {
            if s.lines.len() == KEEP_LINES {
                s.lines.pop_front();
            }
            s.lines.push_back(line.clone());
        }
        tx.send(Event::Line(line)).await.map_err(|_| None)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_quoted_line_is_never_protocol_json() {
        let failed = icb_core::protocol::side_line(&icb_core::protocol::SideEvent::Failed(
            icb_core::protocol::SideFailure::new(icb_core::protocol::SideErrorKind::UcxNotFound, "error: x"),
        ));
        let lines: VecDeque<String> = [
            "ic-bench: error: UCX setup failed: UCX not found: no libucp.so.0",
            failed.as_str(),
        ]
        .map(String::from)
        .into();
        assert_eq!(
            last_error_line(&lines).as_deref(),
            Some("UCX setup failed: UCX not found: no libucp.so.0")
        );
        let only_json: VecDeque<String> = [failed].into();
        assert_eq!(last_error_line(&only_json), None);
    }
}
