//! `ic-bench kv-coordinate --job JSON` (hidden): the coordinator of `pair --kv-shape`'s per-rank
//! model run next to the ranks (in the decode side's bench pod on Kubernetes), started by `pair`
//! itself. It prints its port, then what it gathered, each as one line; the work is
//! `icb_kv_transfer::serve_coordinator`.

use icb_kv_transfer::CoordinatorJob;
use std::net::SocketAddr;

#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    /// The job (`icb_kv_transfer::CoordinatorJob`, JSON)
    #[arg(long, value_name = "JSON")]
    pub job: String,

    /// Where to listen (port 0: any free port, announced on stdout)
    #[arg(long, value_name = "ADDR", default_value = "0.0.0.0:0")]
    pub listen: SocketAddr,
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    let job: CoordinatorJob =
        serde_json::from_str(&args.job).map_err(|e| anyhow::anyhow!("bad --job for kv-coordinate: {e}"))?;
    super::runtime()?.block_on(async {
        let mut out = std::io::stdout();
        icb_kv_transfer::serve_coordinator(&job, args.listen, &mut out).await
    })?;
    Ok(0)
}
