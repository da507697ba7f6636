//! Generates the UCP/UCS bindings from the UCX headers found at build time, in bindgen's
//! dynamic-loading mode: the binary carries a function table that is filled from whatever
//! `libucp.so.0` it finds at run time, so one build runs against the UCX of any node or image.

use std::path::{Path, PathBuf};
use std::process::Command;

const HOWTO: &str = "set UCX_INCLUDE_DIR (the directory holding ucp/api/ucp.h) or UCX_DIR (a UCX install prefix), \
     or make `pkg-config --cflags ucx` work; `scripts/setup` installs a UCX into .deps/ucx and points the build at it";

fn main() {
    for var in ["UCX_INCLUDE_DIR", "UCX_DIR", "IC_BENCH_UCX_DIR", "PKG_CONFIG_PATH"] {
        println!("cargo:rerun-if-env-changed={var}");
    }
    println!("cargo:rerun-if-changed=wrapper.h");
    // `cargo::error` fails the build with exactly one line (no panic backtrace).
    if let Err(message) = generate() {
        println!("cargo::error={message}");
    }
}

fn generate() -> Result<(), String> {
    let include = find_include_dir()?;
    let version_h = include.join("ucp/api/ucp_version.h");
    println!("cargo:rerun-if-changed={}", version_h.display());
    println!("cargo:rerun-if-changed={}", include.join("ucp/api/ucp.h").display());

    let bindings = bindgen::Builder::default()
        .header("wrapper.h")
        .clang_arg(format!("-I{}", include.display()))
        .dynamic_library_name("Ucp")
        .dynamic_link_require_all(false)
        .allowlist_function("ucp_.*")
        .allowlist_function("ucs_status_string")
        .allowlist_function("ucs_log_push_handler")
        .allowlist_function("vsnprintf")
        .allowlist_type("ucs_log_.*")
        .allowlist_type("ucp_.*")
        .allowlist_type("ucs_status_t")
        .allowlist_type("ucs_memory_type")
        .allowlist_type("ucs_memory_type_t")
        .allowlist_type("ucs_thread_mode_t")
        .allowlist_type("ucs_sock_addr")
        .allowlist_var("UCP_.*")
        .allowlist_var("UCS_.*")
        .default_enum_style(bindgen::EnumVariation::Consts)
        .prepend_enum_name(false)
        .derive_default(true)
        .layout_tests(false)
        .generate_comments(false)
        .parse_callbacks(Box::new(bindgen::CargoCallbacks::new()))
        .generate()
        .map_err(|e| {
            format!(
                "bindgen failed on {} ({e}); is libclang installed? `scripts/setup` installs it",
                include.display()
            )
        })?;
    let out = PathBuf::from(std::env::var_os("OUT_DIR").ok_or("OUT_DIR is not set (run through cargo)")?);
    bindings
        .write_to_file(out.join("bindings.rs"))
        .map_err(|e| format!("cannot write bindings into {}: {e}", out.display()))?;

    let api_major = read_define(&version_h, "UCP_API_MAJOR").unwrap_or_default();
    let api_minor = read_define(&version_h, "UCP_API_MINOR").unwrap_or_default();
    let full = read_define(&include.join("uct/api/version.h"), "UCT_VERNO_STRING")
        .unwrap_or_else(|| format!("{api_major}.{api_minor}"));
    let version_rs = format!(
        "/// The full UCX version of the headers this crate was generated from (e.g. \"1.22.0\").\n\
         pub const HEADER_VERSION_STRING: &str = {full:?};\n"
    );
    std::fs::write(out.join("header_version.rs"), version_rs)
        .map_err(|e| format!("cannot write header_version.rs into {}: {e}", out.display()))
}

fn find_include_dir() -> Result<PathBuf, String> {
    let has_ucp = |d: &Path| d.join("ucp/api/ucp.h").is_file();
    let var = |name: &str| std::env::var_os(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(d) = var("UCX_INCLUDE_DIR") {
        return if has_ucp(&d) {
            Ok(d)
        } else {
            Err(format!("UCX_INCLUDE_DIR={} has no ucp/api/ucp.h: {HOWTO}", d.display()))
        };
    }
    if let Some(d) = var("UCX_DIR").map(|d| d.join("include")) {
        return if has_ucp(&d) {
            Ok(d)
        } else {
            Err(format!(
                "UCX_DIR/include ({}) has no ucp/api/ucp.h: {HOWTO}",
                d.display()
            ))
        };
    }
    // Set by .cargo/config.toml to the UCX scripts/setup installed. Not named UCX_*, because cargo
    // also exports it to every process it runs, and UCX warns about UCX_* variables it doesn't know.
    if let Some(d) = var("IC_BENCH_UCX_DIR")
        .map(|d| d.join("include"))
        .filter(|d| has_ucp(d))
    {
        return Ok(d);
    }
    pkg_config_include()
        .filter(|d| has_ucp(d))
        .ok_or_else(|| format!("UCX headers not found: {HOWTO}"))
}

/// Asks `pkg-config` for the ucx include directory (via the binary: no extra build dependency).
fn pkg_config_include() -> Option<PathBuf> {
    let out = Command::new("pkg-config")
        .args(["--cflags-only-I", "ucx"])
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let text = String::from_utf8(out.stdout).ok()?;
    let mut dirs: Vec<PathBuf> = text
        .split_whitespace()
        .filter_map(|f| f.strip_prefix("-I"))
        .map(PathBuf::from)
        .collect();
    if dirs.is_empty() {
        // `pkg-config` omits system include dirs such as /usr/include.
        dirs.push(PathBuf::from("/usr/include"));
    }
    dirs.into_iter().find(|d| d.join("ucp/api/ucp.h").is_file())
}

fn read_define(path: &Path, name: &str) -> Option<String> {
    println!("cargo:rerun-if-changed={}", path.display());
    let text = std::fs::read_to_string(path).ok()?;
    text.lines().find_map(|l| {
        let mut it = l.split_whitespace();
        if it.next() == Some("#define") && it.next() == Some(name) {
            it.next().map(|v| v.trim_matches('"').to_string())
        } else {
            None
        }
    })
}
