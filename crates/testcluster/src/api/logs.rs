//! `pods/{name}/log`: the container's merged stdout/stderr, whole or followed until the container
//! ends, with tailLines, sinceSeconds, timestamps, limitBytes and previous.

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::extract::{Path, State};
use axum::http::{StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use k8s_openapi::api::core::v1::Pod;
use tokio::sync::mpsc;

use super::{Params, flag, param, query_params};
use crate::cluster::{Shared, lock};
use crate::logbuf::LogBuf;
use crate::status::ApiError;

/// The container a request means: the one named, or the only one.
pub fn pick_container(pod: &Pod, params: &Params, verb: &str) -> Result<String, ApiError> {
    let name = pod.metadata.name.clone().unwrap_or_default();
    let containers: Vec<String> = pod
        .spec
        .iter()
        .flat_map(|s| s.containers.iter().map(|c| c.name.clone()))
        .collect();
    // An init container is named explicitly; the default is the only main container.
    let named = |c: &str| {
        containers.iter().any(|n| n == c)
            || pod
                .spec
                .iter()
                .flat_map(|s| s.init_containers.iter().flatten())
                .any(|i| i.name == c)
    };
    match param(params, "container").filter(|c| !c.is_empty()) {
        Some(c) if named(c) => Ok(c.to_string()),
        Some(c) => Err(ApiError::bad_request(format!(
            "container {c} is not valid for pod {name}"
        ))),
        None if containers.len() == 1 => Ok(containers[0].clone()),
        None => Err(ApiError::bad_request(format!(
            "a container name must be specified for pod {name}, choose one of: [{}] ({verb})",
            containers.join(" ")
        ))),
    }
}

/// Why the container has no output yet, in the API server's words.
fn waiting_error(pod: &Pod, container: &str) -> ApiError {
    let name = pod.metadata.name.clone().unwrap_or_default();
    let reason = pod
        .status
        .as_ref()
        .and_then(|s| {
            let mut all = s
                .container_statuses
                .iter()
                .flatten()
                .chain(s.init_container_statuses.iter().flatten());
            all.find(|c| c.name == container)
        })
        .and_then(|c| c.state.as_ref())
        .and_then(|s| s.waiting.as_ref())
        .and_then(|w| w.reason.clone())
        .unwrap_or_else(|| "ContainerCreating".to_string());
    ApiError::bad_request(format!(
        "container \"{container}\" in pod \"{name}\" is waiting to start: {reason}"
    ))
}

pub async fn logs(State(shared): State<Arc<Shared>>, Path((ns, name)): Path<(String, String)>, uri: Uri) -> Response {
    let params = query_params(&uri);
    match open(&shared, &ns, &name, &params) {
        Ok(response) => response,
        Err(e) => e.into_response(),
    }
}

fn number<T: std::str::FromStr>(params: &Params, name: &str) -> Result<Option<T>, ApiError> {
    match param(params, name) {
        Some(v) => v
            .parse()
            .map(Some)
            .map_err(|_| ApiError::bad_request(format!("invalid {name} {v:?}"))),
        None => Ok(None),
    }
}

fn open(shared: &Arc<Shared>, ns: &str, name: &str, params: &Params) -> Result<Response, ApiError> {
    let key = (ns.to_string(), name.to_string());
    let pod = lock(&shared.store)
        .get(&key)
        .cloned()
        .ok_or_else(|| ApiError::not_found("pods", name))?;
    let container = pick_container(&pod, params, "logs")?;
    let previous = flag(params, "previous");
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    let log: Option<Arc<LogBuf>> = shared.handle(&key).filter(|h| h.uid == uid).and_then(|h| {
        let slots = lock(&h.containers);
        let slot = slots.get(&container)?;
        if previous {
            slot.previous.clone()
        } else {
            slot.logs.clone()
        }
    });
    let Some(log) = log else {
        if previous {
            return Err(ApiError::bad_request(format!(
                "previous terminated container \"{container}\" in pod \"{name}\" not found"
            )));
        }
        return Err(waiting_error(&pod, &container));
    };
    let tail: Option<i64> = number(params, "tailLines")?;
    let since: Option<i64> = number(params, "sinceSeconds")?;
    let limit: Option<usize> = number(params, "limitBytes")?;
    let timestamps = flag(params, "timestamps");
    let follow = flag(params, "follow");
    let since_ts = since.map(|s| jiff::Timestamp::now() - jiff::SignedDuration::from_secs(s.max(0)));
    let start = log.start_offset(tail.map(|t| t.max(0) as usize), since_ts);
    let headers = [(header::CONTENT_TYPE, "text/plain")];
    if !follow {
        let mut bytes = log.read_from(start, timestamps).bytes;
        if let Some(l) = limit {
            bytes.truncate(l);
        }
        return Ok((StatusCode::OK, headers, bytes).into_response());
    }
    let (tx, rx) = mpsc::channel::<Result<Bytes, std::io::Error>>(64);
    let shutdown = shared.shutdown.clone();
    tokio::spawn(async move {
        let mut changes = log.subscribe();
        let mut offset = start;
        let mut budget = limit.unwrap_or(usize::MAX);
        loop {
            changes.borrow_and_update();
            let chunk = log.read_from(offset, timestamps);
            offset = chunk.next;
            let mut bytes = chunk.bytes;
            if bytes.len() > budget {
                bytes.truncate(budget);
            }
            budget -= bytes.len();
            if !bytes.is_empty() && tx.send(Ok(Bytes::from(bytes))).await.is_err() {
                return;
            }
            if chunk.done || budget == 0 {
                return;
            }
            tokio::select! {
                changed = changes.changed() => if changed.is_err() { return },
                _ = shutdown.cancelled() => return,
                _ = tx.closed() => return,
            }
        }
    });
    Ok((StatusCode::OK, headers, Body::from_stream(receiver_stream(rx))).into_response())
}

/// The channel as the body stream (ends when the producer drops its sender).
fn receiver_stream<T: Send + 'static>(rx: mpsc::Receiver<T>) -> impl futures::Stream<Item = T> + Send + 'static {
    futures::stream::unfold(rx, |mut rx| async move { rx.recv().await.map(|item| (item, rx)) })
}
