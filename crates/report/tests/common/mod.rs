//! Realistic reports: protocol strings captured from UCX 1.22 on the dev machine, bandwidths and
//! latencies of the order platform.md records, judged by the real verdict rules.
#![allow(dead_code)]

use icb_core::checks::{Check, ProbeReport};
use icb_core::classify::classify;
use icb_core::model::*;
use icb_core::verdict::judge;

pub const MIB: u64 = 1 << 20;
pub const CC: MemoryPair = MemoryPair {
    initiator: MemoryType::Cuda,
    target: MemoryType::Cuda,
};

fn lane(t: &str, d: &str) -> Lane {
    Lane {
        transport: t.into(),
        device: d.into(),
    }
}

fn case(
    test: TestKind,
    memory: MemoryPair,
    size: u64,
    info: Option<&str>,
    lanes: &[Lane],
    gbps: f64,
    lat_us: f64,
) -> CaseResult {
    let iterations = 200;
    let bps = gbps * 1e9;
    CaseResult {
        test,
        memory,
        size,
        blocks: None,
        status: CaseStatus::Measured,
        reason: None,
        measurement: Some(Measurement {
            warmup_bytes: None,
            warmup_iterations: 16,
            iterations,
            elapsed_s: if test.is_bandwidth() {
                (size * iterations) as f64 / bps
            } else {
                lat_us * 2e-6 * iterations as f64
            },
            bytes: size * iterations,
            bandwidth_bps: test.is_bandwidth().then_some(bps),
            latency_us: (!test.is_bandwidth()).then_some(LatencyStats {
                min: lat_us * 0.9,
                mean: lat_us * 1.05,
                p50: lat_us,
                p90: lat_us * 1.2,
                p99: lat_us * 1.6,
                p999: lat_us * 3.0,
                max: lat_us * 10.0,
            }),
            window: if test.is_bandwidth() { 32 } else { 1 },
            verified: true,
            precision: None,
            list_latency_us: None,
            window_trials: Vec::new(),
            post_us: None,
        }),
        transport: Some(classify(info, lanes, memory)),
        verdict: None,
        run_by: Default::default(),
        rail: None,
        cuda_alloc: None,
        nic_health: None,
    }
}

fn skipped(test: TestKind, memory: MemoryPair, size: u64) -> CaseResult {
    CaseResult {
        test,
        memory,
        size,
        blocks: None,
        status: CaseStatus::Skipped,
        reason: Some("no CUDA driver".into()),
        measurement: None,
        transport: None,
        verdict: None,
        run_by: Default::default(),
        rail: None,
        cuda_alloc: None,
        nic_health: None,
    }
}

fn peer(host: &str) -> PeerInfo {
    PeerInfo {
        hostname: host.into(),
        ucx_version: "1.22.0".into(),
        ucx_library: "/work/main/.deps/ucx/lib".into(),
        cuda: CudaInfo {
            available: false,
            detail: "no CUDA driver".into(),
            devices: 0,
        },
        env: [("UCX_TLS".to_string(), "all".to_string())].into_iter().collect(),
        nixl: None,
    }
}

fn report(
    locality: Locality,
    mode: &str,
    hosts: (&str, &str),
    memory: Vec<MemoryPair>,
    cases: Vec<CaseResult>,
) -> PairReport {
    let mut r = PairReport {
        schema: PAIR_SCHEMA.into(),
        tool: ToolInfo {
            name: "ic-bench".into(),
            version: "0.1.0".into(),
            git_commit: "be5dec5".into(),
            ucx_headers: "1.22.0".into(),
        },
        started_at: "2026-11-22T02:00:00Z".into(),
        duration_s: 12.5,
        placement: Placement {
            locality,
            mode: mode.into(),
            prefill: Endpoint {
                host: hosts.0.into(),
                ..Default::default()
            },
            decode: Endpoint {
                host: hosts.1.into(),
                address: Some("10.99.0.2:13337".into()),
                ..Default::default()
            },
        },
        server: peer(hosts.1),
        client: peer(hosts.0),
        settings: RunSettings {
            tests: TestKind::ALL.to_vec(),
            sizes: vec![8, 4096, 64 * MIB],
            memory,
            warmup_iterations: 16,
            min_iterations: 32,
            min_time_s: 0.2,
            max_time_s: 5.0,
            window: 32,
            unit: BandwidthUnit::GBps,
            require_cuda: false,
            stop: None,
            plan: Vec::new(),
            blocks: None,
            window_candidates: Vec::new(),
            untouched_buffers: false,
            cuda_alloc: Default::default(),
        },
        expectation: Expectation::defaults(locality),
        cases,
        verdict: Verdict {
            status: VerdictStatus::Pass,
            reason: String::new(),
            hint: None,
            data_paths: vec![],
        },
        warnings: vec![],
        partial: None,
        ucx_profile: None,
        rails: None,
        kv: None,
        baseline: None,
        controls: Vec::new(),
        readiness: None,
    };
    judge(&mut r);
    r
}

/// Two pods on one node (separate IPC+PID namespaces): everything falls back to TCP.
pub fn pods_same_node() -> PairReport {
    use TestKind::*;
    let hh = MemoryPair::HOST_HOST;
    let tcp = [lane("tcp", "lo"), lane("tcp", "eth0")];
    report(
        Locality::SameHost,
        "local (isolation=pod)",
        ("vm", "vm"),
        vec![hh, CC],
        vec![
            case(
                TagBw,
                hh,
                4096,
                Some(
                    "{proto|cb|init} tag_send from host memory length 4096 eager zero-copy copy-out tcp/lo 10.2 MB/s 401.20 us",
                ),
                &tcp,
                0.61,
                0.0,
            ),
            case(
                TagBw,
                hh,
                64 * MIB,
                Some(
                    "{proto|cb|init|rk_use} tag_send from host memory length 67108864 rendezvous zero-copy fenced write to remote 52% on tcp/lo and 48% on tcp/eth0 23.4 MB/s 2732891.79 us",
                ),
                &tcp,
                4.59,
                0.0,
            ),
            case(
                TagLat,
                hh,
                8,
                Some(
                    "{proto|cb|init} tag_send from host memory length 8 eager zero-copy copy-out tcp/lo 0.1 MB/s 111.60 us",
                ),
                &tcp,
                0.0,
                6.6,
            ),
            case(
                PutBw,
                hh,
                64 * MIB,
                Some("{proto|cb|init} put from host memory length 67108864 zero-copy tcp/lo 11.9 MB/s 5372048.89 us"),
                &tcp,
                1.42,
                0.0,
            ),
            case(
                GetBw,
                hh,
                64 * MIB,
                Some(
                    "{proto|cb|init} get into host memory length 67108864 software emulation tcp/lo 11.9 MB/s 5372112.14 us",
                ),
                &tcp,
                0.81,
                0.0,
            ),
            skipped(TagBw, CC, 64 * MIB),
            skipped(PutBw, CC, 64 * MIB),
        ],
    )
}

/// One process space (default isolation): sysv and cma, all ok.
pub fn same_host_healthy() -> PairReport {
    use TestKind::*;
    let hh = MemoryPair::HOST_HOST;
    let lanes = [lane("sysv", "memory"), lane("posix", "memory"), lane("cma", "memory")];
    report(
        Locality::SameHost,
        "local (isolation=none)",
        ("vm", "vm"),
        vec![hh],
        vec![
            case(
                TagBw,
                hh,
                4096,
                Some(
                    "{cpml|proto} tag_send from host memory length 4096 eager copy-in copy-out sysv/memory 2740.5 MB/s 2.85 us",
                ),
                &lanes,
                2.9,
                0.0,
            ),
            case(
                TagBw,
                hh,
                64 * MIB,
                Some(
                    "{proto|cb|init|rk_use} tag_send from host memory length 67108864 rendezvous zero-copy read from remote cma/memory 11254.9 MB/s 5686.43 us",
                ),
                &lanes,
                6.03,
                0.0,
            ),
            case(
                TagLat,
                hh,
                8,
                Some("{cpml|proto} tag_send from host memory length 8 eager short sysv/memory 74.3 MB/s 0.10 us"),
                &lanes,
                0.0,
                0.31,
            ),
            case(
                PutBw,
                hh,
                64 * MIB,
                Some(
                    "{proto|cb|init} put from host memory length 67108864 zero-copy cma/memory 11143.9 MB/s 5743.08 us",
                ),
                &lanes,
                5.2,
                0.0,
            ),
            case(
                GetBw,
                hh,
                64 * MIB,
                Some(
                    "{proto|cb|init} get into host memory length 67108864 zero-copy cma/memory 11143.7 MB/s 5743.15 us",
                ),
                &lanes,
                5.1,
                0.0,
            ),
        ],
    )
}

/// Two nodes with RoCE: host and GPU memory over rc_mlx5, one GPU case staged (no GPUDirect).
pub fn two_nodes_rdma() -> PairReport {
    use TestKind::*;
    let hh = MemoryPair::HOST_HOST;
    let lanes = [
        lane("rc_mlx5", "mlx5_0:1"),
        lane("cuda_copy", "cuda"),
        lane("tcp", "eth0"),
    ];
    report(
        Locality::DifferentHosts,
        "kubernetes",
        ("gpu-node-1", "gpu-node-2"),
        vec![hh, CC],
        vec![
            case(
                TagBw,
                hh,
                4096,
                Some("tag_send from host memory length 4096 eager zero-copy copy-out rc_mlx5/mlx5_0:1"),
                &lanes,
                3.1,
                0.0,
            ),
            case(
                TagBw,
                hh,
                64 * MIB,
                Some(
                    "tag_send from host memory length 67108864 rendezvous zero-copy read from remote rc_mlx5/mlx5_0:1",
                ),
                &lanes,
                11.6,
                0.0,
            ),
            case(
                PutBw,
                CC,
                4096,
                Some("put from cuda memory length 4096 zero-copy rc_mlx5/mlx5_0:1"),
                &lanes,
                2.4,
                0.0,
            ),
            case(
                PutBw,
                CC,
                64 * MIB,
                Some("put from cuda memory length 67108864 zero-copy rc_mlx5/mlx5_0:1"),
                &lanes,
                11.2,
                0.0,
            ),
            case(
                TagBw,
                CC,
                64 * MIB,
                Some("tag_send from cuda memory length 67108864 rendezvous pipeline cuda_copy/cuda, rc_mlx5/mlx5_0:1"),
                &lanes,
                9.4,
                0.0,
            ),
            case(
                TagLat,
                hh,
                8,
                Some("tag_send from host memory length 8 eager short rc_mlx5/mlx5_0:1"),
                &lanes,
                0.0,
                1.9,
            ),
        ],
    )
}

pub fn probe_env() -> ProbeReport {
    let check = |id: &str, status: Status, detail: &str, scope: Option<&str>, hint: Option<&str>| Check {
        id: id.into(),
        status,
        detail: detail.into(),
        scope: scope.map(str::to_string),
        hint: hint.map(str::to_string),
    };
    ProbeReport::new(
        "env",
        "recipes/disagg.yaml",
        vec![
            check(
                "env.ucx_tls.tcp_only",
                Status::Fail,
                "UCX_TLS=tcp leaves no RDMA or shared-memory transport",
                Some("prefill"),
                Some("set UCX_TLS=rc_x,rc,dc_x,dc,cuda_copy,cuda_ipc"),
            ),
            check(
                "env.ucx_rndv_scheme",
                Status::Warn,
                "UCX_RNDV_SCHEME=get_zcopy on EFA <crashes> & kernel 6.8",
                Some("decode"),
                None,
            ),
            check("env.nixl_backend", Status::Ok, "NIXL backend UCX", None, None),
            check(
                "node.gpu_direct",
                Status::Skipped,
                "no GPU on this node",
                Some("node/vm"),
                None,
            ),
        ],
        vec!["ic-bench pair --local --isolation pod".into()],
    )
}
