//! Issue 9: one test per false alarm and per miss, each on a recipe written here in the shape of
//! the public one it stands for (Dynamo DGD, plain Deployments, KServe, provider overlays).

use icb_core::checks::{Check, ProbeReport};
use icb_core::model::Status;
use icb_recipe::{Input, probe_env};

fn probe_text(yaml: &str) -> ProbeReport {
    probe_env(&[Input::Text {
        name: "recipe.yaml".into(),
        content: yaml.into(),
    }])
    .unwrap_or_else(|e| panic!("{e}"))
}

fn of<'a>(r: &'a ProbeReport, id: &str) -> Vec<&'a Check> {
    r.checks.iter().filter(|c| c.id == id).collect()
}

#[track_caller]
fn all(r: &ProbeReport, id: &str, status: Status) {
    let found = of(r, id);
    assert!(!found.is_empty(), "no {id}:\n{}", dump(r));
    for c in found {
        assert_eq!(c.status, status, "{id}: {}\n{}", c.detail, dump(r));
    }
}

fn dump(r: &ProbeReport) -> String {
    r.checks
        .iter()
        .filter(|c| c.status != Status::Ok)
        .map(|c| format!("{} {} {}", c.status.as_str(), c.id, c.detail))
        .collect::<Vec<_>>()
        .join("\n")
}

/// A healthy Dynamo v1alpha1 vLLM P/D recipe on InfiniBand; `env` is appended to both workers'
/// container env (list items), `main` to both main containers, `pod` to both extraPodSpecs.
fn dgd(env: &str, main: &str, pod: &str) -> String {
    let worker = |name: &str, sub: &str, flag: &str| {
        format!(
            r#"    {name}:
      componentType: worker
      subComponentType: {sub}
      resources:
        limits: {{gpu: "8", custom: {{rdma/ib: "8"}}}}
      sharedMemory: {{size: 80Gi}}
      extraPodSpec:
        nodeSelector: {{nvidia.com/gpu.clique: block-1}}
{pod}        mainContainer:
          image: nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.6.0
          securityContext: {{capabilities: {{add: [IPC_LOCK]}}}}
{main}          args: ["python3 -m dynamo.vllm --model m {flag}"]
          env:
            - {{name: UCX_TLS, value: "rc_x,rc,cuda_copy,cuda_ipc"}}
            - {{name: UCX_NET_DEVICES, value: "mlx5_0:1,mlx5_1:1"}}
            - {{name: NCCL_IB_HCA, value: "mlx5_0,mlx5_1"}}
            - {{name: NCCL_SOCKET_IFNAME, value: eth0}}
{env}"#
        )
    };
    format!(
        "apiVersion: nvidia.com/v1alpha1\nkind: DynamoGraphDeployment\nmetadata: {{name: pd}}\nspec:\n  backendFramework: vllm\n  services:\n{}{}",
        worker("VllmPrefillWorker", "prefill", "--is-prefill-worker"),
        worker("VllmDecodeWorker", "decode", "")
    )
}

fn env_item(name: &str, value: &str) -> String {
    format!("            - {{name: {name}, value: \"{value}\"}}\n")
}

#[test]
fn the_base_recipe_is_clean() {
    let r = probe_text(&dgd("", "", ""));
    assert_eq!(r.status, Status::Ok, "{}", dump(&r));
    assert!(dump(&r).is_empty(), "{}", dump(&r));
}

// ---------------------------------------------------------------- misses (each was exit 0)

#[test]
fn miss_shell_export_of_tcp_and_ib_disable() {
    let main = "          command: [/bin/bash, -c]\n";
    let mut y = dgd("", main, "");
    y = y.replace(
        r#"args: ["python3 -m dynamo.vllm --model m --is-prefill-worker"]"#,
        r#"args: ["export UCX_TLS=tcp NCCL_IB_DISABLE=1 && exec python3 -m dynamo.vllm --model m --is-prefill-worker"]"#,
    );
    let r = probe_text(&y);
    let prefill_tcp = of(&r, "env.ucx_tls.tcp_only")
        .into_iter()
        .find(|c| c.scope.as_deref().unwrap_or("").starts_with("prefill"))
        .unwrap();
    assert_eq!(prefill_tcp.status, Status::Fail, "{}", prefill_tcp.detail);
    assert!(
        prefill_tcp.detail.contains("command (export)"),
        "{}",
        prefill_tcp.detail
    );
    assert!(of(&r, "env.nccl_ib_disable").iter().any(|c| c.status == Status::Fail));
    assert_eq!(r.exit_code(), 1);
}

#[test]
fn miss_nccl_net_socket() {
    let r = probe_text(&dgd(&env_item("NCCL_NET", "Socket"), "", ""));
    all(&r, "env.nccl_net", Status::Fail);
    assert_eq!(r.exit_code(), 1);
}

#[test]
fn miss_ucx_net_devices_without_an_rdma_device() {
    let y = dgd("", "", "").replace("mlx5_0:1,mlx5_1:1", "eth0");
    let r = probe_text(&y);
    all(&r, "env.ucx_net_devices.rdma", Status::Fail);
    assert_eq!(r.exit_code(), 1);
}

#[test]
fn miss_ucx_and_nccl_naming_different_nics() {
    let y = dgd("", "", "").replace("value: \"mlx5_0,mlx5_1\"", "value: \"mlx5_4,mlx5_5\"");
    let r = probe_text(&y);
    all(&r, "env.nic_agreement", Status::Warn);
    assert_ne!(r.verdict, "disaggregated transport can be trusted");
}

#[test]
fn miss_gpu_direct_rdma_off() {
    let r = probe_text(&dgd(&env_item("UCX_IB_GPU_DIRECT_RDMA", "no"), "", ""));
    all(&r, "env.gpu_direct", Status::Fail);
}

#[test]
fn miss_ucx_debug_logging_left_on() {
    let r = probe_text(&dgd(&env_item("UCX_LOG_LEVEL", "debug"), "", ""));
    all(&r, "env.ucx_log_level", Status::Warn);
    assert_ne!(r.verdict, "disaggregated transport can be trusted");
}

#[test]
fn miss_tcp_through_an_envfrom_configmap_and_secret() {
    for kind in ["ConfigMap", "Secret"] {
        let (key, data, value) = if kind == "ConfigMap" {
            ("configMapRef", "data", "tcp,cuda_copy".to_string())
        } else {
            ("secretRef", "stringData", "tcp,cuda_copy".to_string())
        };
        let main = format!("          envFrom: [{{{key}: {{name: ucx-settings}}}}]\n");
        let y = format!(
            "apiVersion: v1\nkind: {kind}\nmetadata: {{name: ucx-settings}}\n{data}:\n  UCX_TLS: \"{value}\"\n---\n{}",
            dgd("", &main, "").replace(
                "            - {name: UCX_TLS, value: \"rc_x,rc,cuda_copy,cuda_ipc\"}\n",
                ""
            )
        );
        let r = probe_text(&y);
        all(&r, "env.ucx_tls.tcp_only", Status::Fail);
        let d = &of(&r, "env.ucx_tls.tcp_only")[0].detail;
        assert!(d.contains(&format!("envFrom {kind}/ucx-settings")), "{d}");
        if kind == "Secret" {
            // Known to the checks, never printed.
            assert!(!d.contains("tcp,cuda_copy"), "{d}");
            let json = serde_json::to_string(&r).unwrap();
            assert!(!json.contains("tcp,cuda_copy"), "{json}");
        }
    }
}

// ---------------------------------------------------------------- false alarms

#[test]
fn false_alarm_v1beta1_shared_memory_size() {
    let y = r#"
apiVersion: nvidia.com/v1beta1
kind: DynamoGraphDeployment
metadata: {name: b}
spec:
  components:
    - name: prefill
      type: prefill
      sharedMemorySize: 200Gi
      podTemplate: {spec: {containers: [{name: main, image: img, resources: {limits: {nvidia.com/gpu: "8", rdma/ib: "8"}}, securityContext: {capabilities: {add: [IPC_LOCK]}}}]}}
    - name: decode
      type: decode
      sharedMemorySize: 200Gi
      podTemplate: {spec: {containers: [{name: main, image: img, resources: {limits: {nvidia.com/gpu: "8", rdma/ib: "8"}}, securityContext: {capabilities: {add: [IPC_LOCK]}}}]}}
"#;
    let r = probe_text(y);
    all(&r, "pod.shm", Status::Ok);
    assert!(of(&r, "pod.shm")[0].detail.contains("200Gi"));
}

#[test]
fn false_alarm_intel_xpu_worker_with_ze_transports() {
    let y = dgd("", "", "")
        .replace("gpu: \"8\"", "gpu.intel.com/i915: \"8\"")
        .replace("rc_x,rc,cuda_copy,cuda_ipc", "rc,ze_copy,ze_ipc");
    let r = probe_text(&y);
    all(&r, "env.ucx_tls.cuda", Status::Ok);
    assert!(of(&r, "env.ucx_tls.cuda")[0].detail.contains("ze_copy"));
    // And an XPU recipe that lists CUDA transports instead is told what it lacks.
    let wrong = probe_text(&dgd("", "", "").replace("gpu: \"8\"", "gpu.intel.com/i915: \"8\""));
    all(&wrong, "env.ucx_tls.cuda", Status::Fail);
}

#[test]
fn false_alarm_xpu_and_rdma_claims_are_not_a_compute_domain() {
    let pod = "        resourceClaims:\n          - {name: xpu, resourceClaimTemplateName: intel-xpu-claim}\n          - {name: nic, resourceClaimTemplateName: rdma-nic-claim}\n";
    let y = format!(
        "{}---\napiVersion: resource.k8s.io/v1\nkind: ResourceClaimTemplate\nmetadata: {{name: intel-xpu-claim}}\nspec: {{spec: {{devices: {{requests: [{{name: x, exactly: {{deviceClassName: gpu.intel.com}}}}]}}}}}}\n",
        dgd("", "", pod)
            .replace("rdma/ib: \"8\"", "x: \"0\"")
            .replace("gpu: \"8\"", "gpu.intel.com/i915: \"8\"")
            .replace("rc_x,rc,cuda_copy,cuda_ipc", "rc,ze_copy,ze_ipc")
    );
    let r = probe_text(&y);
    for c in of(&r, "pod.rdma_resource") {
        assert_eq!(c.status, Status::Ok, "{}", c.detail);
        assert!(!c.detail.contains("ComputeDomain"), "{}", c.detail);
        assert!(
            c.detail.contains("resourceClaim nic") && !c.detail.contains("resourceClaim xpu"),
            "{}",
            c.detail
        );
    }
}

/// Seed 002's field fix: privileged + hostIPC + CUDA_VISIBLE_DEVICES computed from
/// /proc/driver/nvidia in the command, UCX_TLS=cuda_ipc,cuda_copy,tcp, no RDMA, one node.
#[test]
fn false_alarm_seed_002_fix_passes() {
    let side = |role: &str| {
        format!(
            r#"apiVersion: apps/v1
kind: Deployment
metadata: {{name: pd-sglang-{role}}}
spec:
  selector: {{matchLabels: {{app: pd-sglang-{role}}}}}
  template:
    metadata: {{labels: {{app: pd-sglang-{role}}}}}
    spec:
      hostIPC: true
      affinity:
        nodeAffinity:
          requiredDuringSchedulingIgnoredDuringExecution:
            nodeSelectorTerms: [{{matchExpressions: [{{key: kubernetes.io/hostname, operator: In, values: [gpu-node-1]}}]}}]
      containers:
        - name: pd-sglang-{role}
          image: sglang:0.4.10.post2-cu128
          securityContext: {{privileged: true, capabilities: {{add: [IPC_LOCK]}}}}
          command: [bash, -c]
          args:
            - sleep 30 && CUDA_VISIBLE_DEVICES=$(find /proc/driver/nvidia/gpus/ -mindepth 1 -maxdepth 1 -type d | sort | awk -F'/' '{{print $6}}' | while read -r d; do grep "Device Minor" "/proc/driver/nvidia/gpus/$d/information" | awk '{{print $3}}'; done | paste -sd, ) python3 -m sglang.launch_server --disaggregation-mode {role} --disaggregation-transfer-backend nixl --tp-size 2
          resources: {{limits: {{nvidia.com/gpu: 2}}}}
          env:
            - {{name: UCX_TLS, value: "cuda_ipc,cuda_copy,tcp"}}
            - {{name: UCX_MEMTYPE_CACHE, value: "n"}}
            - {{name: UCX_RNDV_SCHEME, value: get_zcopy}}
"#
        )
    };
    let r = probe_text(&format!("{}---\n{}", side("prefill"), side("decode")));
    assert_ne!(r.status, Status::Fail, "{}", dump(&r));
    assert_eq!(r.exit_code(), 0);
    all(&r, "pod.cuda_ipc_xpod", Status::Ok);
    all(&r, "env.ucx_tls.tcp_only", Status::Warn);
    // CUDA_VISIBLE_DEVICES computed by the command is seen, as a value only known at run time.
    for c in of(&r, "env.resolve") {
        assert!(
            c.detail
                .contains("CUDA_VISIBLE_DEVICES <computed by the container's command>"),
            "{}",
            c.detail
        );
    }
}

#[test]
fn false_alarm_sglang_backend_in_a_config_file() {
    let y = r#"
apiVersion: v1
kind: ConfigMap
metadata: {name: sglang-config}
data:
  prefill.yaml: |
    disaggregation-mode: prefill
    disaggregation-transfer-backend: nixl
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: sglang-prefill}
spec:
  selector: {matchLabels: {app: p}}
  template:
    spec:
      containers:
        - name: main
          image: lmsysorg/sglang:v0.5.3
          command: [python3, -m, sglang.launch_server, --config, /etc/sglang/prefill.yaml, --disaggregation-mode, prefill]
          volumeMounts: [{name: cfg, mountPath: /etc/sglang}]
          resources: {limits: {nvidia.com/gpu: "8", rdma/ib: "8"}}
          securityContext: {capabilities: {add: [IPC_LOCK]}}
      volumes: [{name: cfg, configMap: {name: sglang-config}}]
"#;
    let r = probe_text(y);
    let b = of(&r, "env.backend")[0];
    assert_eq!(b.status, Status::Ok, "{}", b.detail);
    assert!(
        b.detail.contains("nixl") && !b.detail.contains("mooncake"),
        "{}",
        b.detail
    );
    // Without the ConfigMap the backend is unknown, not "mooncake".
    let alone = probe_text(y.split("---").nth(1).unwrap());
    let b = of(&alone, "env.backend")[0];
    assert_eq!(b.status, Status::Warn, "{}", b.detail);
    assert!(
        b.detail.contains("--config") && !b.detail.contains("mooncake"),
        "{}",
        b.detail
    );
}

#[test]
fn false_alarm_ucx_tls_on_a_libfabric_backend() {
    let y = dgd(&env_item("FI_PROVIDER", "efa"), "", "")
        .replace("rdma/ib: \"8\"", "vpc.amazonaws.com/efa: \"32\"")
        .replace(
            "python3 -m dynamo.vllm --model m",
            "python3 -m dynamo.vllm --model m --kv-transfer-config '{\\\"kv_connector\\\":\\\"NixlConnector\\\",\\\"kv_role\\\":\\\"kv_both\\\",\\\"kv_connector_extra_config\\\":{\\\"backends\\\":[\\\"LIBFABRIC\\\"]}}'",
        )
        .replace("rc_x,rc,cuda_copy,cuda_ipc", "tcp")
        .replace("mlx5_0:1,mlx5_1:1", "eth0");
    let r = probe_text(&y);
    for id in ["env.ucx_tls.tcp_only", "env.ucx_tls.cuda", "env.efa"] {
        all(&r, id, Status::Ok);
    }
    assert!(of(&r, "env.ucx_net_devices.rdma").is_empty());
}

#[test]
fn false_alarm_required_pod_affinity_is_pinning() {
    let pod = "        affinity:\n          podAffinity:\n            requiredDuringSchedulingIgnoredDuringExecution:\n              - {topologyKey: nvidia.com/gpu.clique, labelSelector: {matchLabels: {app: pd}}}\n";
    let y = dgd("", "", pod).replace("        nodeSelector: {nvidia.com/gpu.clique: block-1}\n", "");
    let r = probe_text(&y);
    all(&r, "pod.placement", Status::Ok);
    assert!(of(&r, "pod.placement")[0].detail.contains("pod affinity"));
}

#[test]
fn false_alarm_ipc_lock_missing_warns_and_says_how_to_confirm_memlock() {
    let y = dgd("", "", "").replace("          securityContext: {capabilities: {add: [IPC_LOCK]}}\n", "");
    let r = probe_text(&y);
    all(&r, "pod.ipc_lock", Status::Warn);
    let c = of(&r, "pod.ipc_lock")[0];
    assert!(c.hint.as_deref().unwrap_or("").contains("memlock"), "{:?}", c.hint);
    assert_eq!(r.exit_code(), 0);
}

#[test]
fn false_alarm_env_from_secret_hf_token() {
    let y = dgd("", "", "").replace(
        "      resources:\n",
        "      envFromSecret: hf-token-secret\n      resources:\n",
    );
    let r = probe_text(&y);
    all(&r, "env.resolve", Status::Ok);
    assert!(
        of(&r, "env.resolve")[0]
            .detail
            .contains("credentials from Secret hf-token-secret")
    );
    // A Secret not named like a credential may hold transport settings: still a warning.
    let other = probe_text(&dgd("", "", "").replace(
        "      resources:\n",
        "      envFromSecret: ucx-settings\n      resources:\n",
    ));
    all(&other, "env.resolve", Status::Warn);
}

// ---------------------------------------------------------------- secrets and the variable list

#[test]
fn url_credentials_never_leave_and_the_variables_are_listed_per_role() {
    let r = probe_text(&dgd(
        &env_item("NIXL_ETCD_ENDPOINTS", "http://user:s3cretPw@etcd:2379"),
        "",
        "",
    ));
    let json = serde_json::to_string(&r).unwrap();
    assert!(!json.contains("s3cretPw"), "{json}");
    assert_eq!(r.transport_vars.len(), 2);
    for role in &r.transport_vars {
        let etcd = role.vars.iter().find(|v| v.name == "NIXL_ETCD_ENDPOINTS").unwrap();
        assert_eq!(etcd.value, "http://***@etcd:2379");
        assert!(
            etcd.source.contains("extraPodSpec.mainContainer.env (recipe.yaml:"),
            "{}",
            etcd.source
        );
        assert!(
            role.vars
                .iter()
                .any(|v| v.name == "UCX_TLS" && v.value == "rc_x,rc,cuda_copy,cuda_ipc")
        );
    }
}
