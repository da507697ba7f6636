//! No output format lets a credential through: URL userinfo, bearer tokens, query-string
//! credentials and secret-named variables are masked in every exporter, whatever the secret is.

use crate::common;

use icb_core::checks::{Check, ResolvedVar, RoleTransportVars};
use icb_core::model::Status;
use icb_report::{Format, render_pair, render_probe};
use proptest::prelude::*;

/// Where a secret can sit in a value or a line, each with the secret spliced in.
fn placements(secret: &str) -> Vec<(String, String)> {
    vec![
        ("NIXL_ETCD_ENDPOINTS".into(), format!("http://user:{secret}@etcd:2379")),
        (
            "NIXL_ETCD_ENDPOINTS".into(),
            format!("https://{secret}@etcd.example:2379/v3"),
        ),
        (
            "UCX_SOME_URL".into(),
            format!("https://s3.example/b/k?X-Amz-Signature={secret}&x=1"),
        ),
        ("NIXL_OBJ_URL".into(), format!("http://h/p?a=1&token={secret}")),
        ("NIXL_OBJ_URL".into(), format!("http://h/p?password={secret}")),
        ("HF_TOKEN".into(), secret.to_string()),
        ("NIXL_API_KEY".into(), secret.to_string()),
        ("UCX_HEADER".into(), format!("Authorization: Bearer {secret}")),
    ]
}

fn formats() -> Vec<Format> {
    // svg draws no text of the report's; collectivex carries its numbers and data paths only (and
    // has nothing to show for a report without a KV section).
    Format::ALL
        .into_iter()
        .filter(|f| !matches!(f, Format::Svg | Format::Collectivex))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn no_format_prints_a_credential(secret in "[A-Za-z0-9]{4}[A-Za-z0-9._~-]{6,30}") {
        prop_assume!(!secret.contains("***"));
        for (name, value) in placements(&secret) {
            let line = format!("{name}={value}");
            // The pair report: the env block of both sides, the warnings and the verdict.
            let mut pair = common::pods_same_node();
            pair.server.env.insert(name.clone(), value.clone());
            pair.client.env.insert(name.clone(), value.clone());
            pair.warnings.push(format!("saw {line}"));
            pair.verdict.hint = Some(format!("check {line}"));
            // The probe report: details, hints, scopes and the per-role variable list.
            let mut probe = common::probe_env();
            probe.checks.push(Check {
                id: "env.role_symmetry".into(),
                status: Status::Warn,
                detail: format!("prefill and decode differ: {line}"),
                scope: Some(format!("prefill ({line})")),
                hint: Some(format!("unset {line}")),
            });
            probe.transport_vars.push(RoleTransportVars {
                scope: "prefill (p, deploy.yaml)".into(),
                role: "prefill".into(),
                vars: vec![ResolvedVar { name: name.clone(), value: value.clone(), source: format!("env ({line})") }],
            });
            probe.next_steps.push(format!("ic-bench probe node --env {line}"));
            for f in formats() {
                if let Ok(out) = render_pair(&pair, f) {
                    prop_assert!(!out.contains(&secret), "{f}: pair output shows {secret} from {line}:\n{out}");
                }
                let out = render_probe(&probe, f).expect("probe renders in every text format");
                prop_assert!(!out.contains(&secret), "{f}: probe output shows {secret} from {line}:\n{out}");
            }
        }
    }
}

#[test]
fn masked_values_keep_what_an_operator_needs() {
    let mut pair = common::pods_same_node();
    pair.server
        .env
        .insert("NIXL_ETCD_ENDPOINTS".into(), "http://user:pw@etcd:2379".into());
    pair.server.env.insert("UCX_TLS".into(), "rc,cuda_copy".into());
    let json = render_pair(&pair, Format::Json).unwrap();
    assert!(json.contains("http://***@etcd:2379"), "{json}");
    assert!(json.contains("rc,cuda_copy"));
    assert!(!json.contains("user:pw"));
}
