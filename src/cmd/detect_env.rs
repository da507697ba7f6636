//! (being written by a helper)

#[derive(clap::Args, Debug, Clone)]
pub struct Args {}

pub fn run(_args: Args) -> anyhow::Result<i32> {
    anyhow::bail!("this subcommand is not built yet")
}
