//! Which environment variables matter to the fabric, and why a caller reads them.
//!
//! Four meanings, each with one function, because callers really ask different questions:
//!
//! * [`is_transport_setting`]: the variable changes which transport carries the data or how
//!   (UCX, NCCL, NIXL, libfabric, NVSHMEM, Gloo, Dynamo's KVBM NIXL backend), logging knobs
//!   excluded. Two roles that differ here move data differently (the recipe's symmetry rule),
//!   and a role that sets one means to move data (the recipe's role inference).
//! * [`is_transport_env`]: any variable of those libraries, logging included: what a person
//!   reading a report wants to see next to the transport settings.
//! * [`is_pod_transport_env`]: the above plus which GPUs the process sees. This is what a bench
//!   pod copies from a reference pod, what `probe env` lists for a recipe role, and what the node
//!   probe collects: one set, so `probe env` and `pair` cannot judge the same pod differently.
//!   Seed 002's 365 MB/s came from GPU visibility alone, so it belongs here.
//! * [`is_run_context_env`]: what a run records about its own process: the pod set plus
//!   ic-bench's own `IC_BENCH_*` settings and the library search path (which UCX got loaded).
//! * [`is_baseline_env`]: the part of that record that makes two runs comparable (the history
//!   key's "transport env"): what changes how the data moves or how it is measured, never a
//!   value that names one run or one place (addresses, ports, tokens, paths).
//!
//! Nothing here reads an environment; nothing here masks secrets (that is another module's job).

/// Prefixes of the transport libraries' variables.
pub const TRANSPORT_ENV_PREFIXES: &[&str] = &["UCX_", "NCCL_", "NIXL_", "FI_", "NVSHMEM_", "GLOO_", "DYN_KVBM_NIXL_"];

/// Prefixes of those libraries' logging knobs: they change what is printed, never the path.
pub const TRANSPORT_LOGGING_PREFIXES: &[&str] = &["UCX_LOG", "UCX_PROTO_INFO", "NCCL_DEBUG", "FI_LOG", "NIXL_LOG"];

/// Exact names that decide which GPUs a process sees (CUDA, the NVIDIA container runtime, ROCm).
pub const GPU_VISIBILITY_ENV: &[&str] = &[
    "CUDA_VISIBLE_DEVICES",
    "CUDA_DEVICE_ORDER",
    "NVIDIA_VISIBLE_DEVICES",
    "NVIDIA_DRIVER_CAPABILITIES",
    "NVIDIA_MIG_CONFIG_DEVICES",
    "HIP_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "GPU_DEVICE_ORDINAL",
];

/// ic-bench's own settings.
pub const IC_BENCH_ENV_PREFIX: &str = "IC_BENCH_";

/// ic-bench's own variables that change what a case measures (`scripts/bench-ucx`'s methodology
/// controls, read by the engine): in the history key. Every other `IC_BENCH_*` is per run or per
/// machine (`IC_BENCH_SERVER`, the peer's address and port; `IC_BENCH_TOKEN`; the `*_LIB` and
/// `IC_BENCH_RAIL_TREE` paths; `IC_BENCH_LOG`; `IC_BENCH_HISTORY`).
pub const IC_BENCH_MEASUREMENT_ENV: &[&str] =
    &["IC_BENCH_WINDOWS", "IC_BENCH_UNTOUCHED_BUFFERS", "IC_BENCH_FIXED_STOP"];

/// Name endings of transport variables that say where something is (a rendezvous address, a
/// port, a directory or file), never how the data moves: `NIXL_ETCD_ENDPOINTS`,
/// `NIXL_PLUGIN_DIR`, `NCCL_COMM_ID`. Which library a path loaded is keyed by its version.
pub const PLACE_ENV_SUFFIXES: &[&str] = &[
    "_ENDPOINTS",
    "_ADDR",
    "_ADDRESS",
    "_PORT",
    "_PORT_RANGE",
    "_COMM_ID",
    "_NAMESPACE",
    "_DIR",
    "DIRS",
    "_PATH",
    "_PREFIXES",
    "_FILE",
];

/// The dynamic loader's search path: decides which libucx/libnixl a process loads.
pub const LIBRARY_PATH_ENV: &str = "LD_LIBRARY_PATH";

/// What one environment variable is, for the fabric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EnvClass {
    /// Changes the transport or how it is used (`UCX_TLS`, `NCCL_IB_HCA`, `FI_PROVIDER`, …).
    TransportSetting,
    /// A transport library's logging knob (`UCX_LOG_LEVEL`, `NCCL_DEBUG`, …).
    TransportLogging,
    /// Decides which GPUs the process sees (`CUDA_VISIBLE_DEVICES`, …).
    GpuVisibility,
    /// ic-bench's own (`IC_BENCH_*`).
    IcBench,
    /// `LD_LIBRARY_PATH`.
    LibraryPath,
    /// Anything else: never read, never copied, never printed.
    Other,
}

/// Classifies a variable by its exact (case-sensitive, as the libraries read them) name.
pub fn env_class(name: &str) -> EnvClass {
    let starts = |prefixes: &[&str]| prefixes.iter().any(|p| name.starts_with(p));
    if starts(TRANSPORT_LOGGING_PREFIXES) {
        EnvClass::TransportLogging
    } else if starts(TRANSPORT_ENV_PREFIXES) {
        EnvClass::TransportSetting
    } else if GPU_VISIBILITY_ENV.contains(&name) {
        EnvClass::GpuVisibility
    } else if name.starts_with(IC_BENCH_ENV_PREFIX) {
        EnvClass::IcBench
    } else if name == LIBRARY_PATH_ENV {
        EnvClass::LibraryPath
    } else {
        EnvClass::Other
    }
}

/// Changes which transport carries the data, or how (logging knobs excluded).
pub fn is_transport_setting(name: &str) -> bool {
    env_class(name) == EnvClass::TransportSetting
}

/// Any variable of a transport library, logging knobs included.
pub fn is_transport_env(name: &str) -> bool {
    matches!(env_class(name), EnvClass::TransportSetting | EnvClass::TransportLogging)
}

/// What a bench pod copies, `probe env` lists and the node probe collects: the transport
/// libraries' variables and GPU visibility.
pub fn is_pod_transport_env(name: &str) -> bool {
    is_transport_env(name) || env_class(name) == EnvClass::GpuVisibility
}

/// What a run records about its own process: [`is_pod_transport_env`], `IC_BENCH_*` and
/// `LD_LIBRARY_PATH`.
pub fn is_run_context_env(name: &str) -> bool {
    env_class(name) != EnvClass::Other
}

/// Whether a variable is part of the history key's "transport env" (the one rule; `docs/history.md`):
///
/// * in: the transport libraries' settings ([`is_transport_setting`]) and GPU visibility, which
///   change how the data moves, and [`IC_BENCH_MEASUREMENT_ENV`], which changes what is measured;
/// * out: anything that differs from run to run or machine to machine without changing the
///   transport: secrets (`NIXL_API_KEY`, `IC_BENCH_TOKEN`), addresses, ports, namespaces and paths
///   ([`PLACE_ENV_SUFFIXES`], `LD_LIBRARY_PATH`, `IC_BENCH_*_LIB`), ic-bench's other variables
///   (`IC_BENCH_SERVER`: the peer's address and random port), logging knobs, everything else.
///
/// The rest of the key says what the environment cannot: UCX and NIXL versions (which libraries
/// the paths loaded), memory, engine and placement (the case key).
pub fn is_baseline_env(name: &str) -> bool {
    let place = PLACE_ENV_SUFFIXES.iter().any(|s| name.ends_with(s));
    match env_class(name) {
        EnvClass::TransportSetting => !place && !crate::secrets::is_secret_name(name),
        EnvClass::GpuVisibility => true,
        EnvClass::IcBench => IC_BENCH_MEASUREMENT_ENV.contains(&name),
        EnvClass::TransportLogging | EnvClass::LibraryPath | EnvClass::Other => false,
    }
}

/// A POSIX shell `case` pattern matching `NAME=value` lines of [`is_pod_transport_env`]
/// variables, for scripts that read a pod's environment (`env | while read l; case "$l" in …`).
/// It must never be wider than the predicate: the script prints only what matches.
pub fn pod_transport_env_shell_pattern() -> String {
    TRANSPORT_ENV_PREFIXES
        .iter()
        .map(|p| format!("{p}*"))
        .chain(GPU_VISIBILITY_ENV.iter().map(|n| format!("{n}=*")))
        .collect::<Vec<_>>()
        .join("|")
}
