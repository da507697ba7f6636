//! Pure parsers for the tools and files a node probe reads. None of them panics on any input:
//! unknown lines are skipped and missing fields stay `None` (proptest and cargo-fuzz check this).

pub mod ethtool;
pub mod ibstat;
pub mod ibv_devinfo;
pub mod modules;
pub mod nccl_log;
pub mod procfs;
pub mod sysfs;
pub mod topo;
pub mod ucx_info;

pub use ibstat::{IbstatCa, IbstatPort, parse_ibstat};
pub use ibv_devinfo::{DeviceList, DevinfoGid, DevinfoHca, DevinfoPort, parse_ibv_devinfo, parse_ibv_devinfo_list};
pub use modules::{Module, module_loaded, parse_modules};
pub use nccl_log::{NcclLogSummary, parse_nccl_log};
pub use procfs::{LimitValue, NvidiaDriver, parse_cap_eff, parse_kernel_release, parse_memlock, parse_nvidia_version};
pub use sysfs::{GidType, LinkLayer, PhysState, PortState, Rate, port_is_up};
pub use topo::{Link, Topo, parse_topo};
pub use ucx_info::{MemoryDomain, UcxInfo, UcxTransport, parse_ucx_info};
