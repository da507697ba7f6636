//! What the two runtime loaders (`ucx-sys` for UCX, `nixl-sys` for NIXL) both need, spelled once:
//! where Python environments keep installed wheels (a NIXL wheel bundles its own UCX, so both
//! loaders look there), which file a loaded symbol came from, and C strings and error text
//! turned into one-line Rust strings.
//!
//! Neither loader depends on the other: NIXL must be loadable without ic-bench's UCX engine, and
//! UCX without NIXL.
#![allow(unsafe_code)] // an FFI crate: unsafe is its job, each block with a SAFETY comment

use std::ffi::{CStr, OsString, c_char, c_void};
use std::path::PathBuf;

/// `lib` directories of the Python installations hosts and worker images use (each holds
/// `python3.X/`): system, user, and the usual image virtualenv and conda prefixes.
const PYTHON_LIB_DIRS: &[&str] = &[
    "/usr/local/lib",
    "/usr/lib",
    "/usr/local/lib64",
    "/usr/lib64",
    "/opt/venv/lib",
    "/opt/conda/lib",
    "/venv/lib",
];

/// The site-packages / dist-packages directories of this environment, most specific first:
/// `PYTHONPATH`, the active virtualenv or conda env, the user's `~/.local`, then the system and
/// image locations (Debian's `/usr/lib/python3/dist-packages` among them). `env` reads a variable (a parameter so tests can give their own).
pub fn python_site_dirs(env: impl Fn(&str) -> Option<OsString>) -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = env("PYTHONPATH")
        .map(|p| {
            std::env::split_paths(&p)
                .filter(|d| !d.as_os_str().is_empty())
                .collect()
        })
        .unwrap_or_default();
    let mut lib_dirs: Vec<PathBuf> = ["VIRTUAL_ENV", "CONDA_PREFIX"]
        .iter()
        .filter_map(|v| env(v).filter(|p| !p.is_empty()))
        .map(|p| PathBuf::from(p).join("lib"))
        .collect();
    if let Some(home) = env("HOME").filter(|h| !h.is_empty()) {
        lib_dirs.push(PathBuf::from(home).join(".local/lib"));
    }
    lib_dirs.extend(PYTHON_LIB_DIRS.iter().map(PathBuf::from));
    for lib in lib_dirs {
        let Ok(entries) = std::fs::read_dir(&lib) else { continue };
        let mut pythons: Vec<PathBuf> = entries
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().starts_with("python3"))
            .map(|e| e.path())
            .collect();
        pythons.sort();
        for py in pythons {
            out.push(py.join("site-packages"));
            out.push(py.join("dist-packages"));
        }
    }
    let mut seen = std::collections::HashSet::new();
    out.retain(|d| seen.insert(d.clone()));
    out
}

/// The file a loaded symbol belongs to, as the dynamic linker recorded it.
// dladdr uses `addr` only as a number to look up; it never reads through it.
#[allow(clippy::not_unsafe_ptr_arg_deref)]
pub fn library_file_of(addr: *const c_void) -> Option<PathBuf> {
    let mut info = libc::Dl_info {
        dli_fname: std::ptr::null(),
        dli_fbase: std::ptr::null_mut(),
        dli_sname: std::ptr::null(),
        dli_saddr: std::ptr::null_mut(),
    };
    // SAFETY: `info` is a valid, writable Dl_info; dladdr only reads `addr` as an address.
    let ok = unsafe { libc::dladdr(addr, &mut info) };
    if ok == 0 || info.dli_fname.is_null() {
        return None;
    }
    // SAFETY: on success dli_fname points at the NUL-terminated path of a loaded object, which
    // stays valid while that object is loaded (we copy it out immediately).
    let name = unsafe { CStr::from_ptr(info.dli_fname) };
    Some(PathBuf::from(name.to_string_lossy().into_owned()))
}

/// Copies a C string owned by a loaded library; NULL becomes "".
///
/// # Safety
/// `p` is NULL or points at a NUL-terminated string valid for the duration of the call.
pub unsafe fn c_str_or_empty(p: *const c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: non-NULL and NUL-terminated per this function's contract.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// A loader's error text (dlerror's can span lines) as one line.
pub fn one_line(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn site_dirs_come_from_pythonpath_then_the_virtualenv_without_repeats() {
        let venv = tempfile::tempdir().unwrap();
        let site = venv.path().join("lib/python3.12/site-packages");
        std::fs::create_dir_all(&site).unwrap();
        let pp = std::env::join_paths(["/pp/a", "", "/pp/b", "/pp/a"]).unwrap();
        let env = |v: &str| match v {
            "PYTHONPATH" => Some(pp.clone()),
            "VIRTUAL_ENV" => Some(venv.path().as_os_str().to_owned()),
            _ => None,
        };
        let dirs = python_site_dirs(env);
        assert_eq!(
            dirs[..3],
            [PathBuf::from("/pp/a"), PathBuf::from("/pp/b"), site.clone()]
        );
        assert!(!python_site_dirs(|_| None).contains(&site));
    }

    #[test]
    fn a_libc_symbol_names_libc_and_null_strings_are_empty() {
        let file = library_file_of(libc::dladdr as *const c_void).expect("libc is loaded");
        assert!(file.to_string_lossy().contains("libc"), "{file:?}");
        assert!(library_file_of(std::ptr::null()).is_none());
        // SAFETY: NULL is allowed by the contract.
        assert_eq!(unsafe { c_str_or_empty(std::ptr::null()) }, "");
        assert_eq!(one_line("cannot open\n  shared object"), "cannot open shared object");
    }
}
