//! `ic-bench pair` on the emulated cluster: real ic-bench and real UCX in the pods, placements that
//! decide the transport, the verdict that follows, and bench pods modelled on a reference pod.

use crate::pair_kube_support as support;

use icb_kube::k8s_openapi::api::core::v1::Pod;
use serde_json::{Value, json};
use std::time::Duration;
use support::*;

const LIMIT: Duration = Duration::from_secs(120);

fn args<'a>(prefill: &'a str, decode: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut a = vec!["--prefill", prefill, "--decode", decode, "-o", "json"];
    a.extend_from_slice(FAST);
    a.extend_from_slice(extra);
    a
}

/// The verdict and each case's verdict, for assertion messages.
fn verdicts(r: &Value) -> String {
    let cases: Vec<String> = r["cases"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|c| format!("{} {} {}: {}", c["test"], c["size"], c["status"], c["verdict"]))
        .collect();
    format!("{}\n{}", r["verdict"], cases.join("\n"))
}

fn data_paths(r: &Value) -> Vec<String> {
    r["verdict"]["data_paths"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap().to_string())
        .collect()
}

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
    assert!(data_paths(&r).contains(&"tcp".to_string()), "{}", r["verdict"]);
    let hint = r["verdict"]["hint"].as_str().unwrap_or_default();
    assert!(hint.contains("IPC/PID namespaces"), "{hint}");
    assert!(!r["server"]["ucx_version"].as_str().unwrap().is_empty());
    assert!(!r["client"]["ucx_version"].as_str().unwrap().is_empty());
}

#[test]
fn same_node_with_host_ipc_uses_shared_memory_and_passes() {
    let Some(cluster) = cluster("same_node_with_host_ipc") else {
        return;
    };
    // Bandwidth floors are not what this test is about (the 2-core CI machine is noisy).
    let run = run_pair(
        &cluster,
        &args("node/gpu-1", "node/gpu-1", &["--host-ipc", "--min-host-bw", "0.001"]),
        LIMIT,
    );
    let r = run.report();
    assert_eq!(run.code, 0, "{}", verdicts(&r));
    assert_eq!(r["placement"]["locality"], "same_host");
    assert_ne!(r["verdict"]["status"], "fail");
    assert!(
        data_paths(&r).contains(&"shared_memory".to_string()),
        "{}",
        r["verdict"]
    );
    for pod in run.created_pods() {
        assert_eq!(pod.spec.unwrap().host_ipc, Some(true));
    }
    assert!(leftover_via_api(&cluster).is_empty());
}

#[test]
fn two_nodes_go_over_tcp_on_the_veth_and_fail_for_lack_of_rdma() {
    let Some(cluster) = cluster("two_nodes_tcp") else {
        return;
    };
    let run = run_pair(&cluster, &args("node/gpu-1", "node/gpu-2", &[]), LIMIT);
    assert_eq!(run.code, 1, "{run:#?}");
    let r = run.report();
    assert_eq!(r["placement"]["locality"], "different_hosts");
    assert_eq!(r["placement"]["prefill"]["host"], "gpu-1");
    assert_eq!(r["placement"]["decode"]["host"], "gpu-2");
    let server_ip = cluster.node_ip("gpu-2").unwrap().to_string();
    assert!(
        r["placement"]["decode"]["address"]
            .as_str()
            .unwrap()
            .starts_with(&format!("{server_ip}:"))
    );
    assert_eq!(r["verdict"]["status"], "fail");
    assert!(
        r["verdict"]["reason"].as_str().unwrap().contains("no RDMA transport"),
        "{}",
        r["verdict"]
    );
    assert!(leftover_via_api(&cluster).is_empty());
}

/// A serving pod as seed 002 has them: UCX/NCCL env, GPU visibility, GPUs + an RDMA NIC,
/// capabilities, hostIPC, a memory-backed /dev/shm, and one env var that must not be copied.
fn serving_pod(name: &str, node: &str, gpus: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "decode"},
            "annotations": {"k8s.v1.cni.cncf.io/networks": "rdma-net"}},
        "spec": {
            "nodeName": node,
            "hostIPC": true,
            "containers": [
                {"name": "sidecar", "image": "proxy:1", "command": ["sleep", "600"]},
                {"name": "sglang", "image": "serving:1", "command": ["sleep", "600"],
                 "env": [
                    {"name": "UCX_TLS", "value": "sysv,posix,cma,tcp,self"},
                    {"name": "UCX_RNDV_SCHEME", "value": "get_zcopy"},
                    {"name": "NCCL_IB_HCA", "value": "mlx5_0"},
                    {"name": "NVIDIA_VISIBLE_DEVICES", "value": "GPU-4650fca3"},
                    {"name": "SGL_LOGURU_PATH", "value": "/logs/decode.log"}],
                 "resources": {"limits": {"nvidia.com/gpu": gpus, "rdma/ib": "1", "cpu": "24"},
                               "requests": {"nvidia.com/gpu": gpus, "rdma/ib": "1", "cpu": "24"}},
                 "securityContext": {"capabilities": {"add": ["IPC_LOCK", "SYS_PTRACE"]}},
                 "volumeMounts": [{"name": "shm", "mountPath": "/dev/shm"}]}],
            "volumes": [{"name": "shm", "emptyDir": {"medium": "Memory", "sizeLimit": "1Gi"}}]
        }
    })
}

#[test]
fn pod_targets_copy_the_transport_spec_and_share_ipc_like_the_reference() {
    let Some(cluster) = cluster("pod_targets_copy_the_transport_spec") else {
        return;
    };
    create_reference_pod(&cluster, serving_pod("decode-0", "gpu-2", "2"));
    let run = run_pair(
        &cluster,
        &args("pod/decode-0", "pod/decode-0", &["--min-host-bw", "0.001"]),
        LIMIT,
    );
    let pods: Vec<Pod> = run.created_pods();
    assert_eq!(pods.len(), 2, "{run:#?}");
    for pod in &pods {
        let name = pod.metadata.name.clone().unwrap();
        let ann = pod.metadata.annotations.clone().unwrap();
        assert_eq!(ann["ic-bench.dev/modelled-on"], "pod/decode-0");
        assert_eq!(
            ann["k8s.v1.cni.cncf.io/networks"], "rdma-net",
            "{name}: network attachment"
        );
        let spec = pod.spec.clone().unwrap();
        assert_eq!(spec.host_ipc, Some(true), "{name}");
        assert_eq!(icb_kube::podspec::pinned_node(pod).as_deref(), Some("gpu-2"));
        let c = &spec.containers[0];
        let env: Vec<(String, String)> = c
            .env
            .iter()
            .flatten()
            .map(|e| (e.name.clone(), e.value.clone().unwrap_or_default()))
            .collect();
        for (k, v) in [
            ("UCX_TLS", "sysv,posix,cma,tcp,self"),
            ("UCX_RNDV_SCHEME", "get_zcopy"),
            ("NCCL_IB_HCA", "mlx5_0"),
            ("NVIDIA_VISIBLE_DEVICES", "GPU-4650fca3"),
        ] {
            assert!(
                env.contains(&(k.to_string(), v.to_string())),
                "{name}: {k} missing from {env:?}"
            );
        }
        assert!(
            !env.iter().any(|(k, _)| k == "SGL_LOGURU_PATH"),
            "{name}: copied an unrelated env var"
        );
        let res = c.resources.clone().unwrap();
        let limits = res.limits.unwrap();
        assert_eq!(limits["nvidia.com/gpu"].0, "2");
        assert_eq!(limits["rdma/ib"].0, "1");
        assert_eq!(
            limits["cpu"].0,
            icb_kube::hardening::BENCH_CPU,
            "{name}: the bench's own cpu, not the worker's"
        );
        let caps = c.security_context.clone().unwrap().capabilities.unwrap().add.unwrap();
        assert_eq!(caps, vec!["IPC_LOCK".to_string(), "SYS_PTRACE".to_string()]);
        assert_eq!(c.security_context.clone().unwrap().privileged, None);
        let shm = spec
            .volumes
            .clone()
            .unwrap()
            .into_iter()
            .find(|v| v.name == "dshm")
            .unwrap();
        assert_eq!(shm.empty_dir.unwrap().size_limit.unwrap().0, "1Gi");
    }
    // Both sides copied hostIPC from the reference, so UCX may use shared memory: pass.
    let r = run.report();
    assert_eq!(run.code, 0, "{}", verdicts(&r));
    assert_eq!(r["placement"]["decode"]["modelled_on"], "pod/decode-0");
    assert_eq!(r["placement"]["prefill"]["modelled_on"], "pod/decode-0");
    assert!(
        data_paths(&r).contains(&"shared_memory".to_string()),
        "{}",
        r["verdict"]
    );
    let warnings = r["warnings"].to_string();
    assert!(warnings.contains("only container 'sglang'"), "{warnings}");
    assert!(leftover_via_api(&cluster).is_empty());
}

#[test]
fn dry_run_yaml_parses_back_into_the_pods_a_real_run_creates() {
    // Pod objects, not transports: no namespaces needed.
    let cluster = host_cluster();
    create_reference_pod(&cluster, serving_pod("decode-0", "gpu-2", "1"));
    let mut base = vec![
        "--prefill",
        "node/gpu-1",
        "--decode",
        "pod/decode-0",
        "--run-id",
        "dryrun1",
        "--timeout",
        "2m",
    ];
    base.extend_from_slice(FAST);
    let mut dry = base.clone();
    dry.extend(["--dry-run=client", "-o", "yaml"]);
    let printed = run_pair(&cluster, &dry, LIMIT);
    assert_eq!(printed.code, 0, "{printed:#?}");
    assert!(
        printed.requests.iter().all(|r| r.method == "GET"),
        "a dry run wrote to the cluster"
    );
    let from_yaml = icb_kube::yaml::pods(&printed.stdout).unwrap();
    // The run's token Secret is shown, never its value.
    let docs = icb_kube::yaml::documents(&printed.stdout).unwrap();
    let secret = docs
        .iter()
        .find(|d| d["kind"] == "Secret")
        .expect("the token Secret is shown");
    assert_eq!(secret["metadata"]["name"], "ic-bench-dryrun1-token");
    assert!(
        secret.get("data").is_none() && secret.get("stringData").is_none(),
        "{secret}"
    );

    let real = run_pair(&cluster, &base, LIMIT);
    let created = real.created_pods();
    assert_eq!(created.len(), 2, "{real:#?}");
    assert_eq!(from_yaml[0], created[0], "server pod differs from the dry run");
    // The client's server address exists only once the server runs.
    let mut client = created[1].clone();
    for e in client.spec.as_mut().unwrap().containers[0].env.iter_mut().flatten() {
        if e.name == "IC_BENCH_SERVER" {
            e.value = Some(icb_kube::podspec::SERVER_PLACEHOLDER.into());
        }
    }
    assert_eq!(from_yaml[1], client, "client pod differs from the dry run");
    // Both read the token from the run's Secret; no pod spec carries it.
    for pod in &created {
        let env = pod.spec.as_ref().unwrap().containers[0].env.clone().unwrap_or_default();
        let token = env.iter().find(|e| e.name == "IC_BENCH_TOKEN").expect("IC_BENCH_TOKEN");
        assert!(token.value.is_none(), "a token value in the pod spec");
        let from = token.value_from.as_ref().and_then(|f| f.secret_key_ref.as_ref());
        assert_eq!(from.map(|k| k.name.as_str()), Some("ic-bench-dryrun1-token"));
    }
    assert!(
        real.requests
            .iter()
            .any(|r| r.method == "POST" && r.path.ends_with("/secrets") && r.status < 300),
        "the token Secret was created"
    );
    assert!(
        leftover_via_api(&cluster).is_empty(),
        "{:?}",
        leftover_via_api(&cluster)
    );
}

/// A Deployment whose pods run on `node` with hostIPC (as the reference for both sides).
fn deployment(name: &str, node: &str, replicas: i32) -> Value {
    json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {"labels": {"app": name}},
                "spec": {"nodeName": node, "hostIPC": true,
                         "containers": [{"name": "main", "image": "serving:1", "command": ["sleep", "600"],
                                         "env": [{"name": "UCX_TLS", "value": "sysv,posix,cma,tcp,self"}]}]}
            }
        }
    })
}

#[test]
fn deployment_targets_pick_a_ready_pod_say_which_and_read_no_deployment() {
    let Some(cluster) = cluster("deployment_targets") else {
        return;
    };
    block_on(async {
        use icb_kube::k8s_openapi::api::apps::v1::Deployment;
        let client = cluster.client().unwrap();
        let api: icb_kube::kube::Api<Deployment> = icb_kube::kube::Api::namespaced(client, cluster.namespace());
        for d in [
            deployment("llm-prefill", "gpu-1", 2),
            deployment("llm-decode", "gpu-1", 1),
        ] {
            api.create(&Default::default(), &serde_json::from_value(d).unwrap())
                .await
                .unwrap();
        }
    });
    // Wait for the workloads' pods to be Ready.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while cluster
        .pods()
        .iter()
        .filter(|p| p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Running"))
        .count()
        < 3
    {
        assert!(std::time::Instant::now() < deadline, "workload pods never ran");
        std::thread::sleep(Duration::from_millis(50));
    }
    let run = run_pair(
        &cluster,
        &args(
            "deployment/llm-prefill",
            "deployment/llm-decode",
            &["--min-host-bw", "0.001"],
        ),
        LIMIT,
    );
    assert!(
        run.stderr
            .contains("prefill: deployment/llm-prefill: picked pod/llm-prefill-")
            && run.stderr.contains("(oldest of 2 Ready, 2 total)"),
        "{}",
        run.stderr
    );
    let r = run.report();
    assert!(
        r["placement"]["prefill"]["modelled_on"]
            .as_str()
            .unwrap()
            .starts_with("pod/llm-prefill-")
    );
    assert!(
        r["placement"]["decode"]["modelled_on"]
            .as_str()
            .unwrap()
            .starts_with("pod/llm-decode-")
    );
    assert_eq!(run.code, 0, "{}", verdicts(&r));
    assert!(
        data_paths(&r).contains(&"shared_memory".to_string()),
        "{}",
        verdicts(&r)
    );
    assert!(
        !run.requests.iter().any(|r| r.path.contains("deployments")),
        "ic-bench read Deployments, which its Role does not allow"
    );
    assert!(leftover_via_api(&cluster).is_empty());
}

#[test]
fn nixl_engine_between_two_nodes_names_the_tcp_path_per_direction() {
    let Some(cluster) = cluster("nixl_two_nodes") else {
        return;
    };
    // The bench pods run this build, which finds the NIXL wheel scripts/setup unpacked.
    let run = run_pair(
        &cluster,
        &[
            "--prefill",
            "node/gpu-1",
            "--decode",
            "node/gpu-2",
            "-o",
            "json",
            "--engine",
            "nixl",
            "--sizes",
            "16KiB",
            "--batches",
            "1,4",
            "--memory",
            "host-host",
            "--max-time",
            "0.3",
        ],
        LIMIT,
    );
    assert_eq!(run.code, 1, "{run:#?}");
    let r = run.report();
    assert_eq!(r["placement"]["locality"], "different_hosts");
    let cases = r["cases"].as_array().unwrap();
    assert_eq!(cases.len(), 4, "{}", verdicts(&r));
    for c in cases {
        assert_eq!(c["engine"], "nixl");
        assert_eq!(c["measurement"]["verified"], true, "{c}");
        assert_eq!(c["transport"]["data_path"]["source"], "proto_info", "{c}");
        let class = c["transport"]["data_path"]["class"].as_str().unwrap();
        // READ is emulated over active messages on tcp, WRITE goes over tcp: both fail.
        match c["direction"].as_str().unwrap() {
            "read" => assert_eq!(class, "rma_emulated", "{c}"),
            _ => assert_eq!(class, "tcp", "{c}"),
        }
        assert_eq!(c["verdict"]["status"], "fail", "{c}");
    }
    assert!(r["server"]["nixl"]["version"].is_string(), "{}", r["server"]);
    // Both pods were started with the engine selection.
    for pod in run.created_pods() {
        let command = pod.spec.unwrap().containers[0].command.clone().unwrap_or_default();
        assert!(command.windows(2).any(|w| w == ["--engine", "nixl"]), "{command:?}");
    }
    assert!(leftover_via_api(&cluster).is_empty());
}
