//! `ic-bench probe env` / `probe node` / `probe nixl` input handling of issue 25, through the
//! binary: bad input is one line on stderr and exit 2, never a hang; a partial replay says what
//! it read live; `--nixl-lib` is where libnixl is looked for.

use assert_cmd::Command;
use std::time::Duration;

fn ic_bench() -> Command {
    let mut cmd = Command::cargo_bin("ic-bench").unwrap();
    cmd.timeout(Duration::from_secs(60));
    cmd
}

fn one_line_exit_2(out: &std::process::Output, want: &str) {
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains(want), "{err}");
    assert!(out.stdout.is_empty(), "{}", String::from_utf8_lossy(&out.stdout));
}

#[cfg(unix)]
#[test]
fn a_fifo_path_is_refused_without_hanging() {
    let t = tempfile::tempdir().unwrap();
    let fifo = t.path().join("recipe.yaml");
    if !std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .is_ok_and(|s| s.success())
    {
        eprintln!("mkfifo unavailable: skipped");
        return;
    }
    let out = ic_bench().args(["probe", "env"]).arg(&fifo).output().unwrap();
    one_line_exit_2(&out, "not a regular file");
    let out = ic_bench()
        .args(["probe", "env", "--overlay"])
        .arg(&fifo)
        .arg(t.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn helm_values_are_named_and_need_a_chart() {
    let t = tempfile::tempdir().unwrap();
    let values = t.path().join("values.yaml");
    std::fs::write(
        &values,
        "servingEngineSpec:\n  modelSpec:\n    - name: llama\n      requestGPU: 1\n",
    )
    .unwrap();
    let out = ic_bench().args(["probe", "env"]).arg(&values).output().unwrap();
    one_line_exit_2(&out, "values for a Helm chart");
    let pod = t.path().join("pod.yaml");
    std::fs::write(
        &pod,
        "kind: Pod\nmetadata: {name: p}\nspec: {containers: [{name: main, image: x}]}\n",
    )
    .unwrap();
    let out = ic_bench()
        .args(["probe", "env"])
        .arg(&pod)
        .arg("-f")
        .arg(&values)
        .output()
        .unwrap();
    one_line_exit_2(&out, "values apply to a Helm chart");
}

#[test]
fn a_kustomize_base_outside_the_tree_is_exit_2_render_it_first() {
    let t = tempfile::tempdir().unwrap();
    let overlay = t.path().join("overlays/prod");
    std::fs::create_dir_all(&overlay).unwrap();
    std::fs::write(
        overlay.join("kustomization.yaml"),
        "resources: [../../base]\nnamespace: prod\n",
    )
    .unwrap();
    for arg in [overlay.clone(), overlay.join("kustomization.yaml")] {
        let out = ic_bench().args(["probe", "env"]).arg(&arg).output().unwrap();
        one_line_exit_2(&out, "base missing: render it first");
    }
}

#[test]
fn a_partial_replay_says_which_roots_are_live() {
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/nodes/healthy_ib");
    let out = ic_bench()
        .args([
            "probe",
            "node",
            "--counter-interval",
            "0s",
            "--tool-timeout",
            "2s",
            "-o",
            "json",
            "--sysfs-root",
        ])
        .arg(root.join("sys"))
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let first = v["next_steps"][0].as_str().unwrap_or_default();
    assert!(
        first.starts_with("partial replay: /dev, /proc, diagnostic tools read live"),
        "{v}"
    );
    // Every root replayed: nothing is said about live reads.
    let out = ic_bench()
        .args(["probe", "node", "--counter-interval", "0s", "-o", "json"])
        .args(["--sysfs-root".as_ref(), root.join("sys").as_os_str()])
        .args(["--devfs-root".as_ref(), root.join("dev").as_os_str()])
        .args(["--procfs-root".as_ref(), root.join("proc").as_os_str()])
        .args(["--tool-outputs".as_ref(), root.join("tools").as_os_str()])
        .output()
        .unwrap();
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let steps = v["next_steps"].as_array().cloned().unwrap_or_default();
    assert!(
        steps
            .iter()
            .all(|s| !s.as_str().unwrap_or("").contains("partial replay")),
        "{v}"
    );
}
