//! (being written by a helper) `ic-bench pair --local`.

#[derive(clap::Args, Debug, Clone)]
pub struct LocalArgs {}

pub fn run_local(_args: &super::pair::Args) -> anyhow::Result<i32> {
    anyhow::bail!("pair --local is not built yet")
}
