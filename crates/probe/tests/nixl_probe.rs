//! `probe nixl` on replayed install trees.

use icb_core::Status;
use icb_probe::{LocalSource, NixlOptions, TransportEnv, probe_nixl};
use std::path::Path;
use std::time::Duration;

fn write(root: &Path, rel: &str, bytes: &[u8]) {
    let p = root.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, bytes).unwrap();
}

fn touch(root: &Path, rel: &str) {
    write(root, rel, b"");
}

/// The 64-byte header of an x86-64 ELF shared object (e_type ET_DYN), as a real .so starts.
fn elf_shared_object() -> Vec<u8> {
    let mut h = vec![0u8; 64];
    h[..4].copy_from_slice(b"\x7fELF");
    h[4] = 2; // 64-bit
    h[5] = 1; // little endian
    h[6] = 1; // version
    h[16] = 3; // ET_DYN
    h[18] = 62; // x86-64
    h
}

/// A library or plugin that the loader would accept (by its header).
fn library(root: &Path, rel: &str) {
    write(root, rel, &elf_shared_object());
}

fn run(root: &Path, vars: &[(&str, &str)]) -> icb_core::checks::ProbeReport {
    let env = TransportEnv::new("test", vars.iter().map(|(k, v)| (k.to_string(), v.to_string())));
    probe_nixl(
        &LocalSource::replay(root),
        &NixlOptions {
            env,
            tool_timeout: Duration::from_secs(1),
            pair_hint_target: None,
            lib_dirs: Vec::new(),
        },
    )
}

fn status(r: &icb_core::checks::ProbeReport, id: &str) -> Status {
    r.checks.iter().find(|c| c.id == id).map(|c| c.status).unwrap()
}

#[test]
fn dynamo_image_layout_is_found() {
    let t = tempfile::tempdir().unwrap();
    let r = t.path();
    library(r, "opt/nvidia/nvda_nixl/lib64/libnixl.so");
    library(r, "opt/nvidia/nvda_nixl/lib64/plugins/libplugin_UCX.so");
    touch(r, "opt/nvidia/nvda_nixl/bin/nixlbench");
    touch(r, "usr/lib/python3/dist-packages/nixl/__init__.py");
    library(
        r,
        "usr/lib/python3/dist-packages/nixl/_bindings.cpython-312-x86_64-linux-gnu.so",
    );
    std::fs::create_dir_all(r.join("tools")).unwrap();
    std::fs::write(
        r.join("tools/python_path.txt"),
        "/usr/lib/python312.zip\n/usr/lib/python3/dist-packages\n",
    )
    .unwrap();
    let rep = run(r, &[]);
    for id in ["nixl.libs", "nixl.plugins", "nixl.python", "nixl.tools"] {
        assert_eq!(status(&rep, id), Status::Ok, "{id}: {rep:#?}");
    }
    assert_eq!(rep.status, Status::Ok);
    assert!(rep.next_steps[0].starts_with("ic-bench pair --prefill pod/PREFILL_POD --decode pod/DECODE_POD"));
}

#[test]
fn wheel_layout_and_efa_without_libfabric() {
    let t = tempfile::tempdir().unwrap();
    let r = t.path();
    let site = "venv/lib/python3.12/site-packages";
    library(r, &format!("{site}/.nixl_cu12.mesonpy.libs/libnixl.so"));
    library(r, &format!("{site}/.nixl_cu12.mesonpy.libs/plugins/libplugin_UCX.so"));
    touch(r, &format!("{site}/nixl_cu12/__init__.py"));
    library(
        r,
        &format!("{site}/nixl_cu12/_bindings.cpython-312-x86_64-linux-gnu.so"),
    );
    std::fs::create_dir_all(r.join("sys/class/infiniband/rdmap16s27")).unwrap();
    std::fs::create_dir_all(r.join("tools")).unwrap();
    std::fs::write(r.join("tools/python_path.txt"), format!("/{site}\n")).unwrap();
    let rep = run(r, &[]);
    assert_eq!(status(&rep, "nixl.libs"), Status::Ok);
    assert_eq!(status(&rep, "nixl.python"), Status::Ok);
    assert_eq!(status(&rep, "nixl.plugins"), Status::Warn, "{rep:#?}");
    assert_eq!(status(&rep, "nixl.tools"), Status::Warn);
    library(
        r,
        &format!("{site}/.nixl_cu12.mesonpy.libs/plugins/libplugin_LIBFABRIC.so"),
    );
    assert_eq!(status(&run(r, &[]), "nixl.plugins"), Status::Ok);
}

#[test]
fn wrong_plugin_dir_fails_and_nothing_installed_warns() {
    let t = tempfile::tempdir().unwrap();
    let rep = run(t.path(), &[("NIXL_PLUGIN_DIR", "/opt/missing/plugins")]);
    assert_eq!(status(&rep, "nixl.plugins"), Status::Fail);
    assert_eq!(rep.exit_code(), 1);
    let rep = run(t.path(), &[]);
    assert_eq!(status(&rep, "nixl.libs"), Status::Warn);
    assert_eq!(status(&rep, "nixl.plugins"), Status::Warn);
    // No recorded python3 output: skipped, not a pass.
    assert_eq!(status(&rep, "nixl.python"), Status::Skipped);
}

#[test]
fn an_empty_plugin_or_a_stub_package_is_not_ok() {
    let t = tempfile::tempdir().unwrap();
    let r = t.path();
    let site = "usr/lib/python3/dist-packages";
    library(r, "opt/nvidia/nvda_nixl/lib64/libnixl.so");
    touch(r, "opt/nvidia/nvda_nixl/lib64/plugins/libplugin_UCX.so");
    // A package of .py files only: `import nixl` would fail on its bindings.
    touch(r, &format!("{site}/nixl/__init__.py"));
    std::fs::create_dir_all(r.join("tools")).unwrap();
    std::fs::write(r.join("tools/python_path.txt"), format!("/{site}\n")).unwrap();
    let rep = run(r, &[]);
    let plugin = rep.checks.iter().find(|c| c.id == "nixl.plugins").unwrap();
    assert_eq!(plugin.status, Status::Fail, "{plugin:?}");
    assert!(plugin.detail.contains("is empty (0 bytes)"), "{}", plugin.detail);
    let py = rep.checks.iter().find(|c| c.id == "nixl.python").unwrap();
    assert_eq!(py.status, Status::Fail, "{py:?}");
    assert!(py.detail.contains("no compiled bindings"), "{}", py.detail);
    // A text file where the plugin should be, and an ELF executable: refused too.
    write(
        r,
        "opt/nvidia/nvda_nixl/lib64/plugins/libplugin_UCX.so",
        b"placeholder\n",
    );
    assert_eq!(status(&run(r, &[]), "nixl.plugins"), Status::Fail);
    let mut exe = elf_shared_object();
    exe[16] = 2; // ET_EXEC
    write(r, "opt/nvidia/nvda_nixl/lib64/plugins/libplugin_UCX.so", &exe);
    assert_eq!(status(&run(r, &[]), "nixl.plugins"), Status::Fail);
    library(r, "opt/nvidia/nvda_nixl/lib64/plugins/libplugin_UCX.so");
    assert_eq!(status(&run(r, &[]), "nixl.plugins"), Status::Ok);
}

#[test]
fn the_engine_load_result_becomes_the_nixl_engine_check() {
    let dir = tempfile::tempdir().unwrap();
    let env = TransportEnv::new("test", std::iter::empty::<(String, String)>());
    let opts = NixlOptions {
        env,
        tool_timeout: Duration::from_secs(1),
        pair_hint_target: None,
        lib_dirs: Vec::new(),
    };
    let src = LocalSource::replay(dir.path());
    let ok = icb_probe::probe_nixl_with_engine(
        &src,
        &opts,
        Some(Ok::<_, &str>("NIXL 1.5.1 (/x/libnixl_capi.so)".into())),
    );
    let c = ok.checks.iter().find(|c| c.id == "nixl.engine").unwrap();
    assert_eq!(c.status, Status::Ok);
    assert!(c.detail.contains("1.5.1"), "{c:?}");
    let bad = icb_probe::probe_nixl_with_engine(&src, &opts, Some(Err::<String, _>("NIXL not found: …")));
    let c = bad.checks.iter().find(|c| c.id == "nixl.engine").unwrap();
    assert_eq!(c.status, Status::Fail);
    assert!(c.hint.as_deref().unwrap_or("").contains("--nixl-lib"), "{c:?}");
    assert!(probe_nixl(&src, &opts).checks.iter().all(|c| c.id != "nixl.engine"));
    // The next step names the NIXL engine only when it can load NIXL.
    let names_engine = |r: &icb_core::checks::ProbeReport| r.next_steps.iter().any(|s| s.contains("--engine nixl"));
    assert!(names_engine(&ok));
    assert!(!names_engine(&bad));
}

#[test]
fn a_library_directory_named_on_the_command_line_or_above_the_plugins_is_searched() {
    let dir = tempfile::tempdir().unwrap();
    library(dir.path(), "opt/custom/nixl/lib/libnixl.so");
    let src = LocalSource::replay(dir.path());
    let with = |vars: &[(&str, &str)], lib_dirs: Vec<String>| {
        let env = TransportEnv::new("test", vars.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        let opts = NixlOptions {
            env,
            tool_timeout: Duration::from_secs(1),
            pair_hint_target: None,
            lib_dirs,
        };
        let r = probe_nixl(&src, &opts);
        r.checks.iter().find(|c| c.id == "nixl.libs").cloned().unwrap()
    };
    assert_eq!(with(&[], Vec::new()).status, Status::Warn);
    let named = with(&[], vec!["/opt/custom/nixl/lib".into()]);
    assert_eq!(named.status, Status::Ok, "{}", named.detail);
    assert!(
        named.detail.contains("/opt/custom/nixl/lib/libnixl.so"),
        "{}",
        named.detail
    );
    let by_plugins = with(&[("NIXL_PLUGIN_DIR", "/opt/custom/nixl/lib/plugins/")], Vec::new());
    assert_eq!(by_plugins.status, Status::Ok, "{}", by_plugins.detail);
}
