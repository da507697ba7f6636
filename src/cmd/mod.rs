//! One module per subcommand: a clap `Args` struct and `run(args) -> anyhow::Result<i32>`.

pub mod connect;
pub mod connect_rails;
pub mod detect_env;
pub mod gate;
mod gate_kv;
pub mod gc;
pub mod history;
pub mod interrupt;
pub mod kv_coordinate;
pub mod kv_rank;
pub mod pair;
pub mod pair_inplace;
pub mod pair_kube;
pub mod pair_kv;
pub mod pair_local;
pub mod pair_rails;
pub mod pair_rails_kube;
pub mod probe;
pub mod probe_serving;
pub mod rail_info;
pub mod report_out;
pub mod serve;
pub mod serve_rails;
pub mod sweep;
mod sweep_resume;
pub mod version;

/// The one async runtime of every subcommand that needs one (the pair pipeline, API calls): small,
/// because the work is I/O bound and the measurement itself runs in the child processes.
pub fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| anyhow::anyhow!("cannot start the async runtime: {e}"))
}
