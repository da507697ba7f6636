//! Finds, opens and checks NIXL's C library at run time.
//!
//! Search order: the caller's explicit directory (`--nixl-lib DIR`, else `IC_BENCH_NIXL_LIB`) —
//! exclusively, so a mistyped directory is an error rather than a silent switch to another NIXL —,
//! else NIXL's install locations (`/opt/nvidia/nvda_nixl/lib*` in Dynamo/NGC images,
//! `/usr/local/nixl/lib*`), else the PyPI wheel's library directory (`.nixl*.mesonpy.libs`) in
//! ic-bench's own `.deps/nixl` and in Python site-packages, else the dynamic linker.
//!
//! NIXL brings a UCX (the wheel bundles its own, renamed copy; source builds link the system one).
//! Two UCX copies in one process crash, so [`load`] refuses to start when a `libucp` from
//! anywhere else is already loaded, and [`loaded_ucx`] lets the caller check again once NIXL's
//! UCX backend has pulled its copy in.

use crate::bindings::NixlCapi;
pub use icb_dylib::c_str_or_empty;
use icb_dylib::{library_file_of, one_line};
use libloading::os::unix::{Library as UnixLibrary, RTLD_GLOBAL, RTLD_LAZY};
use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::path::{Path, PathBuf};

/// The environment variable naming the directory that holds `libnixl_capi.so`.
pub const ENV_NIXL_LIB: &str = "IC_BENCH_NIXL_LIB";
/// The C API library's file name.
pub const LIBRARY_NAME: &str = "libnixl_capi.so";

/// Install prefixes of NIXL in NGC/Dynamo images and source builds, and their library dirs.
pub const INSTALL_PREFIXES: [&str; 2] = ["/opt/nvidia/nvda_nixl", "/usr/local/nixl"];
pub const INSTALL_LIBDIRS: [&str; 4] = ["lib64", "lib/x86_64-linux-gnu", "lib/aarch64-linux-gnu", "lib"];

/// NIXL and its UCX are never unloaded: both keep global state (UCX's memory hooks, plugin
/// registries) that must outlive any handle.
const RTLD_NODELETE: c_int = 0x1000;
const OPEN_FLAGS: c_int = RTLD_LAZY | RTLD_GLOBAL | RTLD_NODELETE;

/// The first symbol any NIXL C API has: a library without it is not NIXL.
const IDENTITY_SYMBOL: &str = "nixl_capi_create_agent";

/// Why NIXL could not be used. Each message is one line that says how to fix it.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error(
        "NIXL not found: no {LIBRARY_NAME} in {searched}; install NIXL (e.g. `pip install nixl-cu12`, or scripts/setup) or point ic-bench at it with --nixl-lib DIR or IC_BENCH_NIXL_LIB=DIR"
    )]
    NotFound { searched: String },
    #[error(
        "cannot load NIXL library {path}: {reason}; point --nixl-lib / IC_BENCH_NIXL_LIB at a working NIXL install"
    )]
    Open { path: String, reason: String },
    #[error(
        "{path} is not NIXL's C API (it has no {IDENTITY_SYMBOL}); point --nixl-lib / IC_BENCH_NIXL_LIB at the directory of NIXL's libnixl_capi.so"
    )]
    NotNixl { path: String },
    #[error(
        "the NIXL at {path} is too old: its C API lacks {missing}; use NIXL >= 1.5 (tested: 1.5.1) via --nixl-lib / IC_BENCH_NIXL_LIB"
    )]
    TooOld { path: String, missing: String },
    #[error(
        "a different UCX is already loaded in this process ({loaded}) and NIXL brings its own (two UCX copies in one process crash): run the NIXL engine in its own process, without --ucx-lib / the UCX engine"
    )]
    ForeignUcx { loaded: String },
}

/// A loaded NIXL C API.
pub struct Loaded {
    /// The function table (each entry a `Result`; every entry ic-bench calls was checked present).
    pub capi: NixlCapi,
    /// The file `libnixl_capi.so` was opened from.
    pub path: PathBuf,
    /// Its directory (plugins live in `<dir>/plugins` in both the wheel and source installs).
    pub dir: PathBuf,
    /// NIXL's release, from the wheel's dist-info or the install's `nixl.pc`; `None` if unknown.
    pub version: Option<String>,
}

impl std::fmt::Debug for Loaded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Loaded")
            .field("path", &self.path)
            .field("version", &self.version)
            .finish_non_exhaustive()
    }
}

/// Copies a function pointer out of the table; [`load`] already checked [`REQUIRED`] are present.
pub fn require<T: Copy>(entry: &Result<T, libloading::Error>, name: &'static str) -> Result<T, LoadError> {
    entry.as_ref().copied().map_err(|_| LoadError::TooOld {
        path: "the loaded library".into(),
        missing: name.into(),
    })
}

/// The directories [`load`] tries, in order (the dynamic linker comes after them when no
/// explicit directory was given).
pub fn candidate_dirs(explicit: Option<&Path>) -> Vec<PathBuf> {
    if let Some(d) = explicit_dir(explicit) {
        return vec![d];
    }
    let mut dirs: Vec<PathBuf> = INSTALL_PREFIXES
        .iter()
        .flat_map(|p| INSTALL_LIBDIRS.iter().map(move |l| Path::new(p).join(l)))
        .collect();
    for site in python_site_dirs() {
        dirs.extend(wheel_lib_dirs(&site));
    }
    dirs.dedup();
    dirs
}

fn explicit_dir(explicit: Option<&Path>) -> Option<PathBuf> {
    explicit.map(Path::to_path_buf).or_else(|| {
        std::env::var_os(ENV_NIXL_LIB)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    })
}

/// Where a NIXL wheel may be unpacked or installed: ic-bench's `.deps/nixl/site` (next to the
/// checkout the binary was built in, and in the current directory), then every Python
/// environment's site-packages ([`icb_dylib::python_site_dirs`]).
fn python_site_dirs() -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> = Vec::new();
    if let Ok(exe) = std::env::current_exe() {
        // target/<profile>/ic-bench (or target/<profile>/deps/<test>) → the checkout's .deps.
        for up in exe.ancestors().skip(1).take(4) {
            roots.push(up.join(".deps/nixl/site"));
        }
    }
    roots.push(PathBuf::from(".deps/nixl/site"));
    roots.extend(icb_dylib::python_site_dirs(|v| std::env::var_os(v)));
    roots
}

/// The wheel's library directories under one site root (`.nixl_cu12.mesonpy.libs` and kin).
fn wheel_lib_dirs(site: &Path) -> Vec<PathBuf> {
    let mut names: Vec<String> = list_dir(site)
        .into_iter()
        .filter(|n| n.starts_with(".nixl") && n.ends_with(".libs"))
        .collect();
    names.sort();
    names.into_iter().map(|n| site.join(n)).collect()
}

fn list_dir(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .map(|it| it.filter_map(|e| e.ok()?.file_name().into_string().ok()).collect())
        .unwrap_or_default()
}

/// Loads NIXL from `explicit` (or `IC_BENCH_NIXL_LIB`), else from the install locations and
/// wheels, else through the dynamic linker; refuses a library that is not NIXL, a NIXL whose C
/// API lacks a function ic-bench calls, and a process that already holds another UCX.
pub fn load(explicit: Option<&Path>) -> Result<Loaded, LoadError> {
    let explicit = explicit_dir(explicit);
    let dirs = candidate_dirs(explicit.as_deref());
    let found = dirs.iter().find(|d| d.join(LIBRARY_NAME).exists()).cloned();
    let path = match (found, &explicit) {
        (Some(dir), _) => dir.join(LIBRARY_NAME),
        (None, Some(d)) => {
            return Err(LoadError::NotFound {
                searched: format!("{} (from --nixl-lib / IC_BENCH_NIXL_LIB)", d.display()),
            });
        }
        (None, None) => match linker_path() {
            Some(p) => p,
            None => {
                let mut searched: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
                searched.push("Python site-packages".into());
                searched.push("the dynamic linker's search path".into());
                return Err(LoadError::NotFound {
                    searched: searched.join(", "),
                });
            }
        },
    };
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    check_no_foreign_ucx(&dir)?;
    let lib = open_global(&path)?;
    // SAFETY: `from_library` resolves every symbol of the table with dlsym and stores each as a
    // `Result`; missing symbols are recorded, not called.
    let capi = unsafe { NixlCapi::from_library(libloading::Library::from(lib)) }.map_err(|e| LoadError::Open {
        path: path.display().to_string(),
        reason: one_line(&e.to_string()),
    })?;
    let shown = path.display().to_string();
    if capi.nixl_capi_create_agent.is_err() {
        return Err(LoadError::NotNixl { path: shown });
    }
    let missing: Vec<&str> = crate::required::missing(&capi);
    if !missing.is_empty() {
        return Err(LoadError::TooOld {
            path: shown,
            missing: missing.join(", "),
        });
    }
    let version = release_of(&dir);
    Ok(Loaded {
        capi,
        path,
        dir,
        version,
    })
}

/// The library the dynamic linker would pick for `libnixl_capi.so`, if any (opened and kept: the
/// check costs the load, and [`load`] opens it again from the same path).
fn linker_path() -> Option<PathBuf> {
    // SAFETY: loading NIXL runs its ELF constructors, which have no Rust-side preconditions.
    let lib = unsafe { UnixLibrary::open(Some(LIBRARY_NAME), OPEN_FLAGS) }.ok()?;
    // SAFETY: only the address of the symbol is used, to ask the linker which file holds it.
    let sym = unsafe { lib.get::<*const c_void>(IDENTITY_SYMBOL.as_bytes()) }.ok()?;
    library_file_of(*sym)
}

fn open_global(path: &Path) -> Result<UnixLibrary, LoadError> {
    // SAFETY: opening NIXL's C library runs its (and libnixl's) ELF constructors, the documented
    // way to use it, with no Rust-side preconditions. RTLD_GLOBAL so that the plugins NIXL loads
    // later resolve libnixl symbols from this copy.
    unsafe { UnixLibrary::open(Some(path), OPEN_FLAGS) }.map_err(|e| LoadError::Open {
        path: path.display().to_string(),
        reason: one_line(&e.to_string()),
    })
}

/// NIXL's release: the wheel's `<site>/nixl_cu1X-<ver>.dist-info` next to the library directory,
/// else `Version:` of `<dir>/pkgconfig/nixl.pc`.
fn release_of(dir: &Path) -> Option<String> {
    if let Some(site) = dir.parent() {
        for name in list_dir(site) {
            if let Some(rest) = name.strip_suffix(".dist-info")
                && let Some((pkg, ver)) = rest.split_once('-')
                && pkg.starts_with("nixl_cu")
            {
                return Some(ver.to_string());
            }
        }
    }
    let pc = std::fs::read_to_string(dir.join("pkgconfig/nixl.pc")).ok()?;
    pc.lines()
        .find_map(|l| l.strip_prefix("Version:"))
        .map(|v| v.trim().to_string())
}

/// Every shared object loaded in this process, as the dynamic linker recorded its path.
pub fn loaded_objects() -> Vec<PathBuf> {
    unsafe extern "C" fn collect(info: *mut libc::dl_phdr_info, _size: libc::size_t, data: *mut c_void) -> c_int {
        // SAFETY: dl_iterate_phdr passes a valid `info` for the duration of the callback, and
        // `data` is the `Vec` handed to it below, borrowed mutably for the whole iteration.
        let (info, out) = unsafe { (&*info, &mut *(data as *mut Vec<PathBuf>)) };
        if !info.dlpi_name.is_null() {
            // SAFETY: dlpi_name is a NUL-terminated string owned by the linker, copied out here.
            let name = unsafe { CStr::from_ptr(info.dlpi_name) }.to_string_lossy();
            if !name.is_empty() {
                out.push(PathBuf::from(name.into_owned()));
            }
        }
        0
    }
    let mut out: Vec<PathBuf> = Vec::new();
    // SAFETY: the callback only reads what the linker passes and writes into `out`, which
    // outlives the call; dl_iterate_phdr holds the linker's lock meanwhile.
    unsafe { libc::dl_iterate_phdr(Some(collect), &mut out as *mut Vec<PathBuf> as *mut c_void) };
    out
}

/// The UCX `libucp` copies loaded in this process (the wheel's renamed `libucp-<hash>.so*` too).
pub fn loaded_ucx() -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = loaded_objects()
        .into_iter()
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("libucp.so") || n.starts_with("libucp-"))
        })
        .map(|p| std::fs::canonicalize(&p).unwrap_or(p))
        .collect();
    v.sort();
    v.dedup();
    v
}

/// Refuses to load NIXL into a process that already holds a UCX other than the one NIXL will use:
/// the wheel's bundled copy (`<dir>/../nixl_cu1X.libs/libucp-*`), or for a source install any
/// `libucp` in the NIXL library directory's neighbourhood. A `libucp` loaded by an earlier NIXL
/// from the same place is fine (it is the same copy).
fn check_no_foreign_ucx(nixl_dir: &Path) -> Result<(), LoadError> {
    let loaded = loaded_ucx();
    let site = nixl_dir.parent().map(Path::to_path_buf).unwrap_or_default();
    let site = std::fs::canonicalize(&site).unwrap_or(site);
    let foreign: Vec<String> = loaded
        .iter()
        .filter(|p| !p.starts_with(&site))
        .map(|p| p.display().to_string())
        .collect();
    if foreign.is_empty() {
        Ok(())
    } else {
        Err(LoadError::ForeignUcx {
            loaded: foreign.join(", "),
        })
    }
}

/// `ucp_get_version_string()` of an already loaded `libucp` (opened with RTLD_NOLOAD: this never
/// loads a second copy), e.g. "1.23.0".
pub fn ucx_version_of(libucp: &Path) -> Option<String> {
    let c = CString::new(libucp.as_os_str().as_encoded_bytes()).ok()?;
    // SAFETY: RTLD_NOLOAD only returns a handle if the object is already loaded; no constructor
    // runs. The handle is released below.
    let handle = unsafe { libc::dlopen(c.as_ptr(), libc::RTLD_LAZY | libc::RTLD_NOLOAD) };
    if handle.is_null() {
        return None;
    }
    // SAFETY: `handle` is valid; the symbol name is NUL-terminated.
    let sym = unsafe { libc::dlsym(handle, c"ucp_get_version_string".as_ptr()) };
    let version = if sym.is_null() {
        None
    } else {
        // SAFETY: in every UCX release, ucp_get_version_string is `const char *(void)` returning a
        // static NUL-terminated string.
        let f: unsafe extern "C" fn() -> *const c_char = unsafe { std::mem::transmute(sym) };
        // SAFETY: see above; the string is static.
        let p = unsafe { f() };
        // SAFETY: non-NULL static NUL-terminated string (checked for NULL first).
        (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
    };
    // SAFETY: balances the dlopen above; the object stays loaded (it was loaded before).
    unsafe { libc::dlclose(handle) };
    version
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn explicit_empty_dir_is_a_one_line_not_found() {
        let dir = tempfile::tempdir().unwrap();
        let err = load(Some(dir.path())).unwrap_err();
        let msg = err.to_string();
        assert!(matches!(err, LoadError::NotFound { .. }), "{msg}");
        assert!(msg.contains(&dir.path().display().to_string()), "{msg}");
        assert!(msg.contains("--nixl-lib") && msg.contains("IC_BENCH_NIXL_LIB"), "{msg}");
        assert!(!msg.contains('\n'));
    }

    #[test]
    fn a_file_that_is_not_a_library_is_an_open_error() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(LIBRARY_NAME), b"not an ELF file").unwrap();
        let err = load(Some(dir.path())).unwrap_err();
        assert!(matches!(err, LoadError::Open { .. }), "{err}");
        assert!(!err.to_string().contains('\n'));
    }

    #[test]
    fn wheel_dirs_and_release_are_found_in_a_site_root() {
        let site = tempfile::tempdir().unwrap();
        let libs = site.path().join(".nixl_cu12.mesonpy.libs");
        std::fs::create_dir(&libs).unwrap();
        std::fs::create_dir(site.path().join("nixl_cu12-1.5.1.dist-info")).unwrap();
        std::fs::create_dir(site.path().join("numpy")).unwrap();
        assert_eq!(wheel_lib_dirs(site.path()), vec![libs.clone()]);
        assert_eq!(release_of(&libs).as_deref(), Some("1.5.1"));
    }

    #[test]
    fn an_explicit_dir_is_the_only_candidate() {
        assert_eq!(candidate_dirs(Some(Path::new("/x"))), vec![PathBuf::from("/x")]);
    }

    #[test]
    fn the_process_lists_its_own_libc() {
        let objs = loaded_objects();
        assert!(
            objs.iter().any(|p| p
                .file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("libc.so"))),
            "{objs:?}"
        );
    }
}
