//! Property: whatever the secret, `probe env` prints it in no output format — a Secret's value
//! used through `envFrom`/`secretKeyRef`, a URL credential, a bearer token or a secret-named
//! variable (issue 9).

use icb_recipe::{Input, probe_env};
use icb_report::{Format, render_probe};
use proptest::prelude::*;

fn recipe(secret: &str) -> String {
    let b64 = base64(secret);
    format!(
        r#"apiVersion: v1
kind: Secret
metadata: {{name: nixl-creds}}
data:
  NIXL_ETCD_PASSWORD: "{b64}"
stringData:
  UCX_TLS: "rc,cuda_copy,{secret}"
---
apiVersion: apps/v1
kind: Deployment
metadata: {{name: prefill}}
spec:
  selector: {{matchLabels: {{app: p}}}}
  template:
    spec:
      containers:
        - name: main
          image: img
          args: ["python3 -m sglang.launch_server --disaggregation-mode prefill --api-key {secret}"]
          envFrom: [{{secretRef: {{name: nixl-creds}}}}]
          env:
            - {{name: NIXL_ETCD_ENDPOINTS, value: "http://admin:{secret}@etcd:2379"}}
            - {{name: NIXL_OBJ_URL, value: "https://s3.example/b?X-Amz-Signature={secret}&x=1"}}
            - {{name: UCX_HTTP_HEADER, value: "Authorization: Bearer {secret}"}}
            - {{name: HF_TOKEN, value: "{secret}"}}
            - {{name: NCCL_DEBUG_TOKEN, valueFrom: {{secretKeyRef: {{name: nixl-creds, key: NIXL_ETCD_PASSWORD}}}}}}
          resources: {{limits: {{nvidia.com/gpu: "1", rdma/ib: "1"}}}}
"#
    )
}

fn base64(s: &str) -> String {
    const A: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::new();
    for chunk in s.as_bytes().chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(A[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    #[test]
    fn no_output_format_prints_a_secret(secret in "[A-Za-z][A-Za-z0-9]{9,24}") {
        let report = probe_env(&[Input::Text { name: "s.yaml".into(), content: recipe(&secret) }])
            .expect("the recipe loads");
        let b64 = base64(&secret);
        for f in [Format::Table, Format::Wide, Format::Json, Format::Junit, Format::Prometheus] {
            let out = render_probe(&report, f).expect("renders");
            prop_assert!(!out.contains(&secret), "{f} shows the secret:\n{out}");
            prop_assert!(!out.contains(&b64), "{f} shows the base64 secret:\n{out}");
        }
    }
}
