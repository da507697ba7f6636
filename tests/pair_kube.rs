//! `ic-bench pair` on the emulated cluster: real ic-bench and real UCX in the pods, placements that
//! decide the transport, and the verdict that follows.

#[path = "pair_kube_support/mod.rs"]
mod support;

use std::time::Duration;
use support::*;

#[test]
fn same_node_plain_pods_fall_back_to_tcp_and_fail_with_the_namespace_hint() {
    let Some(run) = plain_pair_run("same_node_plain_pods") else {
        return;
    };
    assert_eq!(run.code, 1, "{run:#?}");
    let r = run.report();
    assert_eq!(r["placement"]["locality"], "same_host");
    assert_eq!(r["placement"]["mode"], "kubernetes");
    assert_eq!(r["placement"]["prefill"]["host"], "gpu-1");
    assert_eq!(r["placement"]["decode"]["host"], "gpu-1");
    assert!(r["placement"]["decode"]["pod"].as_str().unwrap().ends_with("-server"));
    assert!(r["placement"]["prefill"]["pod"].as_str().unwrap().ends_with("-client"));
    assert_eq!(r["verdict"]["status"], "fail");
    assert!(r["verdict"]["data_paths"].as_array().unwrap().iter().any(|c| c == "tcp"), "{}", r["verdict"]);
    let hint = r["verdict"]["hint"].as_str().unwrap_or_default();
    assert!(hint.contains("IPC/PID namespaces"), "{hint}");
    assert!(!r["server"]["ucx_version"].as_str().unwrap().is_empty());
    assert!(!r["client"]["ucx_version"].as_str().unwrap().is_empty());
}
