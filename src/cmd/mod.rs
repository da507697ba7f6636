//! One module per subcommand: a clap `Args` struct and `run(args) -> anyhow::Result<i32>`.

pub mod common;
pub mod connect;
pub mod connect_rails;
pub mod detect_env;
pub mod devices;
pub mod export_args;
pub mod gate;
pub mod gc;
pub mod interrupt;
pub mod kube_args;
pub mod output;
pub mod pair;
pub mod pair_inplace;
pub mod pair_kube;
pub mod pair_local;
pub mod pair_rails;
pub mod pair_rails_kube;
pub mod probe;
pub mod rail_info;
pub mod report_out;
pub mod serve;
pub mod serve_rails;
pub mod sweep;
mod sweep_flow;
mod sweep_resume;
pub mod version;
