//! `ic-bench pair`: one front door for local processes (`--local`) and Kubernetes pods
//! (`--prefill X --decode Y`). Both end in the same report and verdict.

use super::common::{ExpectArgs, OutputArgs, TestArgs, UcxArgs};

#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    /// Run the server and client as local processes (no Kubernetes)
    #[arg(long, conflicts_with_all = ["prefill", "decode"])]
    pub local: bool,

    #[command(flatten)]
    pub local_opts: super::pair_local::LocalArgs,

    /// Prefill (client) side: node/NAME, pod/NAME, deployment/NAME, or a label selector with -l
    #[arg(long, requires = "decode", allow_hyphen_values = true)]
    pub prefill: Option<String>,

    /// Decode (server) side: node/NAME, pod/NAME, deployment/NAME, or a label selector with -l
    #[arg(long, requires = "prefill", allow_hyphen_values = true)]
    pub decode: Option<String>,

    #[command(flatten)]
    pub kube: super::pair_kube::KubePairArgs,

    #[command(flatten)]
    pub test: TestArgs,

    #[command(flatten)]
    pub expect: ExpectArgs,

    #[command(flatten)]
    pub output: OutputArgs,

    #[command(flatten)]
    pub ucx: UcxArgs,
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    if args.local {
        super::pair_local::run_local(&args)
    } else if args.prefill.is_some() && args.decode.is_some() {
        super::pair_kube::run_kube(&args)
    } else {
        anyhow::bail!("say where to run: --local, or --prefill TARGET --decode TARGET (e.g. node/gpu-1)")
    }
}
