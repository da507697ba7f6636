//! `pods/{name}/exec` over a websocket (v5/v4.channel.k8s.io): runs the command inside the
//! container's namespaces, streams stdout/stderr on channels 1/2, takes stdin from channel 0 and
//! ends with a `Status` carrying the exit code on channel 3.
//!
//! When the client goes away (closed or broken connection) the command is not killed: as with
//! containerd, its stdin ends and it runs on (its output discarded) — bounded here by
//! [`ORPHAN_BOUND`], after which its process group is killed. An image without a shell refuses
//! `sh`/`bash`/… the way a container runtime does.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, State};
use axum::http::Uri;
use axum::response::{IntoResponse, Response};
use serde_json::json;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::logs::pick_container;
use super::{Params, flag, query_params};
use crate::cluster::{Shared, lock};
use crate::status::ApiError;

/// How long a command may outlive its client before its process group is killed.
const ORPHAN_BOUND: Duration = Duration::from_secs(30);

struct Target {
    /// The node the pod runs on.
    node: Option<String>,
    main_pid: u32,
    namespaced: bool,
    env: BTreeMap<String, String>,
    cwd: PathBuf,
    no_shell: bool,
}

/// Shells a distroless-like image lacks.
const SHELLS: &[&str] = &["sh", "bash", "dash", "ash", "zsh", "busybox"];

pub async fn exec(
    State(shared): State<Arc<Shared>>,
    Path((ns, name)): Path<(String, String)>,
    uri: Uri,
    ws: Result<WebSocketUpgrade, WebSocketUpgradeRejection>,
) -> Response {
    let params = query_params(&uri);
    let target = match find_target(&shared, &ns, &name, &params) {
        Ok(t) => t,
        Err(e) => return e.into_response(),
    };
    let command: Vec<String> = params
        .iter()
        .filter(|(k, _)| k == "command")
        .map(|(_, v)| v.clone())
        .collect();
    if command.is_empty() {
        return ApiError::bad_request("you must specify at least 1 command").into_response();
    }
    let Ok(ws) = ws else {
        return ApiError::bad_request("exec needs a websocket upgrade (v5.channel.k8s.io or v4.channel.k8s.io)")
            .into_response();
    };
    if let Err(e) = drive_rail_counters(&shared, target.node.clone()).await {
        return e.into_response();
    }
    let stdin = flag(&params, "stdin");
    let stdin_cut = if stdin {
        lock(&shared.faults).take_exec_stdin_cut()
    } else {
        None
    };
    let shutdown = shared.shutdown.clone();
    ws.protocols(["v5.channel.k8s.io", "v4.channel.k8s.io"])
        .on_upgrade(move |socket| async move {
            tokio::select! {
                _ = session(socket, target, command, stdin, stdin_cut) => {}
                _ = shutdown.cancelled() => {}
            }
        })
}

fn find_target(shared: &Shared, ns: &str, name: &str, params: &Params) -> Result<Target, ApiError> {
    let key = (ns.to_string(), name.to_string());
    let pod = lock(&shared.store)
        .get(&key)
        .cloned()
        .ok_or_else(|| ApiError::not_found("pods", name))?;
    let phase = pod.status.as_ref().and_then(|s| s.phase.clone()).unwrap_or_default();
    if phase == "Succeeded" || phase == "Failed" {
        return Err(ApiError::bad_request(format!(
            "cannot exec into a container in a completed pod; current phase is {phase}"
        )));
    }
    let container = pick_container(&pod, params, "exec")?;
    let uid = pod.metadata.uid.clone().unwrap_or_default();
    let handle = shared.handle(&key).filter(|h| h.uid == uid);
    let slot = handle.as_ref().and_then(|h| {
        let slots = lock(&h.containers);
        slots
            .get(&container)
            .and_then(|s| s.main_pid.map(|pid| (pid, s.env.clone(), s.cwd.clone(), s.no_shell)))
    });
    let Some((main_pid, env, cwd, no_shell)) = slot else {
        return Err(ApiError::bad_request(format!(
            "container {container} is not running in pod {name}"
        )));
    };
    let namespaced = shared.nodes.iter().any(|n| n.net.is_some());
    Ok(Target {
        node: pod.spec.as_ref().and_then(|s| s.node_name.clone()),
        main_pid,
        namespaced,
        env,
        cwd,
        no_shell,
    })
}

/// Brings the emulated NIC counters of `node`'s congested and lossy rails up to date before a
/// command runs there: a container reads them only through an exec (`ic-bench rail-info
/// --counters`), and a real NIC's counters are current whenever they are read. The fabric lock,
/// held throughout, keeps two execs on one node from writing the same files at once. A failure
/// is a 500 naming the node: stale counters would read as a healthy rail.
pub(crate) async fn drive_rail_counters(shared: &Arc<Shared>, node: Option<String>) -> Result<(), ApiError> {
    let Some(node) = node else { return Ok(()) };
    let shared = Arc::clone(shared);
    let driven = tokio::task::spawn_blocking(move || match lock(&shared.fabric).as_ref() {
        // A node outside the fabric has no emulated rails.
        Some(fabric) if fabric.node(&node).is_some() => fabric
            .drive_rail_counters(&node)
            .map_err(|e| format!("node {node}: {e}")),
        _ => Ok(()),
    })
    .await
    .unwrap_or_else(|e| Err(format!("the task died: {e}")));
    driven.map_err(|why| {
        ApiError::new(
            500,
            "InternalError",
            format!("driving the emulated rail counters: {why}"),
        )
    })
}

fn frame(channel: u8, data: &[u8]) -> Message {
    let mut v = Vec::with_capacity(data.len() + 1);
    v.push(channel);
    v.extend_from_slice(data);
    Message::Binary(v.into())
}

fn status_frame(code: i32) -> Message {
    let status = if code == 0 {
        json!({"metadata": {}, "status": "Success"})
    } else {
        json!({
            "metadata": {},
            "status": "Failure",
            "message": format!("command terminated with non-zero exit code: exit status {code}"),
            "reason": "NonZeroExitCode",
            "details": {"causes": [{"reason": "ExitCode", "message": code.to_string()}]},
        })
    };
    frame(3, &serde_json::to_vec(&status).unwrap_or_default())
}

fn error_frame(message: &str) -> Message {
    let status =
        json!({"metadata": {}, "status": "Failure", "message": message, "reason": "InternalError", "code": 500});
    frame(3, &serde_json::to_vec(&status).unwrap_or_default())
}

async fn session(
    mut socket: WebSocket,
    target: Target,
    command: Vec<String>,
    want_stdin: bool,
    stdin_cut: Option<u64>,
) {
    let program = std::path::Path::new(&command[0])
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    if target.no_shell && SHELLS.contains(&program) {
        // What containerd/runc answer for a missing executable.
        let msg = format!(
            "OCI runtime exec failed: exec failed: unable to start container process: exec: {:?}: executable file not found in $PATH: unknown",
            command[0]
        );
        let _ = socket.send(error_frame(&msg)).await;
        let _ = socket.send(Message::Close(None)).await;
        return;
    }
    let mut argv: Vec<std::ffi::OsString> = Vec::new();
    if target.namespaced {
        match icb_isolate::enter_pod(target.main_pid, &target.cwd) {
            Ok(prefix) => argv.extend(prefix),
            Err(e) => {
                let _ = socket.send(error_frame(&e.to_string())).await;
                return;
            }
        }
    }
    argv.extend(command.iter().map(std::ffi::OsString::from));
    let mut cmd = tokio::process::Command::new(&argv[0]);
    cmd.args(&argv[1..]);
    let mut env = target.env.clone();
    // The command resolves on the container's PATH, then the host's (tools in unusual places).
    let host_path = std::env::var("PATH").unwrap_or_default();
    if target.namespaced {
        env.entry("PATH".into())
            .and_modify(|p| p.push_str(&format!(":{host_path}")))
            .or_insert(host_path);
    }
    cmd.env_clear()
        .envs(&env)
        .current_dir(&target.cwd)
        .stdin(if want_stdin { Stdio::piped() } else { Stdio::null() })
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let mut child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            let _ = socket
                .send(error_frame(&format!("cannot start {:?}: {e}", command[0])))
                .await;
            let _ = socket.send(Message::Close(None)).await;
            return;
        }
    };
    let mut stdin = child.stdin.take();
    let (Some(mut stdout), Some(mut stderr)) = (child.stdout.take(), child.stderr.take()) else {
        let _ = socket.send(error_frame("exec pipes unavailable")).await;
        return;
    };
    let group = child.id().map(|pid| nix::unistd::Pid::from_raw(pid as i32));
    let (mut out_buf, mut err_buf) = (vec![0u8; 16 * 1024], vec![0u8; 16 * 1024]);
    let (mut out_open, mut err_open) = (true, true);
    let mut exit: Option<i32> = None;
    let mut stdin_left = stdin_cut;
    // Set once the client is gone (or the injected break happened): the command then runs on
    // without stdin and without the socket, its output discarded.
    let mut orphaned = false;
    loop {
        if !out_open && !err_open && exit.is_some() {
            break;
        }
        tokio::select! {
            n = stdout.read(&mut out_buf), if out_open => match n {
                Ok(n) if n > 0 => if socket.send(frame(1, &out_buf[..n])).await.is_err() { orphaned = true; break; },
                _ => out_open = false,
            },
            n = stderr.read(&mut err_buf), if err_open => match n {
                Ok(n) if n > 0 => if socket.send(frame(2, &err_buf[..n])).await.is_err() { orphaned = true; break; },
                _ => err_open = false,
            },
            status = child.wait(), if exit.is_none() => {
                exit = Some(status.map(crate::process::exit_code).unwrap_or(1));
            },
            // A process that exited but left its pipes open to a background child must not hang us.
            _ = tokio::time::sleep(Duration::from_secs(1)), if exit.is_some() => break,
            msg = socket.recv() => match msg {
                Some(Ok(Message::Binary(data))) if data.len() > 1 => {
                    match data[0] {
                        0 => {
                            let mut chunk = &data[1..];
                            let mut cut_now = false;
                            if let Some(left) = stdin_left.as_mut() {
                                let take = (*left).min(chunk.len() as u64) as usize;
                                chunk = &chunk[..take];
                                *left -= take as u64;
                                cut_now = *left == 0;
                            }
                            if let Some(w) = stdin.as_mut() && w.write_all(chunk).await.is_err() { stdin = None; }
                            if cut_now {
                                // The injected network break: the connection ends without a
                                // status; the command sees end-of-input.
                                orphaned = true;
                                break;
                            }
                        }
                        255 if data[1] == 0 => stdin = None,
                        _ => {}
                    }
                }
                Some(Ok(Message::Close(_))) | None | Some(Err(_)) => { orphaned = true; break; }
                _ => {}
            },
        }
    }
    if orphaned {
        drop(socket);
        drop(stdin);
        run_orphaned(child, stdout, stderr, exit.is_some(), group).await;
        return;
    }
    let _ = socket.send(status_frame(exit.unwrap_or(1))).await;
    let _ = socket.send(Message::Close(None)).await;
}

/// The client is gone: the command runs on without stdin (its output discarded) until it exits,
/// at most [`ORPHAN_BOUND`]; then its process group is killed.
async fn run_orphaned(
    mut child: tokio::process::Child,
    mut stdout: tokio::process::ChildStdout,
    mut stderr: tokio::process::ChildStderr,
    exited: bool,
    group: Option<nix::unistd::Pid>,
) {
    let drain = async {
        let (mut out_sink, mut err_sink) = (tokio::io::sink(), tokio::io::sink());
        let (_, _) = tokio::join!(
            tokio::io::copy(&mut stdout, &mut out_sink),
            tokio::io::copy(&mut stderr, &mut err_sink)
        );
        if !exited {
            let _ = child.wait().await;
        }
    };
    if tokio::time::timeout(ORPHAN_BOUND, drain).await.is_err()
        && let Some(pgid) = group
    {
        let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGKILL);
    }
}
