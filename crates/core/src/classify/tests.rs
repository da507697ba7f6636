//! Classification of every lane and protocol shape UCX reports, from recorded evidence.

use super::*;
use crate::model::MemoryType;

fn lane(t: &str, d: &str) -> Lane {
    Lane {
        transport: t.into(),
        device: d.into(),
    }
}

const CUDA_CUDA: MemoryPair = MemoryPair {
    initiator: MemoryType::Cuda,
    target: MemoryType::Cuda,
};

// Strings captured from UCX 1.22 (ucp_request_query on a pending request) on this machine.
const TAG_CMA: &str = "{proto|cb|init|rk_use} tag_send from host memory length 67108864 rendezvous zero-copy \
                       read from remote cma/memory 11254.9 MB/s 5686.43 us";
const TAG_TCP_MULTI: &str = "{proto|cb|init|rk_use} tag_send from host memory length 67108864 rendezvous \
                             zero-copy fenced write to remote 52% on tcp/lo and 48% on tcp/eth0 23.4 MB/s \
                             2732891.79 us";
const PUT_CMA: &str = "{proto|cb|init} put from host memory length 67108864 zero-copy cma/memory 11143.9 MB/s \
                       5743.08 us";
const GET_EMU_TCP: &str = "{proto|cb|init} get into host memory length 67108864 software emulation tcp/lo 11.9 \
                           MB/s 5372112.14 us";
const GET_EMU_SYSV: &str = "{proto|cb|init} get into host memory length 8192 software emulation sysv/memory \
                            2603.5 MB/s 3.00 us";
const TAG_SHORT: &str = "{cpml|proto} tag_send from host memory length 8 eager short sysv/memory 74.3 MB/s 0.10 us";
const TAG_FRAG_POSIX: &str = "{proto|cb|init|rk_use} tag_send from host memory length 67108864 rendezvous \
                              fragmented copy-in copy-out posix/memory 6945.0 MB/s 9215.24 us";

#[test]
fn an_estimate_split_by_a_skipped_token_is_still_stripped() {
    let p = parse_protocol_info("put length 8 11.9 rma_am( MB/s tcp/lo").unwrap();
    assert!(!p.protocol.contains("11.9"), "{p:?}");
    assert!(!p.protocol.contains("MB/s"), "{p:?}");
}

#[test]
fn strips_flags_and_model_estimates() {
    assert_eq!(
        strip_estimates(TAG_CMA),
        "tag_send from host memory length 67108864 rendezvous zero-copy read from remote cma/memory"
    );
    assert_eq!(
        strip_estimates(TAG_TCP_MULTI),
        "tag_send from host memory length 67108864 rendezvous zero-copy fenced write to remote 52% on tcp/lo \
         and 48% on tcp/eth0"
    );
    assert_eq!(strip_estimates("x 12.5GB/s y 3us"), "x y");
    assert!(!strip_estimates(PUT_CMA).contains("MB/s"));
    assert!(!strip_estimates(PUT_CMA).contains("5743"));
}

#[test]
fn parses_the_1_22_format() {
    let p = parse_protocol_info(TAG_CMA).unwrap();
    assert_eq!(p.operation.as_deref(), Some("tag_send"));
    assert_eq!(p.memory.as_deref(), Some("host"));
    assert_eq!(p.length, Some(64 << 20));
    assert_eq!(p.protocol, "rendezvous zero-copy read");
    assert_eq!(p.transports, vec![lane("cma", "memory")]);
    assert!(!p.emulated);

    let g = parse_protocol_info(GET_EMU_TCP).unwrap();
    assert_eq!(g.operation.as_deref(), Some("get"));
    assert_eq!(g.memory.as_deref(), Some("host"));
    assert_eq!(g.protocol, "software emulation");
    assert!(g.emulated);
    assert_eq!(g.transports, vec![lane("tcp", "lo")]);
}

#[test]
fn a_stream_operation_parses_like_a_single_one() {
    // UCX 1.22, a send made with UCP_OP_ATTR_FLAG_MULTI_SEND (the bandwidth loops' hint).
    let stream = "{proto|cb|init|rk_use} tag_send(multi) from host memory length 4194304 \
                  rendezvous zero-copy read from remote cma/memory 11257.6 MB/s 355.32 us";
    let p = parse_protocol_info(stream).unwrap();
    assert_eq!(p.operation.as_deref(), Some("tag_send"));
    assert_eq!(p.length, Some(4 << 20));
    assert_eq!(p.protocol, "rendezvous zero-copy read");
    assert_eq!(p.transports, vec![lane("cma", "memory")]);
    let single = stream.replace("tag_send(multi)", "tag_send");
    assert_eq!(data_path_from_info(stream), data_path_from_info(&single));
}

#[test]
fn table_of_info_strings() {
    use TransportClass::*;
    type Row<'a> = (&'a str, TransportClass, &'a str, &'a [(&'a str, &'a str)]);
    let cases: &[Row] = &[
        (TAG_CMA, Cma, "rendezvous zero-copy read", &[("cma", "memory")]),
        (PUT_CMA, Cma, "zero-copy", &[("cma", "memory")]),
        (
            TAG_TCP_MULTI,
            Tcp,
            "rendezvous zero-copy fenced write",
            &[("tcp", "lo"), ("tcp", "eth0")],
        ),
        (GET_EMU_TCP, RmaEmulated, "software emulation", &[("tcp", "lo")]),
        (GET_EMU_SYSV, RmaEmulated, "software emulation", &[("sysv", "memory")]),
        (TAG_SHORT, SharedMemory, "eager short", &[("sysv", "memory")]),
        (
            TAG_FRAG_POSIX,
            SharedMemory,
            "rendezvous fragmented copy-in copy-out",
            &[("posix", "memory")],
        ),
        (
            "tag_send from host memory length 8 eager zero-copy copy-out tcp/lo 0.1 MB/s 111.60 us",
            Tcp,
            "eager zero-copy copy-out",
            &[("tcp", "lo")],
        ),
        (
            "tag_send from host memory length 4194304 rendezvous fragmented copy-in copy-out tcp/lo",
            Tcp,
            "rendezvous fragmented copy-in copy-out",
            &[("tcp", "lo")],
        ),
        (
            "rendezvous zero-copy fenced write to remote tcp/lo",
            Tcp,
            "rendezvous zero-copy fenced write",
            &[("tcp", "lo")],
        ),
        (
            "eager short sysv/memory",
            SharedMemory,
            "eager short",
            &[("sysv", "memory")],
        ),
        // UCX_PROTO_INFO=y table row.
        (
            "|  5029..inf | (?) rendezvous zero-copy read from remote | cma/memory  |",
            Cma,
            "rendezvous zero-copy read",
            &[("cma", "memory")],
        ),
        (
            "put from cuda memory length 67108864 zero-copy rc_mlx5/mlx5_0:1 45000.0 MB/s 1500.0 us",
            Rdma,
            "zero-copy",
            &[("rc_mlx5", "mlx5_0:1")],
        ),
        (
            "tag_send from cuda memory length 67108864 rendezvous zero-copy read from remote cuda_ipc/cuda",
            CudaIpc,
            "rendezvous zero-copy read",
            &[("cuda_ipc", "cuda")],
        ),
        (
            "tag_send from cuda memory length 67108864 rendezvous pipeline cuda_copy/cuda and tcp/eth0",
            Tcp,
            "rendezvous pipeline",
            &[("cuda_copy", "cuda"), ("tcp", "eth0")],
        ),
        (
            "tag_send from cuda memory length 67108864 rendezvous pipeline cuda_copy/cuda, rc_mlx5/mlx5_0:1",
            CudaCopyStaging,
            "rendezvous pipeline",
            &[("cuda_copy", "cuda"), ("rc_mlx5", "mlx5_0:1")],
        ),
        (
            "get into host memory length 1048576 zero-copy dc_mlx5/mlx5_2:1",
            Rdma,
            "zero-copy",
            &[("dc_mlx5", "mlx5_2:1")],
        ),
        (
            "put from host memory length 1048576 zero-copy srd/rdmap0s6:1",
            Rdma,
            "zero-copy",
            &[("srd", "rdmap0s6:1")],
        ),
        (
            "put rma_am(tcp/eth0)",
            RmaEmulated,
            "software RMA emulation",
            &[("tcp", "eth0")],
        ),
        (
            "tag_send from host memory length 8 eager short self/memory",
            SelfLoop,
            "eager short",
            &[("self", "memory")],
        ),
        // A VLAN device keeps its dot in the 1.22 format.
        (
            "put from host memory length 8 zero-copy tcp/eth0.100",
            Tcp,
            "zero-copy",
            &[("tcp", "eth0.100")],
        ),
        // 1.13 (old protocol layer).
        (
            "send length 8 tag lane[0]: 2:sysv/memory.0 eager short",
            SharedMemory,
            "eager short",
            &[("sysv", "memory")],
        ),
        (
            "rndv lane[1]: 4:tcp/eth0.1 zcopy",
            Tcp,
            "rndv zcopy",
            &[("tcp", "eth0")],
        ),
    ];
    for (info, class, protocol, lanes) in cases {
        let dp = data_path_from_info(info).unwrap_or_else(|| panic!("no data path from {info:?}"));
        assert_eq!(dp.class, *class, "class of {info:?}");
        assert_eq!(dp.protocol, *protocol, "protocol of {info:?}");
        let want: Vec<Lane> = lanes.iter().map(|(t, d)| lane(t, d)).collect();
        assert_eq!(dp.transports, want, "transports of {info:?}");
        assert_eq!(dp.source, EvidenceSource::RequestInfo);
    }
}

#[test]
fn nothing_usable_gives_none() {
    for info in [
        "",
        "   ",
        "<no debug info>",
        "{proto} ",
        "recv length 67108864 host memory",
        "12.5 MB/s 3 us",
    ] {
        assert_eq!(data_path_from_info(info), None, "{info:?}");
    }
}

#[test]
fn lanes_tcp_backup_is_not_the_data_path() {
    // hostIPC: separate PID namespaces, shared IPC: UCX lists sysv plus a tcp lane.
    let lanes = [lane("sysv", "memory"), lane("tcp", "lo"), lane("tcp", "eth0")];
    let dp = data_path_from_lanes(&lanes, MemoryPair::HOST_HOST);
    assert_eq!(dp.class, TransportClass::SharedMemory);
    assert_eq!(dp.transports, vec![lane("sysv", "memory")]);
    assert_eq!(dp.source, EvidenceSource::EndpointLanes);

    let dp = data_path_from_lanes(
        &[lane("sysv", "memory"), lane("posix", "memory"), lane("cma", "memory")],
        MemoryPair::HOST_HOST,
    );
    assert_eq!(dp.class, TransportClass::Cma);
    assert_eq!(dp.transports.len(), 3);

    let dp = data_path_from_lanes(
        &[lane("tcp", "eth0"), lane("rc_mlx5", "mlx5_0:1")],
        MemoryPair::HOST_HOST,
    );
    assert_eq!(dp.class, TransportClass::Rdma);
    assert_eq!(dp.transports, vec![lane("rc_mlx5", "mlx5_0:1")]);
}

#[test]
fn lanes_tcp_only_is_tcp() {
    let dp = data_path_from_lanes(&[lane("tcp", "lo"), lane("tcp", "eth0")], MemoryPair::HOST_HOST);
    assert_eq!(dp.class, TransportClass::Tcp);
    assert_eq!(dp.transports.len(), 2);
}

#[test]
fn lanes_for_cuda_memory() {
    let ipc = [lane("cuda_copy", "cuda"), lane("cuda_ipc", "cuda"), lane("tcp", "lo")];
    assert_eq!(data_path_from_lanes(&ipc, CUDA_CUDA).class, TransportClass::CudaIpc);
    let rdma = [
        lane("cuda_copy", "cuda"),
        lane("rc_mlx5", "mlx5_0:1"),
        lane("tcp", "eth0"),
    ];
    assert_eq!(data_path_from_lanes(&rdma, CUDA_CUDA).class, TransportClass::Rdma);
    // Seed 002: pods that cannot see each other's GPUs, staging over tcp.
    let staged_tcp = [lane("cuda_copy", "cuda"), lane("tcp", "eth0")];
    let dp = data_path_from_lanes(&staged_tcp, CUDA_CUDA);
    assert_eq!(dp.class, TransportClass::Tcp);
    assert_eq!(dp.transports, vec![lane("cuda_copy", "cuda"), lane("tcp", "eth0")]);
    let staged_shm = [lane("cuda_copy", "cuda"), lane("sysv", "memory"), lane("tcp", "lo")];
    let dp = data_path_from_lanes(&staged_shm, CUDA_CUDA);
    assert_eq!(dp.class, TransportClass::CudaCopyStaging);
    assert_eq!(dp.transports, vec![lane("cuda_copy", "cuda"), lane("sysv", "memory")]);
    // The same lanes with host memory ignore the cuda lanes.
    assert_eq!(
        data_path_from_lanes(&staged_shm, MemoryPair::HOST_HOST).class,
        TransportClass::SharedMemory
    );
}

#[test]
fn lanes_edge_cases() {
    assert_eq!(
        data_path_from_lanes(&[], MemoryPair::HOST_HOST).source,
        EvidenceSource::None
    );
    assert_eq!(
        data_path_from_lanes(&[lane("self", "memory")], MemoryPair::HOST_HOST).class,
        TransportClass::SelfLoop
    );
    assert_eq!(
        data_path_from_lanes(&[lane("ugni", "x")], MemoryPair::HOST_HOST).class,
        TransportClass::Unknown
    );
}

#[test]
fn info_wins_over_lanes_and_lanes_are_the_fallback() {
    let lanes = [lane("sysv", "memory"), lane("tcp", "lo")];
    let ev = classify(Some(GET_EMU_SYSV), &lanes, MemoryPair::HOST_HOST);
    assert_eq!(ev.data_path.class, TransportClass::RmaEmulated);
    assert_eq!(
        ev.protocol.as_deref(),
        Some("get into host memory length 8192 software emulation sysv/memory")
    );
    assert_eq!(ev.lanes, lanes.to_vec());

    let ev = classify(Some("<no debug info>"), &lanes, MemoryPair::HOST_HOST);
    assert_eq!(ev.protocol, None);
    assert_eq!(ev.data_path.class, TransportClass::SharedMemory);
    assert_eq!(ev.data_path.source, EvidenceSource::EndpointLanes);

    let ev = classify(None, &[], MemoryPair::HOST_HOST);
    assert_eq!(ev.data_path.class, TransportClass::Unknown);
    assert_eq!(ev.data_path.source, EvidenceSource::None);
    assert_eq!(ev.protocol, None);
}

#[test]
fn one_liners() {
    let dp = data_path_from_info(TAG_CMA).unwrap();
    assert_eq!(
        describe(TestKind::TagBw, MemoryPair::HOST_HOST, 64 << 20, &dp),
        "tag 64 MiB host→host: rendezvous zero-copy read, cma/memory"
    );
    let dp = data_path_from_info(TAG_TCP_MULTI).unwrap();
    assert_eq!(
        describe(TestKind::TagLat, MemoryPair::HOST_HOST, 8, &dp),
        "tag 8 B host→host: rendezvous zero-copy fenced write, tcp/lo, tcp/eth0"
    );
    let dp = data_path_from_lanes(&[lane("sysv", "memory"), lane("tcp", "lo")], MemoryPair::HOST_HOST);
    assert_eq!(
        describe(TestKind::PutBw, MemoryPair::HOST_HOST, 4096, &dp),
        "put 4 KiB host→host: sysv/memory (endpoint lanes, shared memory)"
    );
    let dp = data_path_from_lanes(&[], CUDA_CUDA);
    assert!(describe(TestKind::GetBw, CUDA_CUDA, 8, &dp).starts_with("get 8 B cuda→cuda: transport unknown"));
}

proptest::proptest! {
    #[test]
    fn random_strings_never_panic(s in "\\PC*") {
        let _ = strip_estimates(&s);
        let _ = parse_protocol_info(&s);
        let _ = classify(Some(&s), &[], MemoryPair::HOST_HOST);
    }

    #[test]
    fn info_like_strings_never_panic_and_keep_no_estimates(
        words in proptest::collection::vec(
            proptest::sample::select(vec![
                "tag_send", "from", "into", "host", "cuda", "memory", "length", "67108864", "rendezvous",
                "zero-copy", "read", "remote", "cma/memory", "tcp/lo", "2:sysv/memory.0", "lane[0]:", "52%",
                "on", "and", "11.9", "MB/s", "3.0", "us", "{proto|cb}", "software", "emulation", "rma_am(",
                ")", "/", ":", "..", "|", "µs", "ü/é",
            ]),
            0..24,
        )
    ) {
        let s = words.join(" ");
        let stripped = strip_estimates(&s);
        if let Some(p) = parse_protocol_info(&s) {
            proptest::prop_assert!(!p.protocol.contains("11.9 MB/s") && !p.protocol.contains("3.0 us"));
            for l in &p.transports {
                proptest::prop_assert!(!l.transport.is_empty() && !l.device.is_empty());
            }
        }
        let toks: Vec<&str> = stripped.split_whitespace().collect();
        for w in toks.windows(2) {
            proptest::prop_assert!(!(is_number(w[0]) && !w[0].ends_with('%') && ESTIMATE_UNITS.contains(&w[1])), "{stripped}");
        }
    }
}
