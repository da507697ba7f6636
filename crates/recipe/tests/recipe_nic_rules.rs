//! The NIC-list rules of issue 25: a TCP interface beside RDMA ports in UCX_NET_DEVICES, and
//! UCX_MAX_RNDV_RAILS below the NICs one rank is given.

use icb_core::checks::ProbeReport;
use icb_core::model::Status;
use icb_recipe::{Input, probe_env};

/// A prefill/decode Deployment pair (apps/v1) on RoCE with these extra env entries.
fn pair(env: &str, rdma: &str) -> ProbeReport {
    let dep = |role: &str| {
        format!(
            "apiVersion: apps/v1\nkind: Deployment\nmetadata: {{name: {role}}}\nspec:\n  selector: {{matchLabels: {{app: {role}}}}}\n  template:\n    spec:\n      containers:\n        - name: main\n          image: vllm/vllm-openai:v0.11.0\n          args: [vllm, serve, m, --kv-transfer-config, '{{\"kv_connector\":\"NixlConnector\",\"kv_role\":\"kv_both\"}}']\n          env:\n            - {{name: UCX_TLS, value: \"rc,cuda_copy,tcp\"}}\n{env}          resources: {{limits: {{nvidia.com/gpu: \"8\", rdma/roce_gdr: \"{rdma}\"}}}}\n          securityContext: {{capabilities: {{add: [IPC_LOCK]}}}}\n"
        )
    };
    let text = format!("{}---\n{}", dep("prefill"), dep("decode"));
    probe_env(&[Input::Text {
        name: "pd.yaml".into(),
        content: text,
    }])
    .unwrap()
}

fn statuses(r: &ProbeReport, id: &str) -> Vec<Status> {
    r.checks.iter().filter(|c| c.id == id).map(|c| c.status).collect()
}

#[test]
fn a_tcp_interface_beside_rdma_ports_is_warned() {
    let r = pair(
        "            - {name: UCX_NET_DEVICES, value: \"mlx5_0:1,mlx5_1:1,eth0\"}\n",
        "2",
    );
    assert_eq!(statuses(&r, "env.ucx_net_devices.tcp"), vec![Status::Warn; 2]);
    let c = r.checks.iter().find(|c| c.id == "env.ucx_net_devices.tcp").unwrap();
    assert!(
        c.detail.contains("eth0") && c.detail.contains("over TCP"),
        "{}",
        c.detail
    );
    // RDMA ports only: no finding; tcp left out of UCX_TLS: ok.
    let clean = pair(
        "            - {name: UCX_NET_DEVICES, value: \"mlx5_0:1,mlx5_1:1\"}\n",
        "2",
    );
    assert!(statuses(&clean, "env.ucx_net_devices.tcp").is_empty());
    let no_tcp = pair(
        "            - {name: UCX_NET_DEVICES, value: \"mlx5_0:1,eth0\"}\n            - {name: UCX_TLS, value: \"rc,cuda_copy\"}\n",
        "1",
    );
    assert_eq!(statuses(&no_tcp, "env.ucx_net_devices.tcp"), vec![Status::Ok; 2]);
}

#[test]
fn max_rndv_rails_below_the_nics_of_a_rank_is_warned() {
    let four = "            - {name: UCX_NET_DEVICES, value: \"mlx5_0:1,mlx5_1:1,mlx5_2:1,mlx5_3:1\"}\n";
    let r = pair(
        &format!("{four}            - {{name: UCX_MAX_RNDV_RAILS, value: \"2\"}}\n"),
        "4",
    );
    assert_eq!(statuses(&r, "env.ucx_rndv_rails"), vec![Status::Warn; 2]);
    let c = r.checks.iter().find(|c| c.id == "env.ucx_rndv_rails").unwrap();
    assert!(c.detail.contains("below the 4 RDMA NIC(s)"), "{}", c.detail);
    let ok = pair(
        &format!("{four}            - {{name: UCX_MAX_RNDV_RAILS, value: \"4\"}}\n"),
        "4",
    );
    assert_eq!(statuses(&ok, "env.ucx_rndv_rails"), vec![Status::Ok; 2]);
    // Without UCX_NET_DEVICES the rank sees the pod's RDMA devices.
    let devices = pair("            - {name: UCX_MAX_RNDV_RAILS, value: \"1\"}\n", "2");
    assert_eq!(statuses(&devices, "env.ucx_rndv_rails"), vec![Status::Warn; 2]);
    // Unset: UCX's default applies, no finding.
    assert!(statuses(&pair(four, "4"), "env.ucx_rndv_rails").is_empty());
}
