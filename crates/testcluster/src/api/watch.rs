//! Pod watches: one JSON event per line, pushed as it happens, resumable from a resourceVersion,
//! ending cleanly at `timeoutSeconds` (kube-rs then re-watches) or with an in-stream 410 when the
//! version is too old.

use std::sync::Arc;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::pods::Filter;
use super::{Params, param};
use crate::cluster::{Shared, lock};
use crate::status::{ApiError, expired_event};
use crate::store::{Event, EventKind};

/// How long a watch without `timeoutSeconds` stays open.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(1800);

fn line(kind: &str, object: &Pod) -> Bytes {
    let mut bytes = serde_json::to_vec(&json!({"type": kind, "object": object})).unwrap_or_default();
    bytes.push(b'\n');
    Bytes::from(bytes)
}

fn value_line(v: &Value) -> Bytes {
    let mut bytes = serde_json::to_vec(v).unwrap_or_default();
    bytes.push(b'\n');
    Bytes::from(bytes)
}

/// What a watcher with `filter` sees of one change: objects moving into or out of the selection
/// appear as ADDED or DELETED, like the API server's filtered watch.
fn translate(event: &Event, filter: &Filter) -> Option<Bytes> {
    let now = filter.matches(&event.object);
    let before = event.previous.as_ref().is_some_and(|p| filter.matches(p));
    let kind = match event.kind {
        EventKind::Added if now => "ADDED",
        EventKind::Modified if now && before => "MODIFIED",
        EventKind::Modified if now => "ADDED",
        EventKind::Modified if before => "DELETED",
        EventKind::Deleted if now || before => "DELETED",
        _ => return None,
    };
    Some(line(kind, &event.object))
}

pub fn watch(shared: Arc<Shared>, filter: Filter, params: &Params) -> Response {
    let timeout = match param(params, "timeoutSeconds") {
        Some(t) => match t.parse::<u64>() {
            Ok(s) => Duration::from_secs(s),
            Err(_) => return ApiError::bad_request(format!("invalid timeoutSeconds {t:?}")).into_response(),
        },
        None => DEFAULT_TIMEOUT,
    };
    let streaming_list = super::flag(params, "sendInitialEvents");
    let since = match param(params, "resourceVersion").filter(|v| !v.is_empty() && *v != "0") {
        Some(v) => match v.parse::<u64>() {
            Ok(rv) => Some(rv),
            Err(_) => return ApiError::bad_request(format!("invalid resourceVersion {v:?}")).into_response(),
        },
        None => None,
    };
    let (tx, rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(256);
    // Snapshot and subscribe under one lock so no change falls between them.
    let (initial, mut last, mut changes) = {
        let store = lock(&shared.store);
        let changes = store.subscribe();
        let rv = store.resource_version();
        let initial: Result<Vec<Bytes>, Bytes> = match since {
            _ if streaming_list => {
                // watchList: the current state, then a bookmark marking its end.
                let mut lines: Vec<Bytes> = store
                    .pods()
                    .filter(|p| filter.matches(p))
                    .map(|p| line("ADDED", p))
                    .collect();
                lines.push(value_line(&json!({"type": "BOOKMARK", "object": {
                    "kind": "Pod", "apiVersion": "v1",
                    "metadata": {"resourceVersion": rv.to_string(),
                                 "annotations": {"k8s.io/initial-events-end": "true"}},
                }})));
                Ok(lines)
            }
            None => Ok(store
                .pods()
                .filter(|p| filter.matches(p))
                .map(|p| line("ADDED", p))
                .collect()),
            Some(from) => match store.events_after(from) {
                Ok(events) => Ok(events.iter().filter_map(|e| translate(e, &filter)).collect()),
                Err(oldest) => Err(value_line(&expired_event(from, oldest))),
            },
        };
        (initial, rv, changes)
    };
    let shutdown = shared.shutdown.clone();
    tokio::spawn(async move {
        let initial = match initial {
            Ok(lines) => lines,
            Err(expired) => {
                let _ = tx.send(Ok(expired)).await;
                return;
            }
        };
        for l in initial {
            if tx.send(Ok(l)).await.is_err() {
                return;
            }
        }
        let deadline = tokio::time::sleep(timeout);
        tokio::pin!(deadline);
        loop {
            tokio::select! {
                changed = changes.changed() => if changed.is_err() { return },
                _ = &mut deadline => return,
                _ = shutdown.cancelled() => return,
                _ = tx.closed() => return,
            }
            let batch: Result<Vec<Bytes>, Bytes> = {
                let store = lock(&shared.store);
                let result = match store.events_after(last) {
                    Ok(events) => Ok(events.iter().filter_map(|e| translate(e, &filter)).collect()),
                    Err(oldest) => Err(value_line(&expired_event(last, oldest))),
                };
                last = store.resource_version();
                result
            };
            match batch {
                Ok(lines) => {
                    for l in lines {
                        if tx.send(Ok(l)).await.is_err() {
                            return;
                        }
                    }
                }
                Err(expired) => {
                    let _ = tx.send(Ok(expired)).await;
                    return;
                }
            }
        }
    });
    (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        Body::from_stream(receiver_stream(rx)),
    )
        .into_response()
}

/// The channel as the body stream (ends when the producer drops its sender).
fn receiver_stream<T: Send + 'static>(rx: mpsc::Receiver<T>) -> impl futures::Stream<Item = T> + Send + 'static {
    futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|item| (item, rx)) })
}
