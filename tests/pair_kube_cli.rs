//! Cluster access as kubectl users expect it, seen through `--dry-run=client` (node targets only
//! read their nodes for device defaults; an unreachable server leaves a note, not an error): which kubeconfig and namespace win, and the one-line
//! errors for bad targets and missing access.

use std::path::Path;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_ic-bench");

fn kubeconfig(dir: &Path, file: &str, context: &str, namespace: &str) -> std::path::PathBuf {
    let path = dir.join(file);
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: {context}\nclusters:\n- name: c-{context}\n  cluster:\n    server: http://127.0.0.1:9\ncontexts:\n- name: {context}\n  context:\n    cluster: c-{context}\n    user: u-{context}\n    namespace: {namespace}\nusers:\n- name: u-{context}\n  user: {{}}\n"
        ),
    )
    .unwrap();
    path
}

/// Runs a dry run with a clean environment (no KUBECONFIG, HOME = `home`), plus `env`.
fn dry_run(home: &Path, env: &[(&str, &str)], extra: &[&str]) -> (i32, String, String) {
    let mut cmd = Command::new(BIN);
    cmd.args([
        "pair",
        "--prefill",
        "node/a",
        "--decode",
        "node/b",
        "--dry-run=client",
        "-o",
        "yaml",
        "--run-id",
        "cli1",
    ])
    .args(extra)
    .env_remove("KUBECONFIG")
    .env_remove("KUBERNETES_SERVICE_HOST")
    .env_remove("HTTPS_PROXY")
    .env_remove("https_proxy")
    .env("HOME", home)
    .env("IC_BENCH_LOG", "off");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

fn namespaces(yaml: &str) -> Vec<String> {
    icb_kube::yaml::pods(yaml)
        .unwrap()
        .into_iter()
        .map(|p| p.metadata.namespace.unwrap())
        .collect()
}

#[test]
fn kubeconfig_resolution_order_and_namespace() {
    let home = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join(".kube")).unwrap();
    kubeconfig(&home.path().join(".kube"), "config", "home", "from-home");
    let a = kubeconfig(dir.path(), "a", "ctx-a", "from-a");
    let b = kubeconfig(dir.path(), "b", "ctx-b", "from-b");
    let flag = kubeconfig(dir.path(), "flag", "ctx-flag", "from-flag");

    // ~/.kube/config when nothing else is given.
    let (code, out, err) = dry_run(home.path(), &[], &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(namespaces(&out), ["from-home", "from-home"]);

    // $KUBECONFIG (a merged list: the first file's current-context wins) beats ~/.kube/config.
    let list = std::env::join_paths([&a, &b]).unwrap();
    let list = list.to_str().unwrap();
    let (code, out, err) = dry_run(home.path(), &[("KUBECONFIG", list)], &[]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(namespaces(&out), ["from-a", "from-a"]);
    // --context picks the other merged context.
    let (_, out, _) = dry_run(home.path(), &[("KUBECONFIG", list)], &["--context", "ctx-b"]);
    assert_eq!(namespaces(&out), ["from-b", "from-b"]);

    // --kubeconfig is that file only: KUBECONFIG's contexts are not visible.
    let flag = flag.to_str().unwrap();
    let (_, out, _) = dry_run(home.path(), &[("KUBECONFIG", list)], &["--kubeconfig", flag]);
    assert_eq!(namespaces(&out), ["from-flag", "from-flag"]);
    let (code, _, err) = dry_run(
        home.path(),
        &[("KUBECONFIG", list)],
        &["--kubeconfig", flag, "--context", "ctx-a"],
    );
    assert_eq!(code, 2);
    assert!(err.contains("ctx-a"), "{err}");

    // -n wins over the context's namespace.
    let (_, out, _) = dry_run(home.path(), &[], &["-n", "bench"]);
    assert_eq!(namespaces(&out), ["bench", "bench"]);
}

#[test]
fn no_access_and_bad_targets_are_one_line_errors() {
    let empty_home = tempfile::tempdir().unwrap();
    let (code, out, err) = dry_run(empty_home.path(), &[], &[]);
    assert_eq!(code, 2);
    assert!(out.is_empty());
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("no kubeconfig found") && err.contains("--kubeconfig FILE"),
        "{err}"
    );

    let (code, _, err) = dry_run(empty_home.path(), &[], &["--context", "x"]);
    assert_eq!(code, 2);
    assert!(err.contains("--context x needs a kubeconfig"), "{err}");

    let out = Command::new(BIN)
        .args(["pair", "--prefill", "svc/x", "--decode", "node/b", "--dry-run"])
        .env("IC_BENCH_LOG", "off")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2));
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains("--prefill") && err.contains("unknown kind 'svc'") && err.contains("node/NAME"),
        "{err}"
    );

    let dir = tempfile::tempdir().unwrap();
    let kc = kubeconfig(dir.path(), "kc", "c", "ns");
    let out = Command::new(BIN)
        .args([
            "pair",
            "--prefill",
            "node/a",
            "--decode",
            "node/b",
            "--run-id",
            "Bad_Id",
            "--kubeconfig",
        ])
        .arg(&kc)
        .env("IC_BENCH_LOG", "off")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2));
    assert!(err.contains("--run-id 'Bad_Id'"), "{err}");
}

#[test]
fn a_proxy_without_no_proxy_is_refused_with_the_fix() {
    let home = tempfile::tempdir().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let kc = kubeconfig(dir.path(), "kc", "c", "ns");
    std::fs::write(
        &kc,
        std::fs::read_to_string(&kc)
            .unwrap()
            .replace("http://127.0.0.1:9", "https://api.example.test:6443"),
    )
    .unwrap();
    let kc = kc.to_str().unwrap();
    let (code, _, err) = dry_run(
        home.path(),
        &[("HTTPS_PROXY", "http://proxy.example.test:3128")],
        &["--kubeconfig", kc],
    );
    assert_eq!(code, 2);
    assert!(err.contains("add api.example.test to NO_PROXY"), "{err}");
    let (code, out, err) = dry_run(
        home.path(),
        &[
            ("HTTPS_PROXY", "http://proxy.example.test:3128"),
            ("NO_PROXY", ".example.test"),
        ],
        &["--kubeconfig", kc],
    );
    assert_eq!(code, 0, "{err}");
    assert_eq!(namespaces(&out), ["ns", "ns"]);
}

/// A kubeconfig whose API server is a local port nothing listens on (bound, then released).
fn closed_port_kubeconfig(dir: &Path) -> (std::path::PathBuf, String) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let server = format!("https://127.0.0.1:{port}");
    let kc = kubeconfig(dir, "kc", "c", "ns");
    std::fs::write(
        &kc,
        std::fs::read_to_string(&kc)
            .unwrap()
            .replace("http://127.0.0.1:9", &server),
    )
    .unwrap();
    (kc, server)
}

fn pair_against(kc: &Path) -> Command {
    let mut cmd = Command::new(BIN);
    cmd.args(["pair", "--prefill", "node/a", "--decode", "node/b", "--kubeconfig"])
        .arg(kc)
        .env("IC_BENCH_LOG", "off")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    cmd
}

/// Waits for `child`, killing it (and failing) if it is still running after `limit`: a hang
/// detector, not a speed target.
fn wait_bounded(mut child: std::process::Child, limit: std::time::Duration) -> std::process::Output {
    let until = std::time::Instant::now() + limit;
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > until {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!(
                "still running after {limit:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn an_unreachable_api_server_is_one_short_line_without_cleanup() {
    let dir = tempfile::tempdir().unwrap();
    let (kc, server) = closed_port_kubeconfig(dir.path());
    // --request-timeout stays at its 30s default: connection refusals must not wait it out.
    let out = wait_bounded(pair_against(&kc).spawn().unwrap(), std::time::Duration::from_secs(10));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(out.stdout.is_empty());
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.contains(&format!(
            "cannot reach the Kubernetes API at {server} (connection refused)"
        )) && err.contains("--kubeconfig"),
        "{err}"
    );
    // Nothing was created, so there is nothing to clean up or to send the user to gc for.
    assert!(!err.contains("cleanup") && !err.contains("gc"), "{err}");
}

#[test]
fn ctrl_c_while_the_api_server_is_unreachable_exits_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let (kc, _) = closed_port_kubeconfig(dir.path());
    // A long request timeout: the interrupt, not a deadline, must end the run.
    let child = pair_against(&kc).args(["--request-timeout", "5m"]).spawn().unwrap();
    // Inside the short retry window for refused connections (the signal handler is up by then).
    std::thread::sleep(std::time::Duration::from_millis(1200));
    let kill = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
    let out = wait_bounded(child, std::time::Duration::from_secs(10));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(130), "{err}");
    assert_eq!(
        err.trim_end(),
        "ic-bench: interrupted by SIGINT (Ctrl-C): nothing was left to clean up",
        "{err}"
    );
}

/// Issue 17 item 8: the profile is part of the plan the prefill pod runs, so `--dry-run` shows it.
#[test]
fn the_ucx_profile_is_in_the_dry_run_plan() {
    let home = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(home.path().join(".kube")).unwrap();
    kubeconfig(&home.path().join(".kube"), "config", "home", "bench");
    let (code, out, err) = dry_run(home.path(), &[], &["--ucx-profile", "nixl"]);
    assert_eq!(code, 0, "{err}");
    let pods = icb_kube::yaml::pods(&out).unwrap();
    let args: Vec<String> = pods
        .iter()
        .flat_map(|p| {
            let c = p.spec.clone().unwrap().containers[0].clone();
            [c.command.unwrap_or_default(), c.args.unwrap_or_default()].concat()
        })
        .collect();
    let plan = args
        .iter()
        .skip_while(|a| *a != "--plan")
        .nth(1)
        .unwrap_or_else(|| panic!("no --plan in {args:?}"));
    let plan: icb_core::protocol::ChildPlan = serde_json::from_str(plan).unwrap();
    assert_eq!(plan.ucx_profile, Some(icb_core::UcxProfile::Nixl), "{plan:?}");
}
