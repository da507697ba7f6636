//! `ic-bench probe node`, `probe nixl`, `probe env` and `detect-env` through the binary:
//! exit codes (0 ok/warn, 1 fail, 2 usage), JSON contract, export lines, the only write.

use assert_cmd::Command;
use predicates::prelude::*;
use std::path::PathBuf;

fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/nodes")
        .join(name)
}

/// `ic-bench probe node` replaying a fixture, with a clean transport environment.
fn probe_node(name: &str) -> Command {
    let root = fixture(name);
    let mut cmd = Command::cargo_bin("ic-bench").unwrap();
    for (k, _) in std::env::vars() {
        if icb_probe::envspec::is_transport_var(&k) {
            cmd.env_remove(k);
        }
    }
    cmd.args(["probe", "node", "--sysfs-root"])
        .arg(root.join("sys"))
        .arg("--devfs-root")
        .arg(root.join("dev"))
        .arg("--procfs-root")
        .arg(root.join("proc"))
        .arg("--tool-outputs")
        .arg(root.join("tools"));
    cmd
}

#[test]
fn healthy_node_exits_0_with_versioned_json() {
    let out = probe_node("healthy_ib")
        .args(["-o", "json"])
        .env("UCX_NET_DEVICES", "mlx5_0:1,mlx5_1:1")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["schema"], "ic-bench.probe/v1");
    assert_eq!(v["kind"], "node");
    assert_eq!(v["status"], "ok");
    let checks = v["checks"].as_array().unwrap();
    let net = checks.iter().find(|c| c["id"] == "node.net_devices").unwrap();
    assert_eq!(net["status"], "ok");
    assert_eq!(net["scope"], "environment");
}

#[test]
fn a_failing_check_exits_1_and_names_it() {
    probe_node("down_port")
        .env("UCX_NET_DEVICES", "mlx5_1:1")
        .assert()
        .code(1)
        .stdout(predicate::str::contains("node.net_devices").and(predicate::str::contains("fix first")));
}

#[test]
fn usage_errors_exit_2() {
    probe_node("healthy_ib")
        .args(["-o", "yaml-please"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains(
            "invalid value 'yaml-please' for '--output <FORMAT>'; possible values: table",
        ));
    Command::cargo_bin("ic-bench")
        .unwrap()
        .args(["probe", "node", "--pod", "p", "--sysfs-root", "/x"])
        .assert()
        .code(2);
    Command::cargo_bin("ic-bench")
        .unwrap()
        .args(["probe", "node", "--tool-timeout", "soon"])
        .assert()
        .code(2);
    Command::cargo_bin("ic-bench")
        .unwrap()
        .args(["probe", "env"])
        .assert()
        .code(2);
    Command::cargo_bin("ic-bench")
        .unwrap()
        .args(["probe", "env", "/nonexistent/recipe.yaml"])
        .assert()
        .code(2)
        .stderr(predicate::str::contains("recipe.yaml"));
    Command::cargo_bin("ic-bench")
        .unwrap()
        .args(["detect-env", "-o", "xml"])
        .assert()
        .code(2);
}

#[test]
fn this_machine_with_no_tools_is_inconclusive_not_failed() {
    // No RDMA, GPU or tools here: everything that could not be looked at is skipped, never ok.
    let out = Command::cargo_bin("ic-bench")
        .unwrap()
        .args(["probe", "node", "-o", "json", "--counter-interval", "0s"])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let checks = v["checks"].as_array().unwrap();
    for id in ["node.ucx_tl", "node.affinity", "node.nvlink"] {
        let c = checks.iter().find(|c| c["id"] == id).unwrap();
        assert_ne!(c["status"], "ok", "{c}");
    }
}

#[test]
fn detect_env_prints_exports_and_writes_only_the_env_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rdma.env");
    let mut cmd = Command::cargo_bin("ic-bench").unwrap();
    for k in [
        "NCCL_IB_HCA",
        "NVSHMEM_HCA_LIST",
        "UCX_NET_DEVICES",
        "NCCL_IB_GID_INDEX",
    ] {
        cmd.env_remove(k);
    }
    cmd.args(["detect-env", "--sysfs-root"])
        .arg(fixture("detect_multi_hca").join("sys"))
        .arg("--env-file")
        .arg(&file);
    cmd.assert()
        .code(0)
        .stdout(predicate::str::contains("export NCCL_IB_HCA=mlx5_0,mlx5_1,mlx5_2\n"))
        .stdout(predicate::str::contains(
            "export UCX_NET_DEVICES=mlx5_0:1,mlx5_1:1,mlx5_2:1\n",
        ))
        .stdout(predicate::str::contains("export UCX_IB_GID_INDEX=3\n"));
    let written = std::fs::read_to_string(&file).unwrap();
    assert!(written.contains("export NVSHMEM_IB_GID_INDEX=3"), "{written}");
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);

    // A preset index wins and is copied; JSON carries the same.
    let out = Command::cargo_bin("ic-bench")
        .unwrap()
        .env("NCCL_IB_GID_INDEX", "1")
        .args(["detect-env", "-o", "json", "--sysfs-root"])
        .arg(fixture("detect_tie").join("sys"))
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["schema"], "ic-bench.detect-env/v1");
    assert_eq!(v["gid_index"]["source"], "preset");
    let exports = v["exports"].as_array().unwrap();
    assert!(
        exports
            .iter()
            .any(|e| e["name"] == "UCX_IB_GID_INDEX" && e["value"] == "1"),
        "{exports:?}"
    );
}

#[test]
fn detect_env_require_fails_without_rdma() {
    Command::cargo_bin("ic-bench")
        .unwrap()
        .args(["detect-env", "--require", "--sysfs-root"])
        .arg(fixture("no_rdma").join("sys"))
        .assert()
        .code(1);
}

#[test]
fn detect_env_require_fails_when_the_exported_gid_index_is_invalid_on_an_hca() {
    // mlx5_0 has its RoCE v2 IPv4 GID at index 3, mlx5_1 at 5: index 3 is exported (KServe's
    // rule), and it is wrong for mlx5_1.
    let sys = fixture("roce_gid_disagree").join("sys");
    let out = Command::cargo_bin("ic-bench")
        .unwrap()
        .args(["detect-env", "--require", "--sysfs-root"])
        .arg(&sys)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains("--require: the exported GID index 3 is not RoCE v2 IPv4 on mlx5_1:1"),
        "{stderr}"
    );
    // Without --require it still exports (as KServe does) and warns.
    Command::cargo_bin("ic-bench")
        .unwrap()
        .args(["detect-env", "--sysfs-root"])
        .arg(&sys)
        .assert()
        .code(0);
}

#[test]
fn probe_nixl_prints_the_next_command() {
    let out = Command::cargo_bin("ic-bench")
        .unwrap()
        .args(["probe", "nixl", "-o", "json"])
        .output()
        .unwrap();
    assert!(
        matches!(out.status.code(), Some(0) | Some(1)),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["kind"], "nixl");
    assert!(
        v["next_steps"][0]
            .as_str()
            .unwrap()
            .starts_with("ic-bench pair --prefill")
    );
}

#[test]
fn recipe_roles_are_cross_checked_against_the_node() {
    let recipe = fixture("recipes").join("pd-split-devices.yaml");
    let run = |role: Option<&str>| {
        let mut cmd = probe_node("down_port");
        cmd.args(["-o", "json", "--recipe"]).arg(&recipe);
        if let Some(r) = role {
            cmd.args(["--role", r]);
        }
        cmd.output().unwrap()
    };
    let net = |out: &std::process::Output| {
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        v["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["id"] == "node.net_devices")
            .unwrap()
            .clone()
    };
    let prefill = run(Some("prefill"));
    // mlx5_0:1 is up; GPU1's affinity (SYS to mlx5_0) fails, not the device choice, and the
    // cause named first is GPU1's own NIC, whose port is down.
    assert_eq!(
        prefill.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&prefill.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&prefill.stdout).unwrap();
    assert_eq!(v["verdict"], "fix first: node.port_state, node.affinity");
    assert_eq!(net(&prefill)["status"], "ok");
    assert!(
        net(&prefill)["scope"].as_str().unwrap().starts_with("recipe prefill"),
        "{}",
        net(&prefill)
    );
    let decode = run(Some("decode"));
    assert_eq!(decode.status.code(), Some(1));
    assert_eq!(net(&decode)["status"], "fail");
    assert!(
        net(&decode)["detail"]
            .as_str()
            .unwrap()
            .contains("mlx5_1:1 is INIT/LinkUp")
    );
    // The roles differ, so the probe will not guess.
    let unsure = run(None);
    assert_eq!(unsure.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&unsure.stderr).contains("--role"));
}

/// stderr of a usage error: exactly one line, holding `want`.
fn one_line_error(out: &std::process::Output, want: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains(want), "{err}");
}

#[test]
fn replay_roots_that_are_not_directories_are_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nonexistent");
    let file = dir.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    for flag in ["--sysfs-root", "--devfs-root", "--procfs-root", "--tool-outputs"] {
        for (path, why) in [(&missing, "no such directory"), (&file, "not a directory")] {
            let out = Command::cargo_bin("ic-bench")
                .unwrap()
                .args(["probe", "node", "--counter-interval", "0s", flag])
                .arg(path)
                .output()
                .unwrap();
            one_line_error(&out, &format!("{flag} {}: {why}", path.display()));
            assert!(out.stdout.is_empty(), "{}", String::from_utf8_lossy(&out.stdout));
        }
    }
    let out = Command::cargo_bin("ic-bench")
        .unwrap()
        .args(["detect-env", "--sysfs-root"])
        .arg(&missing)
        .output()
        .unwrap();
    one_line_error(&out, &format!("--sysfs-root {}: no such directory", missing.display()));
    assert!(out.stdout.is_empty());
}

#[test]
fn detect_env_notes_name_the_root_it_read() {
    let sys = fixture("no_rdma").join("sys");
    Command::cargo_bin("ic-bench")
        .unwrap()
        .args(["detect-env", "--sysfs-root"])
        .arg(&sys)
        .assert()
        .code(0)
        .stdout(predicate::str::contains(format!(
            "# no RDMA devices in {}\n",
            sys.join("class/infiniband").display()
        )));
}

#[test]
fn input_without_a_recipe_is_a_usage_error() {
    let out = Command::cargo_bin("ic-bench")
        .unwrap()
        .args(["probe", "env", "-"])
        .write_stdin("")
        .output()
        .unwrap();
    one_line_error(&out, "<stdin>: no recipe found");
    let dir = tempfile::tempdir().unwrap();
    let nokind = dir.path().join("nokind.yaml");
    std::fs::write(&nokind, "foo: bar\n").unwrap();
    let out = Command::cargo_bin("ic-bench")
        .unwrap()
        .args(["probe", "env"])
        .arg(&nokind)
        .output()
        .unwrap();
    one_line_error(&out, &format!("{}: no recipe found", nokind.display()));
    // The node probe reads recipes the same way.
    let out = probe_node("healthy_ib")
        .args(["--counter-interval", "0s", "--recipe"])
        .arg(&nokind)
        .output()
        .unwrap();
    one_line_error(&out, "nokind.yaml: no recipe found");
}

#[test]
fn probe_env_suggests_only_commands_that_run() {
    let recipe = fixture("recipes").join("pd-split-devices.yaml");
    // From stdin there is no file for --recipe to name: no suggestion rather than `--recipe <stdin>`.
    let out = Command::cargo_bin("ic-bench")
        .unwrap()
        .args(["probe", "env", "-o", "json", "-"])
        .pipe_stdin(&recipe)
        .unwrap()
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["target"], "<stdin>");
    assert_eq!(v["next_steps"], serde_json::json!([]), "{v}");
    // From a file whose roles differ, the suggestion carries --role; run it (on a replayed node).
    let out = Command::cargo_bin("ic-bench")
        .unwrap()
        .args(["probe", "env", "-o", "json"])
        .arg(&recipe)
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let next = v["next_steps"][0].as_str().unwrap().to_string();
    let args = next
        .strip_prefix("ic-bench probe node ")
        .unwrap_or_else(|| panic!("{next}"));
    assert!(args.ends_with("--role prefill"), "{next}");
    let out = probe_node("down_port")
        .args(["-o", "json"])
        .args(args.split(' '))
        .output()
        .unwrap();
    assert_ne!(
        out.status.code(),
        Some(2),
        "{next}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["kind"], "node");
}

#[test]
fn detect_env_gid_disagreement_is_a_warning_that_matches_the_export() {
    for name in ["detect_tie", "roce_gid_disagree"] {
        let mut cmd = Command::cargo_bin("ic-bench").unwrap();
        for (k, _) in std::env::vars() {
            if icb_probe::envspec::is_transport_var(&k) {
                cmd.env_remove(k);
            }
        }
        let out = cmd
            .args(["detect-env", "--require", "--sysfs-root"])
            .arg(fixture(name).join("sys"))
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        // Exported anyway (KServe parity), but --require does not call it usable.
        assert_eq!(out.status.code(), Some(1), "{name}: {stdout}{stderr}");
        assert!(
            stderr.contains("--require: the exported GID index 3"),
            "{name}: {stderr}"
        );
        assert!(
            stdout.contains("# WARNING: HCAs disagree on the RoCE v2 GID index (")
                && stdout.contains("exporting 3, the SR-IOV convention on a tie")
                && stdout.contains("verify, or set NCCL_IB_GID_INDEX yourself"),
            "{name}: {stdout}"
        );
        assert!(
            !stdout.contains("ERROR") && !stdout.contains("unset"),
            "{name}: {stdout}"
        );
        assert!(stdout.contains("export NCCL_IB_GID_INDEX=3\n"), "{name}: {stdout}");
        assert!(stderr.contains("warning: HCAs disagree"), "{name}: {stderr}");
    }
}

fn recipes(rel: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures/recipes")
        .join(rel)
}

/// Issue 9 through the binary: a recipes directory fails when its recipes do (one line per
/// recipe), `--overlay` applies a named overlay, unsupported or unrendered input is exit 2, and
/// `-o wide` / JSON list each role's transport variables.
#[test]
fn probe_env_recipe_sets_kinds_and_variable_lists() {
    let dir = recipes("sets/dynamo-like/recipes");
    let out = Command::cargo_bin("ic-bench")
        .unwrap()
        .args(["probe", "env"])
        .arg(&dir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("3 of 4 recipes fail"), "{text}");
    assert!(text.contains("Recipe"), "{text}");
    // Named overlay through the flag.
    let out = Command::cargo_bin("ic-bench")
        .unwrap()
        .args(["probe", "env", "-o", "json", "--overlay"])
        .arg(dir.join("addons/providers/aks-ib.yaml"))
        .arg(dir.join("qwen3/sglang/disagg"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stdout));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let roles = json["transport_vars"].as_array().unwrap();
    assert_eq!(roles.len(), 2);
    assert!(
        roles[0]["vars"]
            .as_array()
            .unwrap()
            .iter()
            .any(|v| v["name"] == "UCX_NET_DEVICES" && v["source"].as_str().unwrap_or("").contains("aks"))
    );
    // Wide table: the variables with their sources.
    Command::cargo_bin("ic-bench")
        .unwrap()
        .args(["probe", "env", "-o", "wide"])
        .arg(recipes("kinds/llmisvc-pd.yaml"))
        .assert()
        .code(0)
        .stdout(predicate::str::contains("Variable").and(predicate::str::contains("spec.prefill.template")));
    // Usage errors: an unsupported kind, a Helm template.
    let out = Command::cargo_bin("ic-bench")
        .unwrap()
        .args(["probe", "env"])
        .arg(recipes("kinds/unsupported-inferenceservice.yaml"))
        .output()
        .unwrap();
    one_line_error(&out, "no supported recipe kind (saw InferenceService)");
    let tmp = tempfile::tempdir().unwrap();
    let t = tmp.path().join("deploy.yaml");
    std::fs::write(
        &t,
        "kind: Deployment\nmetadata:\n  name: {{ .Release.Name }}\nspec:\n  {{- if .Values.x }}\n",
    )
    .unwrap();
    let out = Command::cargo_bin("ic-bench")
        .unwrap()
        .args(["probe", "env"])
        .arg(&t)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    one_line_error(&out, "helm template");
}

/// An error quoting its input masks a credential in it like every other output.
#[test]
fn errors_never_print_a_url_credential() {
    let out = Command::cargo_bin("ic-bench")
        .unwrap()
        .args(["probe", "env", "http://user:hunter2secret@etcd:2379/recipe.yaml"])
        .output()
        .unwrap();
    one_line_error(&out, "http://***@etcd:2379/recipe.yaml");
    assert!(!String::from_utf8_lossy(&out.stderr).contains("hunter2secret"));
}

/// `--export-FORMAT FILE` beside `-o` (issue 18, one way out): the table on stdout, the JSON and
/// JUnit in files, and a format that cannot show a probe report refused before anything runs.
#[test]
fn exports_write_every_file_beside_the_table() {
    let dir = tempfile::tempdir().unwrap();
    let json = dir.path().join("probe.json");
    let junit = dir.path().join("probe.xml");
    let out = probe_node("healthy_ib")
        .env("UCX_NET_DEVICES", "mlx5_0:1,mlx5_1:1")
        .arg("--export-json")
        .arg(&json)
        .arg("--export-junit")
        .arg(&junit)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        !String::from_utf8_lossy(&out.stdout).trim_start().starts_with('{'),
        "stdout is the table"
    );
    let v: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(v["schema"], "ic-bench.probe/v1");
    assert!(std::fs::read_to_string(&junit).unwrap().contains("<testsuites"));
}

/// `ic-bench probe node -o json` on a recorded rail-map tree of the probe crate (sysfs only:
/// no device files, no process table, no tool outputs recorded), with its JSON report.
fn probe_rail_tree(name: &str) -> serde_json::Value {
    let tree = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("crates/probe/tests/fixtures/rails")
        .join(name);
    let empty = tempfile::tempdir().unwrap();
    let out = Command::cargo_bin("ic-bench")
        .unwrap()
        .args([
            "probe",
            "node",
            "-o",
            "json",
            "--counter-interval",
            "0s",
            "--sysfs-root",
        ])
        .arg(tree.join("sys"))
        .arg("--devfs-root")
        .arg(empty.path())
        .arg("--procfs-root")
        .arg(empty.path())
        .arg("--tool-outputs")
        .arg(empty.path())
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(matches!(out.status.code(), Some(0 | 1)), "{name}: {stderr}");
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{name}: no JSON ({e}): {stderr}"))
}

fn check_of<'a>(report: &'a serde_json::Value, id: &str) -> &'a serde_json::Value {
    let checks = report["checks"].as_array().expect("checks");
    checks
        .iter()
        .find(|c| c["id"] == id)
        .unwrap_or_else(|| panic!("no {id}: {checks:?}"))
}

/// Issue 40's "done when", through the binary: `probe node --sysfs-root` flags a NIC whose
/// PCIe link trained at half width, and pairs a Data Direct NIC (ConnectX-8 on GB300) with its
/// GPU through its Data Direct function; the same checks on trees without either stay quiet.
#[test]
fn probe_node_sysfs_root_flags_a_downtrained_link_and_a_data_direct_nic() {
    let down = probe_rail_tree("pcie_down");
    let link = check_of(&down, "node.pcie_link");
    assert_eq!(link["status"], "warn", "{link}");
    let detail = link["detail"].as_str().unwrap();
    assert!(
        detail.contains("mlx5_0 (0000:19:00.0) x8 32 GT/s, can train at x16 32 GT/s"),
        "{detail}"
    );
    assert_eq!(check_of(&probe_rail_tree("pcie_ok"), "node.pcie_link")["status"], "ok");

    let dd = probe_rail_tree("gb300_dd");
    let direct = check_of(&dd, "node.data_direct");
    assert_eq!(direct["status"], "ok", "{direct}");
    let detail = direct["detail"].as_str().unwrap();
    assert!(detail.contains("GPU0↔mlx5_0 via 0008:04:00.0"), "{detail}");
    let notes = dd["rail_map"]["notes"].as_array().expect("rail map notes");
    assert!(
        notes.iter().any(|n| n
            .as_str()
            .unwrap_or_default()
            .contains("mlx5_0 is a ConnectX-8 with Data Direct")),
        "{notes:?}"
    );
    assert_eq!(
        check_of(&probe_rail_tree("gb300_no_dd"), "node.data_direct")["status"],
        "skipped"
    );
}
