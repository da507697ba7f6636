//! Issue 41 through the binary: `probe env` on recipe files whose workers get their devices
//! through DRA. A claim the pod does not define fails (exit 1) naming both names; a GPU and a
//! NIC not tied to one PCIe root warns (exit 0) naming the template; each finding reads whole in
//! a 100-column table.

use assert_cmd::Command;
use std::path::PathBuf;
use std::time::Duration;

fn recipe(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/recipes")
        .join(rel)
}

/// `ic-bench probe env FILE ARGS`: exit code and stdout, at 100 columns.
fn probe_env(rel: &str, args: &[&str]) -> (Option<i32>, String) {
    let out = Command::cargo_bin("ic-bench")
        .unwrap()
        .timeout(Duration::from_secs(60))
        .env("COLUMNS", "100")
        .args(["probe", "env"])
        .args(args)
        .arg(recipe(rel))
        .output()
        .unwrap();
    (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned())
}

fn check<'a>(json: &'a serde_json::Value, id: &str, status: &str) -> Option<&'a serde_json::Value> {
    json["checks"]
        .as_array()?
        .iter()
        .find(|c| c["id"] == id && c["status"] == status)
}

#[test]
fn dra_claim_rules_decide_the_exit_code_and_render_at_100_columns() {
    let (code, text) = probe_env("fail/dra-claim-undefined.yaml", &["-o", "json"]);
    assert_eq!(code, Some(1), "{text}");
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    let fail = check(&json, "pod.dra_claims", "fail").unwrap_or_else(|| panic!("{text}"));
    let detail = fail["detail"].as_str().unwrap();
    assert!(detail.contains("`gpus`") && detail.contains("`devices`"), "{detail}");

    let (code, table) = probe_env("fail/dra-claim-undefined.yaml", &[]);
    assert_eq!(code, Some(1), "{table}");
    assert!(table.contains("fail[pod.dra_claims]"), "{table}");
    let (code, table) = probe_env("warn/dra-gpu-nic-untied.yaml", &[]);
    assert_eq!(code, Some(0), "{table}");
    assert!(table.contains("warn[pod.dra_rail]"), "{table}");
    for line in table.lines() {
        assert!(
            line.chars().count() <= 100 || line.split_whitespace().count() == 1,
            "{line:?} is wider than 100 columns:\n{table}"
        );
    }
    for word in ["gpu-and-nic", "resource.kubernetes.io/pcieRoot:", "matchAttribute"] {
        assert!(
            table.split_whitespace().any(|w| w.starts_with(word)),
            "{word}:\n{table}"
        );
    }
    let (code, text) = probe_env("pass/dra-gpu-nic-tied.yaml", &["-o", "json"]);
    assert_eq!(code, Some(0), "{text}");
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert!(check(&json, "pod.dra_rail", "ok").is_some(), "{text}");
    assert!(check(&json, "pod.dra_rail", "warn").is_none(), "{text}");
}
