//! When NIXL cannot be used, the engine says so in one line that names what to do, and the
//! process exits 2 without crashing: no NIXL found, a library that is not NIXL, a NIXL too old
//! for the calls ic-bench makes, and a different UCX already loaded in the process.

use crate::common;

use common::{child, child_main, error_of, run_child};
use std::path::Path;
use std::time::Duration;

#[test]
#[ignore = "helper process: the other tests of this file run it as their child"]
fn child_entry() {
    child_main();
}

fn serve_with_lib(dir: &Path) -> (Option<i32>, String) {
    let env = [("ICB_NIXL_TEST_LIB", dir.display().to_string())];
    let (code, out, err) = run_child(
        child(concat!(module_path!(), "::child_entry"), "serve", &env),
        Duration::from_secs(60),
    );
    let msg = error_of(&out).unwrap_or_else(|| panic!("no error line (exit {code:?}):\n{out}\n{err}"));
    (code, msg)
}

fn assert_one_line_exit_2(code: Option<i32>, msg: &str) {
    assert_eq!(code, Some(2), "{msg}");
    assert!(!msg.contains('\n') && !msg.is_empty());
    assert!(!msg.contains("panicked"), "{msg}");
}

#[test]
fn no_nixl_in_the_given_directory() {
    let dir = tempfile::tempdir().unwrap();
    let (code, msg) = serve_with_lib(dir.path());
    assert_one_line_exit_2(code, &msg);
    assert!(msg.contains("NIXL not found") && msg.contains("--nixl-lib"), "{msg}");
    assert!(msg.contains(&dir.path().display().to_string()), "{msg}");
}

/// Builds a shared library named libnixl_capi.so from `source` with the system C compiler.
fn fake_library(source: &str) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let c = dir.path().join("fake.c");
    std::fs::write(&c, source).unwrap();
    let status = std::process::Command::new("cc")
        .args(["-shared", "-fPIC", "-o"])
        .arg(dir.path().join("libnixl_capi.so"))
        .arg(&c)
        .status()
        .expect("a C compiler (cc) to build the fake library");
    assert!(status.success());
    dir
}

#[test]
fn a_library_that_is_not_nixl() {
    let dir = fake_library("int not_nixl_at_all(void) { return 0; }\n");
    let (code, msg) = serve_with_lib(dir.path());
    assert_one_line_exit_2(code, &msg);
    assert!(msg.contains("is not NIXL's C API"), "{msg}");
}

#[test]
fn a_nixl_too_old_for_the_calls_ic_bench_makes() {
    let dir = fake_library(
        "int nixl_capi_create_agent(const char *n, void **a) { return -1; }\n\
         int nixl_capi_destroy_agent(void *a) { return 0; }\n",
    );
    let (code, msg) = serve_with_lib(dir.path());
    assert_one_line_exit_2(code, &msg);
    assert!(
        msg.contains("too old") && msg.contains("nixl_capi_create_xfer_req"),
        "{msg}"
    );
}

#[test]
fn another_ucx_already_loaded() {
    let (code, out, err) = run_child(
        child(concat!(module_path!(), "::child_entry"), "foreign-ucx", &[]),
        Duration::from_secs(60),
    );
    let msg = error_of(&out).unwrap_or_else(|| panic!("no error line (exit {code:?}):\n{out}\n{err}"));
    assert_one_line_exit_2(code, &msg);
    assert!(
        msg.contains("different UCX is already loaded") && msg.contains("own process"),
        "{msg}"
    );
}

#[test]
fn probe_load_names_the_nixl_it_can_load_or_why_not() {
    let (code, out, err) = run_child(
        child(concat!(module_path!(), "::child_entry"), "probe-load", &[]),
        Duration::from_secs(60),
    );
    assert_eq!(code, Some(0), "{out}\n{err}");
    let line = out
        .lines()
        .find_map(|l| l.split_once("LOADABLE ").map(|(_, r)| r.to_string()))
        .unwrap_or_else(|| panic!("{out}"));
    assert!(line.starts_with("NIXL ") && line.contains("libnixl_capi.so"), "{line}");
    let empty = tempfile::tempdir().unwrap();
    let env = [("ICB_NIXL_TEST_LIB", empty.path().display().to_string())];
    let (code, out, _) = run_child(
        child(concat!(module_path!(), "::child_entry"), "probe-load", &env),
        Duration::from_secs(60),
    );
    assert_eq!(code, Some(2));
    assert!(error_of(&out).unwrap_or_default().contains("NIXL not found"), "{out}");
}
