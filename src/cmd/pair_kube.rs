//! (being written by a helper) `ic-bench pair --prefill X --decode Y` on Kubernetes.

#[derive(clap::Args, Debug, Clone)]
pub struct KubePairArgs {}

pub fn run_kube(_args: &super::pair::Args) -> anyhow::Result<i32> {
    anyhow::bail!("pair on Kubernetes is not built yet")
}
