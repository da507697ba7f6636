//! The pod script, run here with POSIX sh against the fixture roots, must show the same node as
//! reading the roots directly, and must leave no file behind.

use icb_probe::remote::{nixl_script, node_script, parse_snapshot};
use icb_probe::{GatherOptions, LocalSource, NodeSource, gather};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

fn root(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/nodes")
        .join(name)
}

fn run_script(script: &str, root: &Path, cwd: &Path, extra_env: &[(&str, &str)]) -> String {
    let empty_path = cwd.join("no-tools");
    std::fs::create_dir_all(&empty_path).unwrap();
    let mut cmd = Command::new("sh");
    cmd.arg("-c")
        .arg(script)
        .current_dir(cwd)
        .env_clear()
        // Only the shell's builtins plus cat/ls/sleep/timeout: the node tools are "missing".
        .env("PATH", format!("{}:/usr/bin:/bin", empty_path.display()))
        .env("ICB_SYS", root.join("sys"))
        .env("ICB_DEV", root.join("dev"))
        .env("ICB_PROC", root.join("proc"));
    for (k, v) in extra_env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "script failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn pod_script_sees_what_the_local_reader_sees() {
    for name in [
        "healthy_ib",
        "roce_gid_disagree",
        "detect_multi_hca",
        "down_port",
        "no_rdma",
    ] {
        let cwd = tempfile::tempdir().unwrap();
        let text = run_script(
            &node_script(0, 5),
            &root(name),
            cwd.path(),
            &[("UCX_TLS", "rc,cuda_copy"), ("SECRET_TOKEN", "x")],
        );
        // Nothing written where it ran (the only entry is the test's own empty PATH dir).
        let left: Vec<_> = std::fs::read_dir(cwd.path())
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(left, vec![std::ffi::OsString::from("no-tools")], "{name}");

        let snap = parse_snapshot("pod/x", &text).unwrap();
        assert_eq!(snap.env.get("UCX_TLS").map(String::as_str), Some("rc,cuda_copy"));
        assert!(!snap.env.contains_key("SECRET_TOKEN"));
        let opts = GatherOptions {
            tool_timeout: Duration::from_secs(1),
            counter_interval: Duration::ZERO,
        };
        let remote = gather(&snap, &opts);
        let mut local_src = LocalSource::replay(&root(name));
        local_src.tool_outputs = Some(cwd.path().join("none"));
        let local = gather(&local_src, &opts);
        assert_eq!(remote.devices, local.devices, "{name}");
        assert_eq!(remote.ports, local.ports, "{name}");
        assert_eq!(remote.dev_infiniband, local.dev_infiniband, "{name}");
        assert_eq!(remote.modules, local.modules, "{name}");
        assert_eq!(remote.nvidia, local.nvidia, "{name}");
        assert_eq!(remote.kernel_release, local.kernel_release, "{name}");
        assert_eq!(remote.gdrdrv, local.gdrdrv, "{name}");
        assert_eq!(remote.netdevs, local.netdevs, "{name}");
        // Tools absent from PATH are reported missing, not as empty output.
        assert!(
            remote.tool_gaps.values().any(|g| g.contains("not installed")),
            "{:?}",
            remote.tool_gaps
        );
    }
}

#[test]
fn pod_script_second_counter_sample() {
    let cwd = tempfile::tempdir().unwrap();
    let text = run_script(&node_script(1, 5), &root("healthy_ib"), cwd.path(), &[]);
    let snap = parse_snapshot("pod/x", &text).unwrap();
    let p = "/sys/class/infiniband/mlx5_0/ports/1/counters/symbol_error".to_string();
    assert_eq!(
        snap.resample(std::slice::from_ref(&p), Duration::ZERO),
        Some(vec![Some("0\n".to_string())])
    );
}

#[test]
fn nixl_script_finds_plugins_under_nixl_plugin_dir() {
    let fake = tempfile::tempdir().unwrap();
    let plugins = fake.path().join("plugins");
    std::fs::create_dir_all(&plugins).unwrap();
    std::fs::write(plugins.join("libplugin_UCX.so"), b"").unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let text = run_script(
        &nixl_script(5),
        &root("no_rdma"),
        cwd.path(),
        &[("NIXL_PLUGIN_DIR", plugins.to_str().unwrap())],
    );
    let snap = parse_snapshot("pod/x", &text).unwrap();
    let env = icb_probe::TransportEnv::new("pod/x env", snap.env.clone());
    let opts = icb_probe::NixlOptions {
        env,
        tool_timeout: Duration::from_secs(5),
        pair_hint_target: Some("pod/x".into()),
        lib_dirs: Vec::new(),
    };
    let r = icb_probe::probe_nixl(&snap, &opts);
    let c = r.checks.iter().find(|c| c.id == "nixl.plugins").unwrap();
    assert_eq!(c.status, icb_core::Status::Ok, "{c:?}");
    assert_eq!(r.next_steps[0], "ic-bench pair --prefill pod/x --decode pod/DECODE_POD");
}

#[test]
fn pod_script_runs_tools_under_the_deadline() {
    use icb_probe::tools::{Tool, ToolRun};
    use std::os::unix::fs::PermissionsExt;
    let cwd = tempfile::tempdir().unwrap();
    let bin = cwd.path().join("no-tools");
    std::fs::create_dir_all(&bin).unwrap();
    let ucx = std::fs::read_to_string(root("healthy_ib").join("tools/ucx_info.txt")).unwrap();
    let fake = |name: &str, body: &str| {
        let p = bin.join(name);
        std::fs::write(&p, format!("#!/bin/sh\n{body}\n")).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    };
    fake("ucx_info", &format!("cat <<'EOT'\n{ucx}EOT"));
    fake("ibstat", "sleep 30");
    fake("ibv_devinfo", "echo 'No IB devices found' >&2; exit 255");
    let t0 = std::time::Instant::now();
    let text = run_script(&node_script(0, 1), &root("healthy_ib"), cwd.path(), &[]);
    assert!(
        t0.elapsed() < Duration::from_secs(20),
        "the tool deadline was not applied"
    );
    let snap = parse_snapshot("pod/x", &text).unwrap();
    assert_eq!(snap.tools.get(&Tool::Ibstat), Some(&ToolRun::TimedOut { after_s: 1 }));
    assert!(
        matches!(snap.tools.get(&Tool::IbvDevinfo), Some(ToolRun::Ran { code: Some(255), stdout, .. }) if stdout.contains("No IB devices found"))
    );
    let facts = gather(
        &snap,
        &GatherOptions {
            tool_timeout: Duration::from_secs(1),
            counter_interval: Duration::ZERO,
        },
    );
    assert_eq!(facts.ucx.as_ref().map(|u| u.memory_domains.len()), Some(4));
    assert_eq!(
        facts.tool_gaps.get(&Tool::Ibstat).map(String::as_str),
        Some("ibstat did not finish within 1 s")
    );
}

#[test]
fn pod_script_gives_the_same_rail_map_as_the_local_reader() {
    let opts = GatherOptions {
        tool_timeout: Duration::from_secs(1),
        counter_interval: Duration::ZERO,
    };
    for name in ["hgx8", "hgx8_bond", "shared_nic", "no_gpu", "broken"] {
        let fixture = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/rails")
            .join(name);
        let cwd = tempfile::tempdir().unwrap();
        let text = run_script(&node_script(0, 5), &fixture, cwd.path(), &[]);
        let snap = parse_snapshot("pod/x", &text).unwrap();
        let mut local_src = LocalSource::replay(&fixture);
        // No tools in the pod's PATH: compare without the replayed nvidia-smi on both sides.
        local_src.tool_outputs = Some(cwd.path().join("none"));
        let local = icb_probe::rails::rail_map(&local_src, &gather(&local_src, &opts));
        let remote = icb_probe::rails::rail_map(&snap, &gather(&snap, &opts));
        assert!(local.as_ref().is_some_and(|m| !m.rails.is_empty()), "{name}: {local:?}");
        assert_eq!(remote, local, "{name}");
    }
    // A snapshot without the PCI tree (an older script) has no rail map, not an empty one.
    let cwd = tempfile::tempdir().unwrap();
    let text = run_script(&node_script(0, 5), &root("healthy_ib"), cwd.path(), &[]);
    let snap = parse_snapshot("pod/x", &text).unwrap();
    assert_eq!(icb_probe::rails::rail_map(&snap, &gather(&snap, &opts)), None);
}

/// The `snapshot` fuzz target's seeds (`fuzz/seeds/snapshot/`) are this script's output for every
/// node and rail fixture, with the fixture's recorded tool outputs behind stub tools, so that a
/// campaign starts from what a real pod prints (from no seed, libFuzzer never found the `@@ICB`
/// markers: 10 M executions reached 56 edges). `IC_BENCH_WRITE_FUZZ_SEEDS=1` rewrites them after
/// the script changes; otherwise each seed must parse and hold what the script prints today (the
/// same files, listings, tools and variables; the values of `/proc/self/*` are the machine's).
#[test]
fn the_snapshot_fuzz_seeds_are_what_the_script_prints_for_each_fixture() {
    use std::os::unix::fs::PermissionsExt;
    let manifest = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let seeds = manifest.join("../../fuzz/seeds/snapshot");
    let write = std::env::var_os("IC_BENCH_WRITE_FUZZ_SEEDS").is_some();
    let mut fixtures: Vec<(String, PathBuf)> = Vec::new();
    for (kind, dir) in [
        ("node", manifest.join("../../tests/fixtures/nodes")),
        ("rails", manifest.join("tests/fixtures/rails")),
    ] {
        for e in std::fs::read_dir(&dir).unwrap() {
            let p = e.unwrap().path();
            if p.join("sys").is_dir() {
                let name = p.file_name().unwrap().to_string_lossy().into_owned();
                fixtures.push((format!("{kind}-{name}"), p));
            }
        }
    }
    fixtures.sort();
    assert!(fixtures.len() >= 10, "{fixtures:?}");
    let shape = |s: &icb_probe::Snapshot| {
        let files: Vec<&String> = s.files.keys().collect();
        let tools: Vec<String> = s.tools.keys().map(|t| format!("{t:?}")).collect();
        let env: Vec<&String> = s.env.keys().collect();
        format!(
            "{files:?} {:?} {:?} {tools:?} {env:?} {:?}",
            s.dirs,
            s.present,
            s.second_sample.keys()
        )
    };
    for (name, fixture) in &fixtures {
        let cwd = tempfile::tempdir().unwrap();
        let stubs = cwd.path().join("stubs");
        std::fs::create_dir_all(&stubs).unwrap();
        for (tool, recorded) in [
            ("ibstat", "ibstat.txt"),
            ("ibv_devinfo", "ibv_devinfo.txt"),
            ("nvidia-smi", "topo.txt"),
            ("ucx_info", "ucx_info.txt"),
        ] {
            let out = fixture.join("tools").join(recorded);
            if out.is_file() {
                let p = stubs.join(tool);
                std::fs::write(&p, format!("#!/bin/sh\ncat '{}'\n", out.display())).unwrap();
                std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
            }
        }
        let path = format!("{}:/usr/bin:/bin", stubs.display());
        let pause = u32::from(name == "node-healthy_ib");
        let text = run_script(
            &node_script(pause, 5),
            fixture,
            cwd.path(),
            &[
                ("PATH", &path),
                ("UCX_TLS", "rc,cuda_copy"),
                ("UCX_NET_DEVICES", "mlx5_0:1"),
            ],
        );
        let now = parse_snapshot("pod/seed", &text).unwrap();
        let seed = seeds.join(format!("{name}.txt"));
        if write {
            std::fs::create_dir_all(&seeds).unwrap();
            std::fs::write(&seed, &text).unwrap();
            continue;
        }
        let committed = std::fs::read_to_string(&seed).unwrap_or_else(|e| {
            panic!(
                "{}: {e}; IC_BENCH_WRITE_FUZZ_SEEDS=1 cargo test -p icb-probe --test main remote_script:: writes it",
                seed.display()
            )
        });
        let then = parse_snapshot("pod/seed", &committed).unwrap();
        assert_eq!(
            shape(&then),
            shape(&now),
            "{name}: the seed is stale (IC_BENCH_WRITE_FUZZ_SEEDS=1 rewrites it)"
        );
    }
}

/// The readiness checks judge a pod's snapshot as they judge the tree itself: PCIe links, IOMMU
/// groups and Data Direct functions travel through the script (config space does not: a pod
/// reads ACS from the IOMMU groups).
#[test]
fn pod_script_gives_the_same_readiness_verdicts_as_the_local_reader() {
    let opts = GatherOptions {
        tool_timeout: Duration::from_secs(1),
        counter_interval: Duration::ZERO,
    };
    let ids = ["node.pcie_link", "node.acs", "node.data_direct"];
    for name in ["pcie_down", "pcie_ok", "pcie_acs_groups", "gb300_dd", "hgx8"] {
        let fixture = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/rails")
            .join(name);
        let cwd = tempfile::tempdir().unwrap();
        let text = run_script(&node_script(0, 5), &fixture, cwd.path(), &[]);
        let snap = parse_snapshot("pod/x", &text).unwrap();
        let mut local_src = LocalSource::replay(&fixture);
        local_src.tool_outputs = Some(cwd.path().join("none"));
        let x = icb_probe::NodeExpectations::default();
        let (local, _) = icb_probe::probe_node(&local_src, &opts, &x);
        let (remote, _) = icb_probe::probe_node(&snap, &opts, &x);
        for id in ids {
            let status = |r: &icb_core::checks::ProbeReport| r.checks.iter().find(|c| c.id == id).map(|c| c.status);
            assert_eq!(status(&remote), status(&local), "{name} {id}: {:?}", remote.checks);
        }
        assert_eq!(remote.rail_map, local.rail_map, "{name}");
        let links = |r: &icb_core::checks::ProbeReport| r.readiness.as_ref().map(|x| x.pcie_links.clone());
        assert_eq!(links(&remote), links(&local), "{name}");
    }
}
