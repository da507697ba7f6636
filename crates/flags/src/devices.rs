//! `--gpus`, `--rdma`, `--resource`: the devices bench pods request on node targets (shared by
//! `pair`, `sweep` and `gate`). Deciding them is `icb_kube::devices`' job.

use icb_kube::devices::DeviceRequest;

#[derive(clap::Args, Debug, Clone, Default)]
pub struct DeviceArgs {
    /// GPUs (nvidia.com/gpu) each bench pod on a node target requests [default: 1 when the node advertises nvidia.com/gpu]
    #[arg(long, value_name = "N")]
    pub gpus: Option<u32>,

    /// RDMA device each bench pod requests, RESOURCE=N (or none) [default: one of the node's RDMA resources]; adds IPC_LOCK
    #[arg(long, value_name = "RESOURCE=N", value_parser = parse_rdma)]
    pub rdma: Option<RdmaFlag>,

    /// Any other extended resource, NAME=QTY (repeatable)
    #[arg(long = "resource", value_name = "NAME=QTY", value_parser = DeviceRequest::parse_resource)]
    pub resources: Vec<(String, String)>,
}

impl DeviceArgs {
    pub fn request(&self) -> DeviceRequest {
        DeviceRequest {
            gpus: self.gpus,
            rdma: self.rdma.clone().map(|r| r.0),
            resources: self.resources.clone(),
        }
    }
}

/// `--rdma RESOURCE=N` or `--rdma none` (a newtype: clap reads `Option<Option<_>>` as an
/// optional-value flag).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RdmaFlag(pub Option<(String, u32)>);

fn parse_rdma(raw: &str) -> Result<RdmaFlag, String> {
    DeviceRequest::parse_rdma(raw).map(RdmaFlag)
}
