//! Readiness probes (exec, tcpSocket, httpGet), run the way the kubelet runs them but at least once
//! a second, so "Ready" means what the pod's author said it means (e.g. the server listens).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use k8s_openapi::api::core::v1::{ContainerPort, Probe};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use tokio_util::sync::CancellationToken;

/// Where a probe runs.
pub struct ProbeTarget {
    pub netns: Option<String>,
    pub main_pid: Option<u32>,
    pub pod_ip: String,
    pub env: BTreeMap<String, String>,
    pub cwd: PathBuf,
    pub ports: Vec<ContainerPort>,
}

fn port_number(port: &IntOrString, ports: &[ContainerPort]) -> Option<i32> {
    match port {
        IntOrString::Int(p) => Some(*p),
        IntOrString::String(name) => name.parse().ok().or_else(|| {
            ports
                .iter()
                .find(|p| p.name.as_deref() == Some(name))
                .map(|p| p.container_port)
        }),
    }
}

/// Runs `argv` (inside the container's namespaces when `enter`, else in the node's network
/// namespace only) and returns (success, stdout).
async fn run(target: &ProbeTarget, argv: Vec<String>, enter_container: bool, limit: Duration) -> (bool, String) {
    let prefix = match (&target.netns, target.main_pid) {
        (Some(_), Some(pid)) if enter_container => icb_isolate::enter_pod(pid, &target.cwd),
        (Some(netns), _) => icb_isolate::enter_node(netns),
        _ => Ok(Vec::new()),
    };
    let Ok(prefix) = prefix else {
        return (false, String::new());
    };
    let mut full: Vec<String> = prefix.iter().map(|a| a.to_string_lossy().into_owned()).collect();
    full.extend(argv);
    let Some((program, args)) = full.split_first() else {
        return (false, String::new());
    };
    let mut cmd = tokio::process::Command::new(program);
    cmd.args(args)
        .env_clear()
        .envs(&target.env)
        .current_dir(&target.cwd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true);
    match tokio::time::timeout(limit, cmd.output()).await {
        Ok(Ok(out)) => (out.status.success(), String::from_utf8_lossy(&out.stdout).into_owned()),
        _ => (false, String::new()),
    }
}

/// One probe attempt.
pub async fn check(probe: &Probe, target: &ProbeTarget) -> bool {
    let limit = Duration::from_secs(probe.timeout_seconds.unwrap_or(1).max(1) as u64);
    if let Some(exec) = &probe.exec {
        let command = exec.command.clone().unwrap_or_default();
        if command.is_empty() {
            return false;
        }
        return run(target, command, true, limit).await.0;
    }
    if let Some(tcp) = &probe.tcp_socket {
        let Some(port) = port_number(&tcp.port, &target.ports) else {
            return false;
        };
        let host = tcp.host.clone().unwrap_or_else(|| target.pod_ip.clone());
        let script = format!("exec 3<>/dev/tcp/{host}/{port}");
        return run(target, vec!["bash".into(), "-c".into(), script], false, limit)
            .await
            .0;
    }
    if let Some(http) = &probe.http_get {
        let Some(port) = port_number(&http.port, &target.ports) else {
            return false;
        };
        let host = http.host.clone().unwrap_or_else(|| target.pod_ip.clone());
        let path = http.path.clone().unwrap_or_else(|| "/".into());
        let script = format!(
            "exec 3<>/dev/tcp/{host}/{port} && printf 'GET %s HTTP/1.0\\r\\nHost: %s\\r\\n\\r\\n' '{path}' '{host}' >&3 && head -n1 <&3"
        );
        let (ok, out) = run(target, vec!["bash".into(), "-c".into(), script], false, limit).await;
        let code = out.split_whitespace().nth(1).and_then(|c| c.parse::<u16>().ok());
        return ok && code.is_some_and(|c| (200..400).contains(&c));
    }
    // gRPC probes are not emulated: treated as passing.
    true
}

/// Probes until `stop`, calling `report(ready)` whenever readiness changes (thresholds honoured).
pub async fn readiness_loop(probe: Probe, target: ProbeTarget, stop: CancellationToken, report: impl Fn(bool)) {
    let delay = Duration::from_secs(probe.initial_delay_seconds.unwrap_or(0).max(0) as u64);
    let period = Duration::from_secs(probe.period_seconds.unwrap_or(10).max(1) as u64).min(Duration::from_secs(1));
    let need_ok = probe.success_threshold.unwrap_or(1).max(1);
    let need_fail = probe.failure_threshold.unwrap_or(3).max(1);
    tokio::select! {
        _ = tokio::time::sleep(delay) => {}
        _ = stop.cancelled() => return,
    }
    let (mut ready, mut oks, mut fails) = (false, 0, 0);
    loop {
        let ok = tokio::select! {
            ok = check(&probe, &target) => ok,
            _ = stop.cancelled() => return,
        };
        if ok {
            oks += 1;
            fails = 0;
        } else {
            fails += 1;
            oks = 0;
        }
        if !ready && oks >= need_ok {
            ready = true;
            report(true);
        } else if ready && fails >= need_fail {
            ready = false;
            report(false);
        }
        // Until first ready, retry quickly so a listening server is seen at once.
        let wait = if ready {
            period
        } else {
            period.min(Duration::from_millis(100))
        };
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = stop.cancelled() => return,
        }
    }
}
