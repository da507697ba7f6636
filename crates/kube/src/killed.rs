//! Whether a pod ended on its own or was ended from outside (a kubelet, a person, a
//! preemption): a sweep counts a pair killed from outside against neither of its nodes.

use k8s_openapi::api::core::v1::Pod;

/// Whether a pod's process was killed from outside rather than ending on its own: the pod was
/// evicted (`status.reason` `Evicted`), or a container terminated by a signal (its `signal`, or
/// the runtime's exit code 128+9 / 128+15) or `OOMKilled`. ic-bench's own sides exit 0, 1, 2 or
/// 130 (Ctrl-C), never with those.
pub fn killed(pod: &Pod) -> bool {
    let Some(status) = pod.status.as_ref() else {
        return false;
    };
    if status.reason.as_deref() == Some("Evicted") {
        return true;
    }
    let terminated = status
        .container_statuses
        .iter()
        .flatten()
        .filter_map(|c| c.state.as_ref()?.terminated.as_ref());
    terminated
        .into_iter()
        .any(|t| t.signal.is_some() || matches!(t.exit_code, 137 | 143) || t.reason.as_deref() == Some("OOMKilled"))
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
    fn killed_is_a_signal_an_oom_kill_or_an_eviction_never_an_own_exit() {
        let ended = |terminated: serde_json::Value| {
            pod_json(serde_json::json!({"containerStatuses": [{
                "name": "bench", "image": "i", "imageID": "", "ready": false, "restartCount": 0,
                "state": {"terminated": terminated}}]}))
        };
        for t in [
            serde_json::json!({"exitCode": 137}),
            serde_json::json!({"exitCode": 143}),
            serde_json::json!({"exitCode": 1, "reason": "OOMKilled"}),
            serde_json::json!({"exitCode": 0, "signal": 9}),
        ] {
            assert!(killed(&ended(t.clone())), "{t}");
        }
        for code in [0, 1, 2, 130] {
            assert!(
                !killed(&ended(serde_json::json!({"exitCode": code, "reason": "Error"}))),
                "{code}"
            );
        }
        assert!(killed(&pod_json(
            serde_json::json!({"phase": "Failed", "reason": "Evicted"})
        )));
        assert!(!killed(&pod_json(serde_json::json!({"phase": "Running"}))));
    }
}
