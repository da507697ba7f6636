//! `ic-bench detect-env`: NCCL_IB_HCA / NVSHMEM_HCA_LIST / UCX_NET_DEVICES and the RoCE GID
//! index from sysfs, printed as `export` lines (or JSON). Usable as an init container: with
//! `--env-file` it writes that one file, and nothing else.

use anyhow::Context as _;
use icb_probe::{LocalSource, ReplayDirs, TransportEnv, detect_env};
use std::path::PathBuf;

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum DetectFormat {
    Shell,
    Json,
}

#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    /// Read sysfs from this directory instead of /sys
    #[arg(long, value_name = "DIR")]
    pub sysfs_root: Option<PathBuf>,

    /// Output: shell (export lines) or json
    #[arg(short = 'o', long = "output", value_enum, default_value = "shell")]
    pub format: DetectFormat,

    /// Also write the export lines to this file (for an init container's shared volume)
    #[arg(long, value_name = "PATH")]
    pub env_file: Option<PathBuf>,

    /// Exit 1 when what would be exported cannot be relied on: no usable RDMA port, no valid
    /// RoCE GID index, or an exported GID index that is invalid on some of the chosen HCAs
    #[arg(long)]
    pub require: bool,
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    let src = LocalSource::from_replay_flags(&ReplayDirs {
        sysfs_root: args.sysfs_root.clone(),
        ..ReplayDirs::default()
    })?;
    let d = detect_env(&src, &TransportEnv::from_process());
    let shell = d.to_shell();
    let text = match args.format {
        DetectFormat::Shell => shell.clone(),
        DetectFormat::Json => serde_json::to_string_pretty(&d)? + "\n",
    };
    print!("{text}");
    if let Some(path) = &args.env_file {
        std::fs::write(path, &shell).with_context(|| format!("cannot write --env-file {}", path.display()))?;
    }
    for w in &d.warnings {
        eprintln!("ic-bench detect-env: warning: {w}");
    }
    for p in &d.problems {
        eprintln!("ic-bench detect-env: {p}");
    }
    if args.require
        && let Some(why) = d.unusable_because()
    {
        eprintln!("ic-bench detect-env: --require: {why}");
        return Ok(icb_core::exit::VERDICT_FAILED);
    }
    Ok(icb_core::exit::OK)
}
