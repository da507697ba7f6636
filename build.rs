//! Embeds the git commit and the UCX headers version into `ic-bench --version`.

use std::path::PathBuf;
use std::process::Command;

fn main() {
    println!("cargo:rerun-if-env-changed=UCX_DIR");
    println!("cargo:rerun-if-env-changed=UCX_INCLUDE_DIR");
    println!("cargo:rerun-if-env-changed=IC_BENCH_UCX_DIR");
    println!("cargo:rerun-if-changed=.git/HEAD");
    let commit = std::env::var("IC_BENCH_GIT_COMMIT")
        .ok()
        .or_else(git_commit)
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=IC_BENCH_GIT_COMMIT={commit}");
    println!(
        "cargo:rustc-env=IC_BENCH_UCX_HEADERS={}",
        ucx_headers_version().unwrap_or_else(|| "unknown".into())
    );
}

fn git_commit() -> Option<String> {
    let out = Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .output()
        .ok()?;
    let s = String::from_utf8(out.stdout).ok()?.trim().to_string();
    if !out.status.success() || s.is_empty() {
        return None;
    }
    let dirty = Command::new("git")
        .args(["status", "--porcelain", "--untracked-files=no"])
        .output()
        .map(|o| !o.stdout.is_empty())
        .unwrap_or(false);
    Some(if dirty { format!("{s}-dirty") } else { s })
}

/// Reads `UCP_API_MAJOR/MINOR` (and the full version string where present) from ucp_version.h.
fn ucx_headers_version() -> Option<String> {
    let include = std::env::var_os("UCX_INCLUDE_DIR")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("UCX_DIR").map(|d| PathBuf::from(d).join("include")))
        .or_else(|| std::env::var_os("IC_BENCH_UCX_DIR").map(|d| PathBuf::from(d).join("include")))?;
    let header = include.join("ucp/api/ucp_version.h");
    println!("cargo:rerun-if-changed={}", header.display());
    let text = std::fs::read_to_string(header).ok()?;
    let define = |name: &str| {
        text.lines().find_map(|l| {
            let mut it = l.split_whitespace();
            (it.next() == Some("#define") && it.next() == Some(name))
                .then(|| it.next().map(|v| v.trim_matches('"').to_string()))?
        })
    };
    define("UCP_VERSION_STRING").or_else(|| Some(format!("{}.{}", define("UCP_API_MAJOR")?, define("UCP_API_MINOR")?)))
}
