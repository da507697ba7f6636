//! Flags shared by `pair`, `connect` and `serve`: what to measure, what to expect, how to report.

use clap::Args as ClapArgs;
pub use icb_core::flag_values::{
    SizeList, parse_duration, parse_gbps, parse_interval, parse_positive_secs, parse_unit,
};
pub use icb_core::units::parse_size as parse_size_arg;
use icb_core::{BandwidthUnit, EngineKind, MemoryPair, RunSettings, TestKind};
use std::path::PathBuf;

/// `--profile`: the cases when --tests/--sizes/--blocks do not say.
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    Verdict,
    Full,
}

/// What to measure.
#[derive(ClapArgs, Debug, Clone)]
pub struct TestArgs {
    /// Cases when --tests/--sizes/--blocks do not say: verdict (the cases a verdict needs: 4 MiB
    /// tag/put/get, 8 B latency, one 64 x 16 KiB KV-shaped put; a few seconds) or full (every test
    /// at 8 B ... 64 MiB)
    #[arg(long, value_name = "PROFILE", value_enum, default_value_t = Profile::Verdict)]
    pub profile: Profile,

    /// Tests to run, comma separated: tag_bw, tag_lat, put_bw, get_bw [default: --profile verdict
    /// runs tag_bw, put_bw and get_bw at 4 MiB, tag_lat at 8 B and one 64 x 16 KiB put; full runs all
    /// four at every size]
    #[arg(long, value_delimiter = ',')]
    pub tests: Option<Vec<TestKind>>,

    /// Message sizes: a list (8,4KiB,64MiB) or a power-of-two range (8..64MiB) [default: --profile
    /// verdict: 4 MiB (tag_lat 8 B); --profile full, or --tests without --sizes: 8 B ... 64 MiB]
    #[arg(long, value_parser = SizeList::parse)]
    pub sizes: Option<SizeList>,

    /// KV-shaped RMA cases: one operation is a list of N non-contiguous blocks of each size, issued as
    /// N put/get operations and one flush (what NIXL does with a descriptor list)
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(2..=4096))]
    pub blocks: Option<u32>,

    /// With --engine nixl: descriptors per READ/WRITE request, comma separated, each descriptor one
    /// block of a --sizes size [default: 1,64,1024]
    #[arg(long, value_name = "N,...", value_delimiter = ',', value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub batches: Option<Vec<u32>>,

    /// Memory pairs initiator-target, comma separated: host-host, host-cuda, cuda-host, cuda-cuda [default: all four]
    #[arg(long, value_delimiter = ',')]
    pub memory: Option<Vec<MemoryPair>>,

    /// Warmup iterations per case (not measured) [default: 16]
    #[arg(long)]
    pub warmup: Option<u64>,

    /// Minimum measured iterations per case [default: 1 (verdict), 32 (full)]
    #[arg(long)]
    pub min_iterations: Option<u64>,

    /// Minimum measured time per case, seconds [default: 0.05 (verdict), 0.1 (full)]
    #[arg(long, value_parser = parse_positive_secs)]
    pub min_time: Option<f64>,

    /// Maximum measured time per case, seconds; a case stops earlier once its estimate is within
    /// +/-2 % (95 % confidence) [default: 1 (verdict), 5 (full)]
    #[arg(long, value_parser = parse_positive_secs)]
    pub max_time: Option<f64>,

    /// Outstanding operations in bandwidth tests [default: 32]
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub window: Option<u32>,

    /// Bandwidth unit: gb (10^9 B/s) or mib (2^20 B/s, ucx_perftest's "MB/s")
    #[arg(long, value_name = "UNIT", default_value = "gb", value_parser = parse_unit)]
    pub unit: BandwidthUnit,

    /// Fail instead of skipping CUDA cases when no CUDA driver is present (the default for CUDA
    /// memory named in --memory)
    #[arg(long)]
    pub require_cuda: bool,

    /// Skip, not fail, CUDA memory named in --memory where no CUDA driver is present
    #[arg(long, conflicts_with = "require_cuda")]
    pub cuda_optional: bool,

    /// How both sides allocate GPU memory: legacy (cuMemAlloc), vmm (cuMemCreate mapped into a
    /// reserved range, as PyTorch's expandable_segments:True does), pool (cuMemAllocAsync from a
    /// pool) or fabric (cuMemCreate with fabric handles, multi-node NVLink). Only legacy memory
    /// can be mapped with legacy CUDA IPC: see docs/pair.md
    #[arg(long, value_name = "MODE", value_enum, default_value_t = CudaAlloc::Legacy)]
    pub cuda_alloc: CudaAlloc,
}

/// `--cuda-alloc`, the CLI's face of [`icb_core::CudaAllocMode`].
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CudaAlloc {
    #[default]
    Legacy,
    Vmm,
    Pool,
    Fabric,
}

impl From<CudaAlloc> for icb_core::CudaAllocMode {
    fn from(a: CudaAlloc) -> Self {
        match a {
            CudaAlloc::Legacy => icb_core::CudaAllocMode::Legacy,
            CudaAlloc::Vmm => icb_core::CudaAllocMode::Vmm,
            CudaAlloc::Pool => icb_core::CudaAllocMode::Pool,
            CudaAlloc::Fabric => icb_core::CudaAllocMode::Fabric,
        }
    }
}

/// `--token-file`: the shared secret `serve` and `connect` prove to each other (`icb_engine::auth`).
#[derive(clap::Args, Debug, Clone, Default)]
pub struct TokenArgs {
    /// File holding the token serve and connect share (else the IC_BENCH_TOKEN environment
    /// variable); it never crosses the wire: each side proves it holds the same one
    #[arg(long, value_name = "FILE")]
    pub token_file: Option<std::path::PathBuf>,
}

impl TokenArgs {
    /// The token from the file, else from `IC_BENCH_TOKEN`, else none.
    pub fn resolve(&self) -> anyhow::Result<Option<icb_engine::auth::Token>> {
        let env = std::env::var(icb_engine::auth::TOKEN_ENV).ok();
        Ok(icb_engine::auth::Token::resolve(self.token_file.as_deref(), env)?)
    }

    /// The flag a started side (a rails rank) gets to read the same file; `IC_BENCH_TOKEN` is
    /// inherited with the environment.
    pub fn side_flags(&self) -> Vec<String> {
        icb_engine::auth::side_flags(self.token_file.as_deref())
    }
}

impl TestArgs {
    /// The flags as a request to the engines.
    fn request(&self) -> icb_engine::SettingsRequest {
        icb_engine::SettingsRequest {
            profile: match self.profile {
                Profile::Verdict => icb_engine::Profile::Verdict,
                Profile::Full => icb_engine::Profile::Full,
            },
            tests: self.tests.clone(),
            sizes: self.sizes.clone().map(|l| l.0),
            blocks: self.blocks,
            batches: self.batches.clone(),
            memory: self.memory.clone(),
            warmup: self.warmup,
            min_iterations: self.min_iterations,
            min_time_s: self.min_time,
            max_time_s: self.max_time,
            window: self.window,
            unit: self.unit,
            require_cuda: self.require_cuda,
            cuda_optional: self.cuda_optional,
            cuda_alloc: self.cuda_alloc.into(),
        }
    }

    /// The settings for the engine that will run them; checked before anything starts.
    pub fn settings_for(&self, engine: EngineKind) -> anyhow::Result<RunSettings> {
        Ok(match engine {
            EngineKind::Ucx => self.request().ucx_settings()?,
            EngineKind::Nixl => icb_nixl_engine::settings_for_request(&self.request())?,
        })
    }
}

/// Which engine moves the bytes, and where it comes from; `serve`, `connect` and `pair` take the
/// same flags and launchers hand them to both sides ([`EngineArgs::side_flags`]).
#[derive(ClapArgs, Debug, Clone, Default)]
pub struct EngineArgs {
    /// Engine that moves the bytes: ucx (ic-bench's UCX engine: tag and RMA tests) or nixl (NIXL's C
    /// API with its UCX backend: READ/WRITE descriptor lists, as disaggregated serving moves KV)
    #[arg(long, value_name = "ENGINE", default_value = "ucx", value_parser = <EngineKind as std::str::FromStr>::from_str)]
    pub engine: EngineKind,

    /// With --engine nixl: directory holding libnixl_capi.so (else IC_BENCH_NIXL_LIB,
    /// /opt/nvidia/nvda_nixl/lib*, the Python wheel's directory, the linker's search)
    #[arg(long, value_name = "DIR")]
    pub nixl_lib: Option<PathBuf>,

    /// UCX engine: configure UCX as ucx_perftest does (default) or as NIXL's UCX backend does (nixl:
    /// peer-failure error handling plus NIXL's UCX defaults), to predict NIXL where it is not installed
    #[arg(long, value_name = "PROFILE", default_value = "default", value_parser = <icb_engine::UcxProfile as std::str::FromStr>::from_str)]
    pub ucx_profile: icb_engine::UcxProfile,

    /// Whether `--engine` was on the command line (set by the parse step, not a flag): a default
    /// engine may be replaced by a better one, a chosen one never is.
    #[arg(skip)]
    pub engine_given: bool,
}

impl EngineArgs {
    /// The flags as `icb_nixl_engine` takes them.
    pub fn choice(&self) -> icb_nixl_engine::EngineChoice {
        icb_nixl_engine::EngineChoice {
            engine: self.engine,
            nixl_lib: self.nixl_lib.clone(),
            ucx_profile: self.ucx_profile,
        }
    }

    /// Refuses flags that the chosen engine would ignore.
    pub fn check(&self) -> anyhow::Result<()> {
        Ok(self.choice().check()?)
    }

    /// The flags that select this engine on a side a launcher starts (`serve` and `connect`).
    pub fn side_flags(&self) -> Vec<String> {
        self.choice().side_flags()
    }

    /// The NIXL engine's process-level options (library; cases come with the settings).
    pub fn nixl_options(&self) -> icb_nixl_engine::NixlOptions {
        self.choice().nixl_options()
    }
}

/// What the placement should give (overrides of the built-in reference figures).
#[derive(ClapArgs, Debug, Clone, Default)]
pub struct ExpectArgs {
    /// Minimum bandwidth for host-memory cases: 10GB/s, 9000MiB/s, 100Gb/s, or a bare number of GB/s
    #[arg(long, value_name = "BW", value_parser = parse_gbps)]
    pub min_host_bw: Option<f64>,

    /// Minimum bandwidth for cases with CUDA memory: 50GB/s, 400Gb/s, or a bare number of GB/s
    #[arg(long, value_name = "BW", value_parser = parse_gbps)]
    pub min_cuda_bw: Option<f64>,

    /// Bandwidth floors apply to messages at least this large
    #[arg(long, value_name = "SIZE", value_parser = parse_size_arg)]
    pub min_bw_size: Option<u64>,

    /// Report TCP carrying the data as a warning instead of a failure
    #[arg(long)]
    pub allow_tcp: bool,

    /// Expectations file, YAML (see docs/schema.md, "expectation"); flags win over the file
    #[arg(long, value_name = "FILE")]
    pub expect_config: Option<PathBuf>,
}

/// Where to find UCX at run time.
#[derive(ClapArgs, Debug, Clone, Default)]
pub struct UcxArgs {
    /// Directory holding libucp.so.0 (else IC_BENCH_UCX_LIB, well-known locations, the linker's search)
    // Not `env = …`: clap rejects a set-but-empty variable, and the loader reads
    // IC_BENCH_UCX_LIB itself (ignoring an empty one).
    #[arg(long, value_name = "DIR")]
    pub ucx_lib: Option<PathBuf>,
}

impl ExpectArgs {
    /// The flags as given, for `icb_pair::ExpectationInput::read`.
    pub fn flags(&self) -> icb_pair::ExpectationFlags {
        icb_pair::ExpectationFlags {
            min_host_gbps: self.min_host_bw,
            min_cuda_gbps: self.min_cuda_bw,
            min_size: self.min_bw_size,
            allow_tcp: self.allow_tcp,
            config: self.expect_config.clone(),
        }
    }

    /// The expectations file (read and parsed once) and the flags.
    pub fn input(&self) -> anyhow::Result<icb_pair::ExpectationInput> {
        Ok(icb_pair::ExpectationInput::read(&self.flags())?)
    }
}

/// A qualification profile (gate, sweep) as `engine` runs it, checked before anything starts;
/// what the engine leaves out is said on stderr.
pub fn qualified(engine: &icb_nixl_engine::EngineChoice, settings: RunSettings) -> anyhow::Result<RunSettings> {
    icb_engine::validate_settings(&settings)?;
    let (settings, note) = engine.qualification(settings)?;
    if let Some(note) = note {
        eprintln!("ic-bench: {note}");
    }
    Ok(settings)
}
