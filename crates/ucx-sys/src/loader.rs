//! Finds, opens and version-checks the UCX library at run time.
//!
//! Search order: the caller's explicit directory (`--ucx-lib DIR`, else `IC_BENCH_UCX_LIB`) —
//! exclusively, so a mistyped directory is an error rather than a silent switch to another UCX —,
//! else the well-known install locations (HPC-X, `/usr/local/ucx`, NIXL's install, then the UCX
//! that NIXL's Python wheel bundles in a site-packages directory), else the dynamic linker's own
//! search for `libucp.so.0`. That order finds the UCX a worker image really uses when ic-bench is
//! copied into it (`pair --in-place`).

use crate::bindings::{Ucp, ucs_status_t};
use crate::version::{Version, check_runtime_version};
pub use icb_dylib::c_str_or_empty;
use icb_dylib::{library_file_of, one_line};
use libloading::os::unix::{Library as UnixLibrary, RTLD_GLOBAL, RTLD_LAZY};
use std::ffi::{OsString, c_void};
use std::path::{Path, PathBuf};

/// glibc's and musl's `RTLD_NODELETE`: UCX installs memory hooks (libucm) and global state that
/// must outlive any handle, so once loaded it is never unloaded, even when every `Ucx` is dropped.
const RTLD_NODELETE: std::os::raw::c_int = 0x1000;
const OPEN_FLAGS: std::os::raw::c_int = RTLD_LAZY | RTLD_GLOBAL | RTLD_NODELETE;

/// The environment variable naming the directory that holds `libucp.so.0`.
pub const ENV_UCX_LIB: &str = "IC_BENCH_UCX_LIB";

/// Locations where images and HPC installs put UCX, searched after the explicit directory.
///
/// NIXL's own directories come last: NIXL source builds (the `/opt/nvidia/nvda_nixl` layout in
/// Dynamo/NGC images) link the system UCX and ship none, but a bundled copy, when present, is
/// the one the NIXL plugin really uses. The PyPI NIXL wheel renames its bundled libraries
/// (`libucp-<hash>.so.0.0.0`, RPATH `$ORIGIN`); those stay usable, so [`find_in_dir`] accepts
/// that spelling too.
pub const WELL_KNOWN_DIRS: &[&str] = &[
    "/usr/local/ucx/lib",
    "/opt/hpcx/ucx/lib",
    "/opt/nvidia/nvda_nixl/lib64",
    "/opt/nvidia/nvda_nixl/lib/x86_64-linux-gnu",
    "/opt/nvidia/nvda_nixl/lib/aarch64-linux-gnu",
];

const SEARCH_NAME: &str = "libucp.so.0";

/// Where auditwheel puts the libraries a NIXL wheel bundles (UCX among them), per package name.
const NIXL_WHEEL_LIB_DIRS: &[&str] = &["nixl_cu12.libs", "nixl_cu13.libs", "nixl.libs"];

/// NIXL wheels' bundled-library directories that exist here.
fn nixl_wheel_dirs(env: impl Fn(&str) -> Option<OsString>) -> Vec<PathBuf> {
    icb_dylib::python_site_dirs(env)
        .iter()
        .flat_map(|sp| NIXL_WHEEL_LIB_DIRS.iter().map(move |d| sp.join(d)))
        .filter(|d| d.is_dir())
        .collect()
}

/// The well-known directories, then the NIXL wheel directories found in this environment.
fn search_dirs() -> Vec<PathBuf> {
    let mut dirs: Vec<PathBuf> = WELL_KNOWN_DIRS.iter().map(PathBuf::from).collect();
    dirs.extend(nixl_wheel_dirs(|v| std::env::var_os(v)));
    dirs
}

/// Why UCX could not be used. Each message is one line that says how to fix it.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    #[error(
        "UCX not found: no {SEARCH_NAME} in {searched}; point ic-bench at a UCX >= 1.14 with --ucx-lib DIR or IC_BENCH_UCX_LIB=DIR"
    )]
    NotFound { searched: String },
    #[error(
        "UCX in {dir} is incomplete: {missing} is missing next to libucp; point --ucx-lib / IC_BENCH_UCX_LIB at a full UCX install"
    )]
    Incomplete { dir: String, missing: String },
    #[error("cannot load UCX library {path}: {reason}; point --ucx-lib / IC_BENCH_UCX_LIB at a working UCX >= 1.14")]
    Open { path: String, reason: String },
    #[error("{0}")]
    TooOld(#[from] crate::version::UnsupportedVersion),
    #[error("the loaded UCX lacks `{name}`; point --ucx-lib / IC_BENCH_UCX_LIB at a UCX >= 1.14")]
    MissingSymbol { name: &'static str },
}

/// A loaded UCX: the function table plus the libraries it was preloaded with.
pub struct Loaded {
    /// The UCP function table (each entry a `Result`; see [`require`]).
    pub ucp: Ucp,
    /// The library version reported by `ucp_get_version()`.
    pub version: Version,
    /// `ucp_get_version_string()`, where the library has it.
    pub version_string: String,
    /// The file `libucp` was opened from.
    pub path: PathBuf,
    /// The directory holding `libucp` (and the libucm/libucs/libuct preloaded from it).
    pub dir: PathBuf,
    // Field order is drop order: the table (libucp) closes before its dependencies.
    _preloaded: Vec<UnixLibrary>,
}

impl std::fmt::Debug for Loaded {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Loaded")
            .field("version", &self.version)
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

/// Copies a function pointer out of the table, or says which symbol the loaded UCX lacks.
pub fn require<T: Copy>(entry: &Result<T, libloading::Error>, name: &'static str) -> Result<T, LoadError> {
    entry.as_ref().copied().map_err(|_| LoadError::MissingSymbol { name })
}

/// The directories [`load`] will try, in order (the dynamic linker's search is tried after them
/// when no explicit directory was given).
pub fn candidate_dirs(explicit: Option<&Path>) -> Vec<PathBuf> {
    match explicit_dir(explicit) {
        Some(d) => vec![d],
        None => search_dirs(),
    }
}

fn explicit_dir(explicit: Option<&Path>) -> Option<PathBuf> {
    explicit.map(Path::to_path_buf).or_else(|| {
        std::env::var_os(ENV_UCX_LIB)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    })
}

/// Loads UCX from `explicit` (or `IC_BENCH_UCX_LIB`), else from the well-known locations, else
/// through the dynamic linker, and refuses releases older than 1.14.
pub fn load(explicit: Option<&Path>) -> Result<Loaded, LoadError> {
    let explicit = explicit_dir(explicit);
    let dirs = match &explicit {
        Some(d) => vec![d.clone()],
        None => search_dirs(),
    };
    for dir in &dirs {
        if let Some(files) = find_in_dir(dir)? {
            return open_from_dir(dir, files);
        }
    }
    let mut searched: Vec<String> = dirs.iter().map(|d| d.display().to_string()).collect();
    if explicit.is_some() {
        searched[0].push_str(" (from --ucx-lib / IC_BENCH_UCX_LIB)");
        return Err(LoadError::NotFound {
            searched: searched.join(", "),
        });
    }
    searched.push("the dynamic linker's search path".into());
    open_through_linker()
        .map_err(|_| LoadError::NotFound {
            searched: searched.join(", "),
        })?
        .ok_or_else(|| LoadError::NotFound {
            searched: searched.join(", "),
        })
}

/// The four libraries of one UCX install, as file names in one directory.
#[derive(Debug)]
struct DirFiles {
    ucm: OsString,
    ucs: OsString,
    uct: OsString,
    ucp: OsString,
}

/// Finds the UCX libraries in `dir`: the usual `.so.0` names, or the auditwheel-renamed ones
/// (`libucp-<hash>.so.0.0.0`) of a Python wheel. `Ok(None)` when `dir` holds no libucp.
fn find_in_dir(dir: &Path) -> Result<Option<DirFiles>, LoadError> {
    if dir.join(SEARCH_NAME).exists() {
        let missing = ["libucm.so.0", "libucs.so.0", "libuct.so.0"]
            .into_iter()
            .find(|n| !dir.join(n).exists());
        if let Some(m) = missing {
            return Err(LoadError::Incomplete {
                dir: dir.display().to_string(),
                missing: m.into(),
            });
        }
        return Ok(Some(DirFiles {
            ucm: "libucm.so.0".into(),
            ucs: "libucs.so.0".into(),
            uct: "libuct.so.0".into(),
            ucp: SEARCH_NAME.into(),
        }));
    }
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(None);
    };
    let names: Vec<String> = entries.filter_map(|e| e.ok()?.file_name().into_string().ok()).collect();
    let renamed = |lib: &str| -> Option<OsString> {
        let prefix = format!("{lib}-");
        let mut found = names.iter().filter(|n| n.starts_with(&prefix) && n.contains(".so"));
        let first = found.next()?;
        // Two copies side by side: refuse to guess which one libucp's DT_NEEDED names.
        found.next().is_none().then(|| OsString::from(first))
    };
    let Some(ucp) = renamed("libucp") else { return Ok(None) };
    let get = |lib: &str| {
        renamed(lib).ok_or_else(|| LoadError::Incomplete {
            dir: dir.display().to_string(),
            missing: format!("{lib}-*.so*"),
        })
    };
    Ok(Some(DirFiles {
        ucm: get("libucm")?,
        ucs: get("libucs")?,
        uct: get("libuct")?,
        ucp,
    }))
}

fn open_global(path: &Path) -> Result<UnixLibrary, LoadError> {
    // SAFETY: opening a UCX library runs its ELF constructors (UCX's global init). That is the
    // documented way to use UCX and has no Rust-side preconditions; RTLD_GLOBAL lets UCX's
    // transport modules resolve libucs/libuct symbols from this very copy. RTLD_LAZY because
    // libucm calls into libucs (ucs_load_modules) without listing it as a dependency.
    unsafe { UnixLibrary::open(Some(path), OPEN_FLAGS) }.map_err(|e| LoadError::Open {
        path: path.display().to_string(),
        reason: one_line(&e.to_string()),
    })
}

fn open_from_dir(dir: &Path, files: DirFiles) -> Result<Loaded, LoadError> {
    // libucm → libucs → libuct first, from this directory, so libucp cannot pick up another
    // UCX's copies from the system search path (installs without RPATH do exactly that).
    let mut preloaded = Vec::with_capacity(3);
    for name in [&files.ucm, &files.ucs, &files.uct] {
        preloaded.push(open_global(&dir.join(name))?);
    }
    let path = dir.join(&files.ucp);
    let ucp_lib = open_global(&path)?;
    finish(ucp_lib, path, dir.to_path_buf(), preloaded)
}

/// `Ok(None)` when the linker finds no libucp.so.0.
fn open_through_linker() -> Result<Option<Loaded>, LoadError> {
    // SAFETY: as in `open_global`: loading UCX runs its constructors, which have no Rust-side
    // preconditions.
    let lib = match unsafe { UnixLibrary::open(Some(SEARCH_NAME), OPEN_FLAGS) } {
        Ok(l) => l,
        Err(_) => return Ok(None),
    };
    // SAFETY: `ucp_get_version` has this C signature in every UCX release; the symbol is only
    // used to ask the dynamic linker which file it came from.
    let sym = unsafe { lib.get::<unsafe extern "C" fn(*mut u32, *mut u32, *mut u32)>(b"ucp_get_version\0") };
    let path = match sym {
        Ok(s) => library_file_of(*s as *const c_void).unwrap_or_else(|| PathBuf::from(SEARCH_NAME)),
        Err(_) => PathBuf::from(SEARCH_NAME),
    };
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    finish(lib, path, dir, Vec::new()).map(Some)
}

fn finish(ucp_lib: UnixLibrary, path: PathBuf, dir: PathBuf, preloaded: Vec<UnixLibrary>) -> Result<Loaded, LoadError> {
    // SAFETY: `from_library` resolves every symbol of the table with dlsym and stores each as a
    // `Result`; missing symbols are recorded, not called.
    let ucp = unsafe { Ucp::from_library(libloading::Library::from(ucp_lib)) }.map_err(|e| LoadError::Open {
        path: path.display().to_string(),
        reason: one_line(&e.to_string()),
    })?;
    let get_version = require(&ucp.ucp_get_version, "ucp_get_version")?;
    let (mut major, mut minor, mut release) = (0u32, 0u32, 0u32);
    // SAFETY: ucp_get_version only writes three unsigned ints through valid pointers.
    unsafe { get_version(&mut major, &mut minor, &mut release) };
    let version = Version::new(major, minor, release);
    check_runtime_version(version, &path.display().to_string())?;
    let version_string = match ucp.ucp_get_version_string.as_ref() {
        // SAFETY: ucp_get_version_string returns a pointer to a static NUL-terminated string.
        Ok(f) => unsafe { c_str_or_empty(f()) },
        Err(_) => version.to_string(),
    };
    Ok(Loaded {
        ucp,
        version,
        version_string,
        path,
        dir,
        _preloaded: preloaded,
    })
}

/// The text of `ucs_status_string`, or the bare number when the library lacks it.
pub fn status_string(ucp: &Ucp, status: ucs_status_t) -> String {
    match ucp.ucs_status_string.as_ref() {
        // SAFETY: ucs_status_string accepts any status value and returns a static string.
        Ok(f) => unsafe { c_str_or_empty(f(status)) },
        Err(_) => format!("UCX status {status}"),
    }
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
        assert!(msg.contains("--ucx-lib") && msg.contains("IC_BENCH_UCX_LIB"), "{msg}");
        assert!(!msg.contains('\n'));
    }

    #[test]
    fn libucp_without_its_siblings_is_incomplete() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("libucp.so.0"), b"").unwrap();
        let err = load(Some(dir.path())).unwrap_err();
        assert!(
            matches!(&err, LoadError::Incomplete { missing, .. } if missing == "libucm.so.0"),
            "{err}"
        );
    }

    #[test]
    fn a_file_that_is_not_a_library_is_an_open_error() {
        let dir = tempfile::tempdir().unwrap();
        for n in ["libucm.so.0", "libucs.so.0", "libuct.so.0", "libucp.so.0"] {
            std::fs::write(dir.path().join(n), b"not an ELF file").unwrap();
        }
        let err = load(Some(dir.path())).unwrap_err();
        assert!(matches!(err, LoadError::Open { .. }), "{err}");
        assert!(!err.to_string().contains('\n'));
    }

    #[test]
    fn renamed_wheel_libraries_are_recognised() {
        let dir = tempfile::tempdir().unwrap();
        for n in [
            "libucm-f6.so.0.0.0",
            "libucs-14.so.0.0.0",
            "libuct-11.so.0.0.0",
            "libucp-b3.so.0.0.0",
        ] {
            std::fs::write(dir.path().join(n), b"").unwrap();
        }
        let files = find_in_dir(dir.path()).unwrap().unwrap();
        assert_eq!(files.ucp, "libucp-b3.so.0.0.0");
        assert_eq!(files.ucs, "libucs-14.so.0.0.0");
        std::fs::remove_file(dir.path().join("libuct-11.so.0.0.0")).unwrap();
        assert!(matches!(find_in_dir(dir.path()), Err(LoadError::Incomplete { .. })));
    }

    #[test]
    fn nixl_wheel_ucx_is_found_in_a_virtualenvs_site_packages() {
        let venv = tempfile::tempdir().unwrap();
        let libs = venv.path().join("lib/python3.12/site-packages/nixl_cu12.libs");
        std::fs::create_dir_all(&libs).unwrap();
        let env = |v: &str| (v == "VIRTUAL_ENV").then(|| venv.path().as_os_str().to_owned());
        let found = nixl_wheel_dirs(env);
        assert!(found.contains(&libs), "{found:?}");
        assert!(!nixl_wheel_dirs(|_| None).contains(&libs));
        let dirs = search_dirs();
        assert_eq!(dirs[0], PathBuf::from("/usr/local/ucx/lib"));
        assert!(dirs.contains(&PathBuf::from("/opt/hpcx/ucx/lib")));
    }

    #[test]
    fn candidate_dirs_put_an_explicit_dir_alone() {
        assert_eq!(candidate_dirs(Some(Path::new("/x"))), vec![PathBuf::from("/x")]);
    }

    /// Needs the UCX that `scripts/setup` installs (IC_BENCH_UCX_LIB comes from .cargo/config.toml).
    #[test]
    fn loads_the_configured_ucx_and_reads_its_version() {
        let Some(dir) = std::env::var_os(ENV_UCX_LIB) else {
            panic!("IC_BENCH_UCX_LIB is not set; run scripts/setup (it writes .cargo/config.toml)");
        };
        let loaded = load(Some(Path::new(&dir))).unwrap();
        assert!(loaded.version.at_least(1, 14), "{:?}", loaded.version);
        assert!(
            loaded
                .version_string
                .starts_with(&format!("{}.{}", loaded.version.major, loaded.version.minor))
        );
        assert_eq!(loaded.dir, PathBuf::from(&dir));
        require(&loaded.ucp.ucp_init_version, "ucp_init_version").unwrap();
        assert!(status_string(&loaded.ucp, crate::bindings::UCS_ERR_NO_MEMORY as ucs_status_t).contains("memory"));
    }
}
