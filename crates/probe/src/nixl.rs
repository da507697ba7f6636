//! `probe nixl`: is NIXL installed where the worker will look (libraries, the UCX plugin, the
//! LIBFABRIC plugin on EFA, the Python package, nixlbench)? Locally, the front end also says
//! whether `--engine nixl` can load the NIXL it finds ([`probe_nixl_with_engine`]; the loading
//! itself lives in the NIXL engine, so this crate needs no NIXL). Ends with the `ic-bench pair`
//! command that actually proves the path.

use crate::envspec::TransportEnv;
use crate::facts::IB_CLASS;
use crate::node_checks::{CheckExt, check, list};
use crate::source::NodeSource;
use crate::tools::{Tool, ToolRun};
use icb_core::Status;
use icb_core::checks::{Check, ProbeReport};
use std::time::Duration;

/// Install prefixes of NIXL in NGC/Dynamo images and source builds.
pub const NIXL_PREFIXES: [&str; 2] = ["/opt/nvidia/nvda_nixl", "/usr/local/nixl"];
/// Library directories under a prefix.
pub const NIXL_LIBDIRS: [&str; 4] = ["lib64", "lib/x86_64-linux-gnu", "lib/aarch64-linux-gnu", "lib"];

#[derive(Debug, Clone, Default)]
pub struct NixlOptions {
    pub env: TransportEnv,
    pub tool_timeout: Duration,
    /// Where the probe ran, to print a `pair` command naming it (`pod/NAME`).
    pub pair_hint_target: Option<String>,
    /// Directories named on the command line (`--nixl-lib DIR`, absolute), searched first.
    pub lib_dirs: Vec<String>,
}

/// Where libnixl is looked for: the directories named on the command line, the library directory
/// above `$NIXL_PLUGIN_DIR` (`…/lib64/plugins` → `…/lib64`), the install prefixes, then the
/// wheels' `.nixl*.libs` in site-packages.
fn lib_dirs(src: &dyn NodeSource, site: &[String], opts: &NixlOptions) -> Vec<String> {
    let mut dirs: Vec<String> = opts.lib_dirs.clone();
    if let Some(parent) = opts
        .env
        .get("NIXL_PLUGIN_DIR")
        .map(|d| d.trim_end_matches('/'))
        .and_then(|d| d.rsplit_once('/'))
        .map(|(parent, _)| parent)
        .filter(|p| !p.is_empty())
    {
        dirs.push(parent.to_string());
    }
    dirs.extend(
        NIXL_PREFIXES
            .iter()
            .flat_map(|p| NIXL_LIBDIRS.iter().map(move |l| format!("{p}/{l}"))),
    );
    for s in site {
        for name in src.list(s).unwrap_or_default() {
            if name.starts_with(".nixl") && name.ends_with(".libs") {
                dirs.push(format!("{s}/{name}"));
            }
        }
    }
    dirs
}

fn plugin_dirs(lib_dirs: &[String], env: &TransportEnv) -> Vec<String> {
    let mut dirs: Vec<String> = env.get("NIXL_PLUGIN_DIR").map(|d| d.to_string()).into_iter().collect();
    dirs.extend(lib_dirs.iter().map(|d| format!("{d}/plugins")));
    dirs
}

/// Finds `name` (or `name` with a version/hash suffix) in the first directory that has it.
fn find_file(src: &dyn NodeSource, dirs: &[String], pred: impl Fn(&str) -> bool) -> Option<String> {
    dirs.iter()
        .find_map(|d| src.list(d)?.into_iter().find(|n| pred(n)).map(|n| format!("{d}/{n}")))
}

pub fn probe_nixl(src: &dyn NodeSource, opts: &NixlOptions) -> ProbeReport {
    probe_nixl_with_engine(src, opts, None::<Result<String, std::convert::Infallible>>)
}

/// The `nixl.engine` check from the NIXL engine's own load attempt (`Ok`: what was loaded;
/// `Err`: the engine's one-line reason, which names what to do).
pub fn engine_check(load: Result<String, impl std::fmt::Display>) -> Check {
    match load {
        Ok(what) => check("nixl.engine", Status::Ok, format!("--engine nixl can load {what}")),
        Err(why) => check(
            "nixl.engine",
            Status::Fail,
            format!("--engine nixl cannot load NIXL: {why}"),
        )
        .hint("install NIXL (scripts/setup, or the NIXL wheel) or point --nixl-lib at libnixl_capi.so's directory"),
    }
}

/// [`probe_nixl`] plus, when the probe runs where ic-bench runs, the result of the NIXL engine's
/// load check (`icb_nixl_engine::probe_load`), reported as `nixl.engine`.
pub fn probe_nixl_with_engine(
    src: &dyn NodeSource,
    opts: &NixlOptions,
    engine_load: Option<Result<String, impl std::fmt::Display>>,
) -> ProbeReport {
    let runs = src.tools(&[Tool::PythonPath], opts.tool_timeout);
    let py = runs.into_iter().next().map(|(_, r)| r).unwrap_or(ToolRun::NotRecorded);
    let site: Vec<String> = py
        .text()
        .map(|t| {
            t.lines()
                .map(str::trim)
                .filter(|l| l.starts_with('/'))
                .map(str::to_string)
                .collect()
        })
        .unwrap_or_default();
    let libs = lib_dirs(src, &site, opts);
    let plugins = plugin_dirs(&libs, &opts.env);
    let efa = src
        .list(IB_CLASS)
        .unwrap_or_default()
        .iter()
        .any(|d| icb_core::fabric::net_devices::is_efa_device(d));
    let mut checks = Vec::new();

    checks.push(
        match find_file(src, &libs, |n| n == "libnixl.so" || n.starts_with("libnixl.so.")) {
            Some(p) => match loadable(src, &p) {
                LoadableAs::Refused(why) => check("nixl.libs", Status::Fail, format!("{p} {why}"))
                    .hint("reinstall NIXL (the library is damaged or a placeholder)"),
                _ => check("nixl.libs", Status::Ok, format!("libnixl found: {p}")),
            },
            None => check(
                "nixl.libs",
                Status::Warn,
                format!("libnixl.so not found under {}", list(&libs, 3)),
            )
            .hint("NIXL may live elsewhere in this image; set NIXL_PLUGIN_DIR or use a NIXL-enabled image"),
        },
    );

    checks.push(plugin_check(src, &plugins, &opts.env, efa));

    checks.push(match &py {
        ToolRun::NotFound => check("nixl.python", Status::Skipped, "python3 not installed"),
        ToolRun::Ran { .. } if !site.is_empty() => {
            let packages: Vec<String> = site
                .iter()
                .flat_map(|s| {
                    src.list(s)
                        .unwrap_or_default()
                        .into_iter()
                        .filter(|n| n == "nixl" || n.starts_with("nixl_cu"))
                        .map(move |n| format!("{s}/{n}"))
                })
                .collect();
            // The package's work is done by its compiled bindings; a directory of .py files
            // alone (a stub, a half-removed install) fails at import.
            let with_bindings = packages.iter().find(|p| {
                src.list(p)
                    .unwrap_or_default()
                    .iter()
                    .any(|n| n.starts_with("_bindings") && n.ends_with(".so"))
            });
            match (with_bindings, packages.first()) {
                (Some(p), _) => check("nixl.python", Status::Ok, format!("Python nixl package: {p}")),
                (None, Some(stub)) => check(
                    "nixl.python",
                    Status::Fail,
                    format!("{stub} has no compiled bindings (_bindings*.so): importing nixl would fail"),
                )
                .hint("reinstall the nixl wheel matching the CUDA major (pip install nixl[cu12])"),
                (None, None) => check(
                    "nixl.python",
                    Status::Warn,
                    format!("no nixl package on python3's sys.path ({})", list(&site, 3)),
                )
                .hint("vLLM's NixlConnector imports nixl: install the nixl wheel matching the CUDA major"),
            }
        }
        other => check(
            "nixl.python",
            Status::Skipped,
            format!("python3 sys.path unknown: {}", other.why_not(Tool::PythonPath)),
        ),
    });

    checks.push(match src.which("nixlbench") {
        Some(p) => check("nixl.tools", Status::Ok, format!("nixlbench: {p}")),
        None => check(
            "nixl.tools",
            Status::Warn,
            "nixlbench not found (inconclusive: the image may not ship it)",
        )
        .hint("ic-bench pair measures the same UCX path without nixlbench"),
    });

    let engine_loads = matches!(engine_load, Some(Ok(_)));
    if let Some(load) = engine_load {
        checks.push(engine_check(load));
    }
    let mut next = next_steps(opts);
    if engine_loads {
        next.push("ic-bench pair --local --engine nixl   # NIXL itself moves READ/WRITE descriptor lists".into());
    }
    ProbeReport::new("nixl", &src.target(), checks, next)
}

fn plugin_check(src: &dyn NodeSource, plugins: &[String], env: &TransportEnv, efa: bool) -> Check {
    let id = "nixl.plugins";
    if let Some(dir) = env.get("NIXL_PLUGIN_DIR") {
        // An explicit directory is the only one NIXL searches: it must hold the UCX plugin.
        return match src.list(dir) {
            None => check(id, Status::Fail, format!("NIXL_PLUGIN_DIR={dir} does not exist"))
                .hint("point NIXL_PLUGIN_DIR at the directory holding libplugin_UCX.so, or unset it"),
            Some(names) if !names.iter().any(|n| n == "libplugin_UCX.so") => check(
                id,
                Status::Fail,
                format!("NIXL_PLUGIN_DIR={dir} has no libplugin_UCX.so"),
            )
            .hint("point NIXL_PLUGIN_DIR at the directory holding libplugin_UCX.so, or unset it"),
            Some(names) if efa && !names.iter().any(|n| n == "libplugin_LIBFABRIC.so") => check(
                id,
                Status::Warn,
                format!("EFA node but NIXL_PLUGIN_DIR={dir} has no libplugin_LIBFABRIC.so"),
            )
            .hint("on EFA, NIXL's LIBFABRIC backend is the supported path"),
            Some(_) => plugin_file_check(
                src,
                id,
                &format!("{}/libplugin_UCX.so", dir.trim_end_matches('/')),
                format!("libplugin_UCX.so in NIXL_PLUGIN_DIR={dir}"),
            ),
        };
    }
    let ucx = find_file(src, plugins, |n| n == "libplugin_UCX.so");
    let fabric = find_file(src, plugins, |n| n == "libplugin_LIBFABRIC.so");
    match (ucx, efa, fabric) {
        (None, _, _) => check(
            id,
            Status::Warn,
            format!("libplugin_UCX.so not found under {}", list(plugins, 3)),
        )
        .hint("set NIXL_PLUGIN_DIR to the plugin directory of the NIXL install"),
        (Some(_), true, None) => check(id, Status::Warn, "EFA node but no libplugin_LIBFABRIC.so")
            .hint("on EFA, NIXL's LIBFABRIC backend is the supported path"),
        (Some(u), _, f) => {
            if let Some(f) = &f
                && let LoadableAs::Refused(why) = loadable(src, f)
            {
                return check(id, Status::Fail, format!("{f} {why}: NIXL cannot load it"))
                    .hint("reinstall NIXL (the plugin file is damaged or a placeholder)");
            }
            let extra = f.map(|f| format!(", {f}")).unwrap_or_default();
            plugin_file_check(src, id, &u, format!("{u}{extra}"))
        }
    }
}

/// What a library file's header says about whether the dynamic loader could load it.
#[derive(Debug, PartialEq, Eq)]
enum LoadableAs {
    /// An ELF shared object (`ET_DYN`).
    SharedObject,
    /// Present but its content could not be read from here (a pod's listing has names only).
    Unread,
    /// Why the loader would refuse it: empty, not ELF, not a shared object.
    Refused(String),
}

fn loadable(src: &dyn NodeSource, path: &str) -> LoadableAs {
    let Some(text) = src.read(path) else {
        return LoadableAs::Unread;
    };
    // The ELF identification and e_type are ASCII-range bytes, so they survive the lossy text.
    let b = text.as_bytes();
    if b.is_empty() {
        return LoadableAs::Refused("is empty (0 bytes)".into());
    }
    if b.len() < 18 || &b[..4] != b"\x7fELF" {
        return LoadableAs::Refused("is not an ELF file".into());
    }
    let e_type = if b[5] == 2 {
        u16::from_be_bytes([b[16], b[17]])
    } else {
        u16::from_le_bytes([b[16], b[17]])
    };
    if e_type == 3 {
        LoadableAs::SharedObject
    } else {
        LoadableAs::Refused(format!("is an ELF file of type {e_type}, not a shared object"))
    }
}

/// The plugin check's verdict for a found plugin file: ok only when it could be loaded.
fn plugin_file_check(src: &dyn NodeSource, id: &str, path: &str, ok_detail: String) -> Check {
    match loadable(src, path) {
        LoadableAs::SharedObject => check(id, Status::Ok, ok_detail),
        LoadableAs::Unread => check(
            id,
            Status::Ok,
            format!("{ok_detail} (found; contents not read from here)"),
        ),
        LoadableAs::Refused(why) => check(id, Status::Fail, format!("{path} {why}: NIXL cannot load it"))
            .hint("reinstall NIXL (the plugin file is damaged or a placeholder)"),
    }
}

fn next_steps(opts: &NixlOptions) -> Vec<String> {
    let me = opts
        .pair_hint_target
        .clone()
        .unwrap_or_else(|| "pod/PREFILL_POD".into());
    vec![
        format!("ic-bench pair --prefill {me} --decode pod/DECODE_POD"),
        "ic-bench pair --local   # same UCX path between two local processes".into(),
    ]
}
