//! The table that pins the whole fabric vocabulary: every name ic-bench knows, and what it is.
//! A change here is a change in how ic-bench judges a pod; it must be deliberate.

use super::env::pod_transport_env_shell_pattern;
use super::net_devices::{NetDeviceProblem as P, is_efa_device, looks_like_rdma_device, parse_ucx_net_devices};
use super::privilege::grants_capability;
use super::quantity::{format_milli, parse_bytes, parse_milli};
use super::shm::{is_dev_shm_mount, is_memory_medium};
use super::ucx::tls_item_transports;
use super::*;
use crate::model::TransportClass;

/// The history key's "transport env" ([`is_baseline_env`]): what is in and what is out. A name
/// moved from one list to the other starts new baselines for every history that ran with it.
#[test]
fn baseline_env_table() {
    let keyed = [
        "UCX_TLS",
        "UCX_NET_DEVICES",
        "UCX_IB_GID_INDEX",
        "UCX_RNDV_SCHEME",
        "UCX_RNDV_THRESH",
        "UCX_MAX_RNDV_RAILS",
        "UCX_IB_PKEY",
        "NCCL_IB_HCA",
        "NCCL_SOCKET_IFNAME",
        "NIXL_BACKENDS",
        "FI_PROVIDER",
        "CUDA_VISIBLE_DEVICES",
        "NVIDIA_VISIBLE_DEVICES",
        "IC_BENCH_WINDOWS",
        "IC_BENCH_UNTOUCHED_BUFFERS",
        "IC_BENCH_FIXED_STOP",
    ];
    let not_keyed = [
        // Per run: the peer's address and random port, the token.
        "IC_BENCH_SERVER",
        "IC_BENCH_TOKEN",
        // Paths (the versions in the key say which library they loaded).
        "IC_BENCH_UCX_LIB",
        "IC_BENCH_NIXL_LIB",
        "IC_BENCH_RAIL_TREE",
        "LD_LIBRARY_PATH",
        "NIXL_PLUGIN_DIR",
        "NIXL_LIBDIRS",
        "NIXL_PREFIXES",
        // Where to meet, not how to move.
        "NIXL_ETCD_ENDPOINTS",
        "NIXL_ETCD_NAMESPACE",
        "NCCL_COMM_ID",
        "UCX_TCP_PORT_RANGE",
        // Secrets and logging.
        "NIXL_API_KEY",
        "UCX_LOG_LEVEL",
        "UCX_LOG_FILE",
        "UCX_PROTO_INFO",
        "NCCL_DEBUG",
        // ic-bench's own knobs that change nothing measured, and the rest of the process.
        "IC_BENCH_LOG",
        "IC_BENCH_HISTORY",
        "HOME",
        "TMPDIR",
        "HOSTNAME",
        "PATH",
    ];
    for name in keyed {
        assert!(is_baseline_env(name), "{name} belongs in the history key");
    }
    for name in not_keyed {
        assert!(!is_baseline_env(name), "{name} must not be in the history key");
    }
}

#[test]
fn vocabulary_table() {
    // --- environment variables ---------------------------------------------------------------
    use EnvClass::*;
    let env = [
        ("UCX_TLS", TransportSetting),
        ("UCX_NET_DEVICES", TransportSetting),
        ("UCX_IB_GID_INDEX", TransportSetting),
        ("UCX_RNDV_SCHEME", TransportSetting),
        ("NCCL_IB_HCA", TransportSetting),
        ("NCCL_SOCKET_IFNAME", TransportSetting),
        ("NIXL_PLUGIN_DIR", TransportSetting),
        ("FI_PROVIDER", TransportSetting),
        ("FI_EFA_USE_DEVICE_RDMA", TransportSetting),
        ("NVSHMEM_IB_GID_INDEX", TransportSetting),
        ("GLOO_SOCKET_IFNAME", TransportSetting),
        ("DYN_KVBM_NIXL_BACKEND_LIBFABRIC", TransportSetting),
        ("UCX_LOG_LEVEL", TransportLogging),
        ("UCX_PROTO_INFO", TransportLogging),
        ("NCCL_DEBUG", TransportLogging),
        ("NCCL_DEBUG_SUBSYS", TransportLogging),
        ("FI_LOG_LEVEL", TransportLogging),
        ("NIXL_LOG_LEVEL", TransportLogging),
        ("CUDA_VISIBLE_DEVICES", GpuVisibility),
        ("CUDA_DEVICE_ORDER", GpuVisibility),
        ("NVIDIA_VISIBLE_DEVICES", GpuVisibility),
        ("NVIDIA_DRIVER_CAPABILITIES", GpuVisibility),
        ("NVIDIA_MIG_CONFIG_DEVICES", GpuVisibility),
        ("HIP_VISIBLE_DEVICES", GpuVisibility),
        ("ROCR_VISIBLE_DEVICES", GpuVisibility),
        ("GPU_DEVICE_ORDINAL", GpuVisibility),
        ("IC_BENCH_UCX_LIB", IcBench),
        ("LD_LIBRARY_PATH", LibraryPath),
        ("PATH", Other),
        ("HOME", Other),
        ("UCXX", Other),
        ("ucx_tls", Other),
        ("SGL_LOGURU_PATH", Other),
        ("CUDA_VISIBLE_DEVICES_X", Other),
        ("AWS_SECRET_ACCESS_KEY", Other),
        ("", Other),
    ];
    for (name, class) in env {
        assert_eq!(env_class(name), class, "env {name:?}");
        let transport = matches!(class, TransportSetting | TransportLogging);
        assert_eq!(
            is_transport_setting(name),
            class == TransportSetting,
            "setting {name:?}"
        );
        assert_eq!(is_transport_env(name), transport, "transport {name:?}");
        assert_eq!(
            is_pod_transport_env(name),
            transport || class == GpuVisibility,
            "pod {name:?}"
        );
        assert_eq!(is_run_context_env(name), class != Other, "run context {name:?}");
    }
    assert_eq!(
        pod_transport_env_shell_pattern(),
        "UCX_*|NCCL_*|NIXL_*|FI_*|NVSHMEM_*|GLOO_*|DYN_KVBM_NIXL_*|CUDA_VISIBLE_DEVICES=*|CUDA_DEVICE_ORDER=*|\
         NVIDIA_VISIBLE_DEVICES=*|NVIDIA_DRIVER_CAPABILITIES=*|NVIDIA_MIG_CONFIG_DEVICES=*|HIP_VISIBLE_DEVICES=*|\
         ROCR_VISIBLE_DEVICES=*|GPU_DEVICE_ORDINAL=*"
    );

    // --- Kubernetes resource names -----------------------------------------------------------
    use ResourceClass::{Gpu, NotADevice, OtherDevice, Rdma};
    let gpu = |vendor| Gpu { vendor };
    let rdma = |kind| Rdma { kind };
    let resources = [
        ("nvidia.com/gpu", gpu(GpuVendor::Nvidia)),
        ("nvidia.com/gpu.shared", gpu(GpuVendor::Nvidia)),
        ("nvidia.com/mig-1g.10gb", gpu(GpuVendor::Nvidia)),
        ("NVIDIA.com/GPU", gpu(GpuVendor::Nvidia)),
        ("gpu", gpu(GpuVendor::Nvidia)),
        ("amd.com/gpu", gpu(GpuVendor::Amd)),
        ("gpu.intel.com/i915", gpu(GpuVendor::Intel)),
        ("gpu.intel.com/xe", gpu(GpuVendor::Intel)),
        ("example.com/gpu", gpu(GpuVendor::Other)),
        ("rdma/ib", rdma(RdmaKind::SharedDevice)),
        ("rdma/hca_shared_devices_a", rdma(RdmaKind::SharedDevice)),
        ("rdma/rdma_shared_device_a", rdma(RdmaKind::SharedDevice)),
        ("rdma/roce", rdma(RdmaKind::SharedDevice)),
        ("openshift.io/mlnx_sriov_rdma", rdma(RdmaKind::SriovVf)),
        ("nvidia.com/sriov_rdma_vf", rdma(RdmaKind::SriovVf)),
        ("intel.com/sriov_netdevice", rdma(RdmaKind::SriovVf)),
        ("intel.com/intel_sriov_netdevice", rdma(RdmaKind::SriovVf)),
        ("vpc.amazonaws.com/efa", rdma(RdmaKind::Efa)),
        ("example.com/efa", rdma(RdmaKind::Efa)),
        ("nvidia.com/hostdev", rdma(RdmaKind::HostDevice)),
        ("mellanox.com/cx6", rdma(RdmaKind::Mellanox)),
        ("mellanox.com/mlnx_sriov_rdma", rdma(RdmaKind::Mellanox)),
        ("networking.gke.io.networks/rdma-0", rdma(RdmaKind::GkeNetwork)),
        ("example.com/ib", rdma(RdmaKind::Named)),
        ("example.com/hca", rdma(RdmaKind::Named)),
        ("example.com/roce_vf", rdma(RdmaKind::Named)),
        ("example.com/infiniband", rdma(RdmaKind::Named)),
        ("example.com/mlnx_pf", rdma(RdmaKind::Named)),
        ("example.com/rdmanic", rdma(RdmaKind::Named)),
        (" rdma/ib ", rdma(RdmaKind::SharedDevice)),
        ("example.com/fpga", OtherDevice),
        ("habana.ai/gaudi", OtherDevice),
        ("example.com/library", OtherDevice),
        ("cpu", NotADevice),
        ("memory", NotADevice),
        ("hugepages-2Mi", NotADevice),
        ("ephemeral-storage", NotADevice),
        ("pods", NotADevice),
        ("kubernetes.io/batch-cpu", NotADevice),
        ("example.kubernetes.io/x", NotADevice),
        ("", NotADevice),
    ];
    for (name, class) in resources {
        assert_eq!(resource_class(name), class, "resource {name:?}");
        assert_eq!(is_gpu_resource(name), class.is_gpu(), "{name:?}");
        assert_eq!(is_rdma_resource(name), class.is_rdma(), "{name:?}");
        assert_eq!(is_device_resource(name), class != NotADevice, "{name:?}");
    }
    for (claim, domain) in [
        ("compute-domain-channel", true),
        ("my-ComputeDomain", true),
        ("imex-channel-0", true),
        ("rdma-nic", false),
        ("gpu", false),
    ] {
        assert_eq!(is_compute_domain_claim_name(claim), domain, "claim {claim:?}");
    }

    // --- UCX transport names -----------------------------------------------------------------
    use RdmaFamily::{Dc, Gga, Rc, Srd, Ud};
    use TransportClass as T;
    let transports = [
        ("tcp", T::Tcp, None),
        ("sockcm", T::Tcp, None),
        ("sysv", T::SharedMemory, None),
        ("posix", T::SharedMemory, None),
        ("xpmem", T::SharedMemory, None),
        ("knem", T::SharedMemory, None),
        ("mm", T::SharedMemory, None),
        ("sm", T::SharedMemory, None),
        ("shm", T::SharedMemory, None),
        ("cma", T::Cma, None),
        ("rc", T::Rdma, Some(Rc)),
        ("rc_v", T::Rdma, Some(Rc)),
        ("rc_verbs", T::Rdma, Some(Rc)),
        ("rc_x", T::Rdma, Some(Rc)),
        ("rc_mlx5", T::Rdma, Some(Rc)),
        ("dc", T::Rdma, Some(Dc)),
        ("dc_x", T::Rdma, Some(Dc)),
        ("dc_mlx5", T::Rdma, Some(Dc)),
        ("ud", T::Rdma, Some(Ud)),
        ("ud_v", T::Rdma, Some(Ud)),
        ("ud_verbs", T::Rdma, Some(Ud)),
        ("ud_x", T::Rdma, Some(Ud)),
        ("ud_mlx5", T::Rdma, Some(Ud)),
        ("srd", T::Rdma, Some(Srd)),
        ("efa", T::Rdma, Some(Srd)),
        ("gga", T::Rdma, Some(Gga)),
        ("gga_mlx5", T::Rdma, Some(Gga)),
        ("ib", T::Rdma, None),
        ("rdmacm", T::Rdma, None),
        ("RC_MLX5", T::Rdma, Some(Rc)),
        ("TCP", T::Tcp, None),
        ("cuda_ipc", T::CudaIpc, None),
        ("cuda_copy", T::CudaCopyStaging, None),
        ("gdr_copy", T::CudaCopyStaging, None),
        ("self", T::SelfLoop, None),
        ("rma_am", T::RmaEmulated, None),
        ("rc_foo", T::Unknown, None),
        ("dc_v", T::Unknown, None),
        ("rocm_copy", T::Unknown, None),
        ("ugni", T::Unknown, None),
        ("", T::Unknown, None),
    ];
    for (name, class, family) in transports {
        assert_eq!(transport_class(name), class, "transport {name:?}");
        assert_eq!(rdma_family(name), family, "family {name:?}");
        assert_eq!(is_rdma_transport(name), class == T::Rdma, "{name:?}");
    }
    for (family, reliable) in [(Rc, true), (Dc, true), (Srd, true), (Ud, false), (Gga, false)] {
        assert_eq!(family.is_reliable(), reliable, "{family:?}");
    }
    for (item, expands) in [
        ("sm", &["sysv", "posix", "cma", "knem", "xpmem"][..]),
        ("shm", &["sysv", "posix", "cma", "knem", "xpmem"]),
        ("mm", &["sysv", "posix", "xpmem"]),
        ("ib", &["rc_verbs", "rc_mlx5", "dc_mlx5", "ud_verbs", "ud_mlx5"]),
        ("rc", &["rc_verbs", "rc_mlx5"]),
        ("rc_x", &["rc_mlx5"]),
        ("rc_v", &["rc_verbs"]),
        ("dc", &["dc_mlx5"]),
        ("ud", &["ud_verbs", "ud_mlx5"]),
        ("srd", &["srd"]),
        ("cuda", &["cuda_copy", "cuda_ipc", "gdr_copy"]),
        ("CUDA_COPY", &["cuda_copy"]),
        ("rocm", &["rocm_copy", "rocm_ipc", "rocm_gdr"]),
        ("tcp", &["tcp"]),
        ("rdmacm", &[]),
        ("bogus", &[]),
    ] {
        assert_eq!(tls_item_transports(item), expands, "UCX_TLS item {item:?}");
    }

    // --- UCX_TLS values: (value, any RDMA, IB/RoCE left, cuda_copy allowed, cuda_ipc named) --
    let tls = [
        ("rc_x,rc,dc_x,dc,cuda_copy,cuda_ipc", true, true, true, true),
        ("tcp,cuda_copy", false, false, true, false),
        ("tcp", false, false, false, false),
        ("all", true, true, true, false),
        ("", false, false, false, false),
        ("ib,cuda", true, true, true, true),
        ("sm,cuda_copy", false, false, true, false),
        ("srd,cuda_copy,tcp", true, false, true, false),
        ("gga,tcp", true, false, false, false),
        (" RC_X , Cuda_Copy ", true, true, true, false),
        ("rdmacm,cuda_copy", false, false, true, false),
        ("^cuda_ipc", true, true, true, false),
        ("^ib", true, false, true, false),
        ("^ib,srd,gga", false, false, true, false),
        ("^rc,dc,ud", true, false, true, false),
        ("^rc,dc", true, true, true, false),
        ("^rc_x,dc_x,ud_x", true, true, true, false),
        ("^cuda", true, true, false, false),
        ("^cuda_copy", true, true, false, false),
        ("^", true, true, true, false),
    ];
    for (value, rdma, ib, cuda_copy, names_ipc) in tls {
        let t = UcxTls::parse(value);
        assert_eq!(t.allows_class(T::Rdma), rdma, "UCX_TLS={value:?} RDMA");
        assert_eq!(t.allows_item("ib"), ib, "UCX_TLS={value:?} IB/RoCE");
        assert_eq!(t.allows("cuda_copy"), cuda_copy, "UCX_TLS={value:?} cuda_copy");
        assert_eq!(t.names("cuda_ipc"), names_ipc, "UCX_TLS={value:?} names cuda_ipc");
    }
    assert_eq!(
        UcxTls::parse(" ^Rc, ,cuda "),
        UcxTls {
            exclude: true,
            items: vec!["rc".into(), "cuda".into()]
        }
    );

    // --- UCX_NET_DEVICES: (value, entries read, problems; None = `all`) ------------------------
    /// What a list should read as: its entries and problems, or `None` for `all`.
    type Reading<'a> = Option<(&'a [&'a str], Vec<P>)>;
    let net_devices: [(&str, Reading); 13] = [
        ("all", None),
        (" ALL ", None),
        ("mlx5_0:1,mlx5_1:1", Some((&["mlx5_0:1", "mlx5_1:1"], vec![]))),
        ("eth0", Some((&["eth0"], vec![]))),
        ("enp1s0f0np0,mlx5_2:1", Some((&["enp1s0f0np0", "mlx5_2:1"], vec![]))),
        (
            "mlx5_0",
            Some((&["mlx5_0"], vec![P::RdmaDeviceWithoutPort("mlx5_0".into())])),
        ),
        (
            "rocep1s0f0",
            Some((&["rocep1s0f0"], vec![P::RdmaDeviceWithoutPort("rocep1s0f0".into())])),
        ),
        ("mlx5_0:x", Some((&[], vec![P::BadPort("mlx5_0:x".into())]))),
        ("mlx5_0:0", Some((&[], vec![P::BadPort("mlx5_0:0".into())]))),
        (
            "mlx5_0:1,,mlx5_1:1",
            Some((&["mlx5_0:1", "mlx5_1:1"], vec![P::EmptyEntry])),
        ),
        (
            "mlx5_0:1; mlx5_1:1",
            Some((&[], vec![P::BadPort("mlx5_0:1; mlx5_1:1".into())])),
        ),
        (
            "mlx5_0:1, mlx5_1:1",
            Some((&["mlx5_0:1", "mlx5_1:1"], vec![P::Spaces(" mlx5_1:1".into())])),
        ),
        ("ml$x:1,", Some((&[], vec![P::BadName("ml$x:1".into()), P::EmptyEntry]))),
    ];
    for (value, expected) in net_devices {
        let got = parse_ucx_net_devices(value).map(|l| {
            let entries: Vec<String> = l.entries.iter().map(ToString::to_string).collect();
            (entries, l.problems)
        });
        let expected = expected.map(|(e, p)| (e.iter().map(|s| s.to_string()).collect::<Vec<_>>(), p));
        assert_eq!(got, expected, "UCX_NET_DEVICES={value:?}");
    }
    for (problem, malformed) in [
        (P::EmptyEntry, true),
        (P::BadName(String::new()), true),
        (P::BadPort(String::new()), true),
        (P::Spaces(String::new()), false),
        (P::RdmaDeviceWithoutPort(String::new()), false),
    ] {
        assert_eq!(problem.is_malformed(), malformed, "{problem:?}");
    }
    for (name, rdma) in [
        ("mlx5_0", true),
        ("mlx4_1", true),
        ("bnxt_re0", true),
        ("irdma0", true),
        ("efa_0", true),
        ("rdmap16s27", true),
        ("rocep65s0f0", true),
        ("qedr0", true),
        ("hfi1_0", true),
        ("erdma_0", true),
        ("eth0", false),
        ("ib0", false),
        ("enp65s0f0np0", false),
    ] {
        assert_eq!(looks_like_rdma_device(name), rdma, "device {name:?}");
    }
    for (name, efa) in [
        ("efa_0", true),
        ("rdmap16s27", true),
        ("mlx5_0", false),
        ("eth0", false),
    ] {
        assert_eq!(is_efa_device(name), efa, "EFA device {name:?}");
    }

    // --- quantities ----------------------------------------------------------------------------
    let quantities = [
        ("8", Some(8_000), Some(8)),
        ("500m", Some(500), Some(1)),
        ("1.5", Some(1_500), Some(2)),
        ("1Ki", Some(1_024_000), Some(1_024)),
        ("16Gi", Some(16_000 << 30), Some(16 << 30)),
        ("0.5Gi", Some(500 << 30), Some(1 << 29)),
        ("512Mi", Some(512_000 << 20), Some(512 << 20)),
        ("1G", Some(1_000_000_000_000), Some(1_000_000_000)),
        ("80G", Some(80_000_000_000_000), Some(80_000_000_000)),
        ("2k", Some(2_000_000), Some(2_000)),
        ("1e3", Some(1_000_000), Some(1_000)),
        ("1e9", Some(1_000_000_000_000), Some(1_000_000_000)),
        (" 64Gi ", Some(64_000 << 30), Some(64 << 30)),
        ("-1", Some(-1_000), None),
        ("1e999", None, None),
        ("9Ei", Some(9_000 << 60), Some(9 << 60)),
        ("16Ei", Some(16_000 << 60), None),
        ("1e30", Some(10i128.pow(33)), None),
        ("abc", None, None),
        ("1Xi", None, None),
        ("1K", None, None),
        ("", None, None),
        (".", None, None),
    ];
    for (text, milli, bytes) in quantities {
        assert_eq!(parse_milli(text), milli, "quantity {text:?}");
        assert_eq!(parse_bytes(text), bytes, "bytes {text:?}");
    }
    assert_eq!(format_milli(8_000), "8");
    assert_eq!(format_milli(250), "250m");

    // --- /dev/shm ------------------------------------------------------------------------------
    for (medium, memory) in [
        (Some("Memory"), true),
        (Some("memory"), false),
        (Some("MEMORY"), false),
        (Some(""), false),
        (Some("HugePages"), false),
        (None, false),
    ] {
        assert_eq!(is_memory_medium(medium), memory, "medium {medium:?}");
    }
    // --- capabilities --------------------------------------------------------------------------
    for (added, cap, granted) in [
        (&["IPC_LOCK"][..], "IPC_LOCK", true),
        (&["CAP_IPC_LOCK"], "IPC_LOCK", true),
        (&[" ipc_lock "], "IPC_LOCK", true),
        (&["ALL"], "SYS_ADMIN", true),
        (&["NET_RAW", "SYS_ADMIN"], "SYS_ADMIN", true),
        (&["NET_RAW"], "IPC_LOCK", false),
        (&["CAP_CAP_IPC_LOCK"], "IPC_LOCK", false),
        (&[], "IPC_LOCK", false),
    ] {
        assert_eq!(grants_capability(added, cap), granted, "{added:?} grants {cap}");
    }

    for (path, shm) in [
        ("/dev/shm", true),
        ("/dev/shm/", true),
        ("/dev/shm2", false),
        ("/dev", false),
    ] {
        assert_eq!(is_dev_shm_mount(path), shm, "mount {path:?}");
    }
}
