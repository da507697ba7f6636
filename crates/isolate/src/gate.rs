//! Tests that need root (namespaces, veths) run for real in CI, which runs as root, and report
//! themselves skipped elsewhere. CI must never skip them silently, so a skip under `CI` is a failure.

/// True when this process runs as root (namespaces, veths and `ip netns` need it).
pub fn is_root() -> bool {
    nix::unistd::geteuid().is_root()
}

/// True when the caller may create namespaces. When not root: prints `skipped: needs root` and
/// returns false, except under `CI` (set by `.ci/run`), where it panics so the run goes red.
pub fn privileged_tests_enabled(test_name: &str) -> bool {
    if nix::unistd::geteuid().is_root() {
        return true;
    }
    if std::env::var_os("CI").is_some_and(|v| !v.is_empty()) {
        panic!("{test_name}: needs root, but CI is set: CI must run the privileged tests as root");
    }
    eprintln!("{test_name}: skipped: needs root (namespaces and veths)");
    false
}
