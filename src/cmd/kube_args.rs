//! Cluster-access flags, as kubectl users expect them (shared by `pair`, `gc` and `probe`).

use std::path::PathBuf;

#[derive(clap::Args, Debug, Clone, Default)]
pub struct ClusterArgs {
    /// Path to the kubeconfig file to use (that file only); else $KUBECONFIG, ~/.kube/config, in-cluster
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,

    /// The kubeconfig context to use
    #[arg(long)]
    pub context: Option<String>,

    /// Namespace for ic-bench's pods (default: the context's namespace)
    #[arg(short = 'n', long)]
    pub namespace: Option<String>,

    /// Deadline for each API request, e.g. 30s, 1m
    #[arg(long, value_name = "DURATION", default_value = "30s", value_parser = humantime::parse_duration)]
    pub request_timeout: std::time::Duration,
}
