//! The node agent (a kubelet in miniature): runs a bound pod's containers as local processes in
//! the node's namespaces, keeps their output as logs, and reports Pending → Running →
//! Succeeded/Failed, image pull failures, crash loops, deadlines and deletions in the pod status.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use icb_isolate::Sandbox;
use k8s_openapi::api::core::v1::{
    Container, ContainerState, ContainerStateRunning, ContainerStateTerminated, ContainerStatus, Pod, PodIP,
};
use nix::sys::signal::Signal;
use tokio::io::AsyncReadExt;
use tokio_util::sync::CancellationToken;

use crate::cluster::{KillReason, PodHandle, Shared, lock, set_condition, waiting};
use crate::config::ImageConfig;
use crate::logbuf::LogBuf;
use crate::probe::{ProbeTarget, readiness_loop};
use crate::process::{self, Placement};
use crate::store::now;

mod init;
mod security;
mod spec;

use spec::*;

/// Set in the cluster's environment: a pod's entry program applies the container's
/// securityContext itself (after setting up its root filesystem as root, as a container runtime
/// does), from the `setpriv` options in [`SETPRIV_ENV`]; the agent then starts it as root.
pub const ENTRY_CREDENTIALS_ENV: &str = "ICB_TESTCLUSTER_ENTRY_CREDENTIALS";
/// The container's securityContext as `setpriv` options, in its environment (see
/// [`ENTRY_CREDENTIALS_ENV`]); absent when there is nothing to apply.
pub const SETPRIV_ENV: &str = "ICB_TESTCLUSTER_SETPRIV";

/// Starts the agent's work on a freshly bound pod.
pub fn start(shared: Arc<Shared>, handle: Arc<PodHandle>, pod: Pod, node: usize) {
    tokio::spawn(async move {
        run_pod(&shared, &handle, pod, node).await;
        handle.mark_done();
        shared.schedule_pending();
    });
}

/// Sleeps unless the pod is being stopped first; true when the full time passed.
async fn sleep_unless_killed(handle: &PodHandle, d: Duration) -> bool {
    sleep_unless(&handle.kill, d).await
}

/// Sleeps unless `stop` is cancelled first; true when the full time passed.
async fn sleep_unless(stop: &CancellationToken, d: Duration) -> bool {
    tokio::select! {
        _ = tokio::time::sleep(d) => true,
        _ = stop.cancelled() => false,
    }
}

fn update_container(shared: &Shared, handle: &PodHandle, name: &str, change: impl FnOnce(&mut ContainerStatus)) {
    shared.update_pod(&handle.key, &handle.uid, |pod| {
        let st = pod.status.get_or_insert_with(Default::default);
        let mut statuses = st
            .container_statuses
            .iter_mut()
            .flatten()
            .chain(st.init_container_statuses.iter_mut().flatten());
        if let Some(cs) = statuses.find(|c| c.name == name) {
            change(cs);
        }
        refresh(pod);
    });
}

/// Recomputes phase and readiness from the container states (a pod the agent failed on purpose,
/// e.g. DeadlineExceeded, keeps its verdict; one whose init container failed for good is Failed,
/// what `kubectl get` shows as `Init:Error`).
pub fn refresh(pod: &mut Pod) {
    let init = init::progress(pod);
    let st = pod.status.get_or_insert_with(Default::default);
    if st.reason.is_some() && st.phase.as_deref() == Some("Failed") {
        return;
    }
    if let Some(init) = init {
        init.record(st);
        if init == init::Progress::Failed {
            return;
        }
    }
    let cs = st.container_statuses.clone().unwrap_or_default();
    let state = |c: &ContainerStatus| c.state.clone().unwrap_or_default();
    let all_terminated = !cs.is_empty() && cs.iter().all(|c| state(c).terminated.is_some());
    let all_started = cs.iter().all(|c| {
        let s = state(c);
        s.running.is_some()
            || s.terminated.is_some()
            || c.restart_count > 0
            || s.waiting.as_ref().and_then(|w| w.reason.as_deref()) == Some("CrashLoopBackOff")
    });
    let phase = if all_terminated {
        if cs.iter().all(|c| state(c).terminated.is_some_and(|t| t.exit_code == 0)) {
            "Succeeded"
        } else {
            "Failed"
        }
    } else if all_started {
        "Running"
    } else {
        "Pending"
    };
    st.phase = Some(phase.to_string());
    let ready = phase == "Running" && cs.iter().all(|c| c.ready);
    let (value, reason) = match (ready, all_terminated) {
        (true, _) => ("True", None),
        (false, true) => ("False", Some("PodCompleted")),
        (false, false) => ("False", Some("ContainersNotReady")),
    };
    set_condition(st, "ContainersReady", value, reason, None);
    set_condition(st, "Ready", value, reason, None);
}

/// The pod's Ready condition is True.
pub fn is_pod_ready(pod: &Pod) -> bool {
    pod.status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
}

struct Prepared {
    container: Container,
    argv: Vec<String>,
    env: BTreeMap<String, String>,
    /// The image has no shell (exec of `sh` fails).
    no_shell: bool,
    /// A crash fault to apply: (after start, exit code).
    crash: Option<(Duration, i32)>,
    /// Its securityContext, applied to the process (`security`).
    credentials: icb_isolate::Credentials,
    /// What stops it: the pod's kill, or for a native sidecar also the end of the main containers.
    stop: CancellationToken,
}

async fn run_pod(shared: &Arc<Shared>, handle: &Arc<PodHandle>, pod: Pod, node_idx: usize) {
    let spec = pod.spec.clone().unwrap_or_default();
    let node = &shared.nodes[node_idx];
    let pod_ip = node.ip.to_string();
    if let Some(secs) = spec.active_deadline_seconds {
        let (h, sh) = (handle.clone(), shared.clone());
        tokio::spawn(async move {
            if sleep_unless_killed(&h, Duration::from_secs(secs.max(0) as u64)).await {
                // The verdict first, so no watcher sees a plain "Failed" from the killed containers.
                mark_deadline_exceeded(&sh, &h);
                h.request_kill(KillReason::Deadline, Duration::ZERO);
            }
        });
    }
    let pod_name = pod.metadata.name.clone().unwrap_or_default();
    let uid8: String = handle.uid.chars().take(8).collect();
    let cwd = shared
        .work_dir
        .join("pods")
        .join(format!("{}_{}_{}", handle.key.0, pod_name, uid8));
    let _ = std::fs::create_dir_all(&cwd);

    // Image "pull": resolve every image; faults and unmapped images loop in ImagePullBackOff.
    let prepared = loop {
        let mut ready = Vec::new();
        let mut failing = Vec::new();
        for c in spec.init_containers.iter().flatten().chain(&spec.containers) {
            let image_name = c.image.clone().unwrap_or_default();
            let image = shared.config.resolve_image(&image_name);
            let bin = image.and_then(|i| bin_dir(&shared.work_dir, &i.program));
            let ns = handle.key.0.clone();
            let secret = |name: &str, key: &str| crate::api::secrets::resolve(shared, &ns, name, key);
            let mut env = match container_env(
                image,
                bin.as_deref(),
                &pod,
                c,
                &pod_ip,
                &node.config.runtime_env,
                &secret,
            ) {
                Ok(env) => env,
                Err(msg) => {
                    // The kubelet's CreateContainerConfigError: retried until the Secret exists.
                    update_container(shared, handle, &c.name, |cs| {
                        cs.state = Some(waiting("CreateContainerConfigError", Some(msg.to_string())))
                    });
                    failing.push((c.name.clone(), String::new()));
                    continue;
                }
            };
            filesystem_env(&pod, c, &cwd, &mut env);
            let pull_fault = lock(&shared.faults).pull_fails(&image_name);
            let unknown = image.is_none() && !shared.config.run_unknown_images_as_is;
            match container_command(image, c, &env) {
                Some(argv) if !pull_fault && !unknown => ready.push(Prepared {
                    container: c.clone(),
                    argv,
                    env,
                    no_shell: image.is_some_and(|i| !i.shell),
                    crash: None,
                    credentials: security::credentials(&spec, c),
                    stop: handle.kill.clone(),
                }),
                _ => failing.push((c.name.clone(), image_name)),
            }
        }
        if failing.is_empty() {
            break ready;
        }
        // (An empty image name: a configuration error, already reported above.)
        for (name, image) in failing.iter().filter(|(_, i)| !i.is_empty()) {
            let msg = format!("failed to pull and unpack image \"{image}\": {image}: not found (emulated registry)");
            update_container(shared, handle, name, |cs| {
                cs.state = Some(waiting("ErrImagePull", Some(msg)))
            });
        }
        if !sleep_unless_killed(handle, shared.config.backoff).await {
            return finish(shared, handle);
        }
        // A missing Secret alone is retried after one backoff (no image pull to back off from).
        if failing.iter().all(|(_, i)| i.is_empty()) {
            continue;
        }
        for (name, image) in failing.iter().filter(|(_, i)| !i.is_empty()) {
            let msg = format!("Back-off pulling image \"{image}\"");
            update_container(shared, handle, name, |cs| {
                cs.state = Some(waiting("ImagePullBackOff", Some(msg)))
            });
        }
        if !sleep_unless_killed(handle, shared.config.backoff).await {
            return finish(shared, handle);
        }
    };

    let host_ipc = spec.host_ipc == Some(true);
    let host_pid = spec.host_pid == Some(true);
    // Containers of one pod share an IPC namespace, held by a sandbox (the pause container).
    let sandbox = match &node.net {
        Some(net) if !host_ipc && prepared.len() > 1 => match Sandbox::start(&net.netns, &shared.run_tag.to_string()) {
            Ok(sandbox) => Some(sandbox),
            Err(e) => {
                eprintln!("icb-testcluster: pod {pod_name}: no shared IPC namespace for its containers: {e}");
                None
            }
        },
        _ => None,
    };
    let placement = Placement {
        node: node.net.clone(),
        host_ipc,
        host_pid,
        ipc_of: sandbox.as_ref().map(Sandbox::pid),
    };
    shared.update_pod(&handle.key, &handle.uid, |p| {
        let st = p.status.get_or_insert_with(Default::default);
        st.pod_ip = Some(pod_ip.clone());
        st.pod_ips = Some(vec![PodIP { ip: pod_ip.clone() }]);
    });

    let restart_policy = spec.restart_policy.clone().unwrap_or_else(|| "Always".into());
    let init_names: Vec<&str> = spec.init_containers.iter().flatten().map(|c| c.name.as_str()).collect();
    let (init, main): (Vec<Prepared>, Vec<Prepared>) = prepared
        .into_iter()
        .partition(|p| init_names.contains(&p.container.name.as_str()));
    let run = RunContext {
        placement,
        cwd,
        pod_ip,
        policy: restart_policy,
    };
    let Some(sidecars) = init::run_in_order(shared, handle, init, &run).await else {
        drop(sandbox);
        return finish(shared, handle);
    };
    let labels = pod.metadata.labels.clone();
    let mut tasks = Vec::new();
    for mut p in main {
        p.crash = lock(&shared.faults).crash_for(labels.as_ref(), &pod_name);
        let (shared, handle, run) = (shared.clone(), handle.clone(), run.clone());
        tasks.push(tokio::spawn(async move {
            run_container(&shared, &handle, p, &run, &run.policy).await;
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
    // As a kubelet does: the native sidecars stop once the main containers have ended.
    sidecars.stop().await;
    // Dropping the sandbox kills it (blocking, bounded: it is a lone `sleep`).
    drop(sandbox);
    finish(shared, handle);
}

/// Records the pod-level outcome of a stop for a reason other than its containers ending.
fn finish(shared: &Shared, handle: &PodHandle) {
    if handle.kill_reason() == Some(KillReason::Deadline) {
        mark_deadline_exceeded(shared, handle);
    }
}

fn mark_deadline_exceeded(shared: &Shared, handle: &PodHandle) {
    shared.update_pod(&handle.key, &handle.uid, |p| {
        let st = p.status.get_or_insert_with(Default::default);
        st.phase = Some("Failed".into());
        st.reason = Some("DeadlineExceeded".into());
        st.message = Some("Pod was active on the node longer than the specified deadline".into());
        set_condition(st, "ContainersReady", "False", Some("PodFailed"), None);
        set_condition(st, "Ready", "False", Some("PodFailed"), None);
    });
}

async fn pump(mut output: tokio::net::unix::pipe::Receiver, log: Arc<LogBuf>) {
    let mut buf = vec![0u8; 16 * 1024];
    while let Ok(n) = output.read(&mut buf).await {
        if n == 0 {
            break;
        }
        log.append(&buf[..n]);
    }
}

/// Where and how a pod's containers run.
#[derive(Clone)]
struct RunContext {
    placement: Placement,
    cwd: PathBuf,
    pod_ip: String,
    /// The pod's restartPolicy.
    policy: String,
}

/// Runs one container, restarting it as `policy` says; its last exit code, or None when it was
/// stopped before it ran.
async fn run_container(
    shared: &Arc<Shared>,
    handle: &Arc<PodHandle>,
    p: Prepared,
    run: &RunContext,
    policy: &str,
) -> Option<i32> {
    let (placement, cwd, pod_ip) = (&run.placement, run.cwd.as_path(), run.pod_ip.as_str());
    let stop = p.stop.clone();
    let crash = p.crash;
    let name = p.container.name.clone();
    let cwd = p
        .container
        .working_dir
        .as_ref()
        .map(PathBuf::from)
        .filter(|d| d.is_dir())
        .unwrap_or(cwd.to_path_buf());
    // A kubelet runs as root; an emulation started by another user cannot switch users, and
    // runs the container as that user, as before. Pods of the host-isolation cluster are plain
    // processes sharing the host's IPC, PID and network namespaces: a user of their own there
    // would be half a container (UCX would still pick shared memory between a root pod and a
    // uid 65532 one, and fail), so they keep the cluster's user too. An entry program that sets
    // up its own root filesystem first (scripts/image-check's chroot) is handed the credentials
    // to drop to.
    let mut env = p.env.clone();
    let mut credentials = None;
    if icb_isolate::is_root() && placement.node.is_some() {
        if std::env::var_os(ENTRY_CREDENTIALS_ENV).is_some() {
            let opts = p.credentials.setpriv_options();
            if !opts.is_empty() {
                env.insert(SETPRIV_ENV.to_string(), opts.join(" "));
            }
        } else {
            credentials = Some(p.credentials.clone());
        }
    }
    let mut spec = placement.spec(&p.argv, &env, &cwd, &shared.run_tag);
    if let Some(c) = credentials {
        spec = spec.credentials(c);
    }
    let mut restarts: u32 = 0;
    loop {
        if stop.is_cancelled() {
            return None;
        }
        let log = Arc::new(LogBuf::new());
        {
            let mut slots = lock(&handle.containers);
            let slot = slots.entry(name.clone()).or_default();
            slot.previous = slot.logs.replace(log.clone());
            slot.env = p.env.clone();
            slot.cwd = cwd.clone();
            slot.no_shell = p.no_shell;
        }
        let started_at = now();
        let spawned = match p.argv.is_empty() {
            true => Err("empty command".to_string()),
            false => spec.spawn().map_err(|e| e.to_string()),
        };
        let (code, reason, message) = match spawned {
            Err(e) => {
                log.append(format!("failed to start container {name:?}: {e}\n").as_bytes());
                (128, "StartError", Some(e))
            }
            Ok(mut pod) => {
                let launcher = pod.pid();
                let pgid = launcher as i32;
                lock(&shared.groups).insert(pgid);
                let main_pid = pod.main_pid(Duration::from_secs(2)).await.or(Some(launcher));
                if let Some(slot) = lock(&handle.containers).get_mut(&name) {
                    slot.main_pid = main_pid;
                    slot.pgid = Some(pgid);
                }
                let pump_task = pod.take_output().map(|output| tokio::spawn(pump(output, log.clone())));
                let probing = CancellationToken::new();
                let has_probe = p.container.readiness_probe.is_some();
                if let Some(probe) = p.container.readiness_probe.clone() {
                    let target = ProbeTarget {
                        netns: placement.node.as_ref().map(|n| n.netns.clone()),
                        main_pid,
                        pod_ip: pod_ip.to_string(),
                        env: p.env.clone(),
                        cwd: cwd.clone(),
                        ports: p.container.ports.clone().unwrap_or_default(),
                    };
                    let (sh, h, n, stop) = (shared.clone(), handle.clone(), name.clone(), probing.clone());
                    tokio::spawn(async move {
                        readiness_loop(probe, target, stop, |ready| {
                            update_container(&sh, &h, &n, |cs| cs.ready = ready)
                        })
                        .await;
                    });
                }
                let started = started_at.clone();
                update_container(shared, handle, &name, |cs| {
                    cs.state = Some(ContainerState {
                        running: Some(ContainerStateRunning {
                            started_at: Some(started),
                        }),
                        ..Default::default()
                    });
                    cs.ready = !has_probe;
                    cs.started = Some(true);
                    cs.container_id = Some(format!("emulated://{launcher}"));
                });
                let crash_timer = async {
                    match crash {
                        Some((after, _)) => tokio::time::sleep(after).await,
                        None => std::future::pending().await,
                    }
                };
                let (status, forced) = tokio::select! {
                    s = pod.wait() => (s.ok(), None),
                    _ = stop.cancelled() => {
                        let grace = handle.grace();
                        if !grace.is_zero() {
                            match (placement.node.is_some(), main_pid) {
                                (true, Some(pid)) => process::signal_pid(pid, Signal::SIGTERM),
                                _ => process::signal_group(pgid, Signal::SIGTERM),
                            }
                            if let Ok(s) = tokio::time::timeout(grace, pod.wait()).await {
                                (s.ok(), None)
                            } else {
                                process::signal_group(pgid, Signal::SIGKILL);
                                (tokio::time::timeout(Duration::from_secs(5), pod.wait()).await.ok().and_then(|s| s.ok()), None)
                            }
                        } else {
                            process::signal_group(pgid, Signal::SIGKILL);
                            (tokio::time::timeout(Duration::from_secs(5), pod.wait()).await.ok().and_then(|s| s.ok()), None)
                        }
                    }
                    _ = crash_timer => {
                        process::signal_group(pgid, Signal::SIGKILL);
                        let s = tokio::time::timeout(Duration::from_secs(5), pod.wait()).await.ok().and_then(|s| s.ok());
                        (s, crash.map(|(_, code)| code))
                    }
                };
                probing.cancel();
                // Whatever the container left behind in its group goes with it.
                process::signal_group(pgid, Signal::SIGKILL);
                lock(&shared.groups).remove(&pgid);
                if let Some(pump_task) = pump_task {
                    let _ = tokio::time::timeout(Duration::from_millis(500), pump_task).await;
                }
                if let Some(slot) = lock(&handle.containers).get_mut(&name) {
                    slot.main_pid = None;
                }
                let code = forced.unwrap_or_else(|| status.map(process::exit_code).unwrap_or(137));
                (code, if code == 0 { "Completed" } else { "Error" }, None)
            }
        };
        log.finish();
        let terminated = ContainerStateTerminated {
            exit_code: code,
            reason: Some(reason.to_string()),
            message,
            started_at: Some(started_at),
            finished_at: Some(now()),
            ..Default::default()
        };
        let restart = !stop.is_cancelled()
            && match policy {
                "Always" => true,
                "OnFailure" => code != 0,
                _ => false,
            };
        if !restart {
            update_container(shared, handle, &name, |cs| {
                cs.state = Some(ContainerState {
                    terminated: Some(terminated),
                    ..Default::default()
                });
                cs.ready = false;
                cs.started = Some(false);
            });
            return Some(code);
        }
        restarts += 1;
        let backoff = shared.config.backoff * 2u32.pow(restarts.min(5) - 1);
        let pod_name = handle.key.1.clone();
        let last = terminated.clone();
        update_container(shared, handle, &name, |cs| {
            cs.last_state = Some(ContainerState {
                terminated: Some(last),
                ..Default::default()
            });
            cs.state = Some(waiting(
                "CrashLoopBackOff",
                Some(format!(
                    "back-off {backoff:?} restarting failed container={} pod={pod_name}",
                    cs.name
                )),
            ));
            cs.ready = false;
            cs.started = Some(false);
            cs.restart_count += 1;
        });
        if !sleep_unless(&stop, backoff).await {
            update_container(shared, handle, &name, |cs| {
                cs.state = Some(ContainerState {
                    terminated: Some(terminated),
                    ..Default::default()
                });
            });
            return Some(code);
        }
    }
}
