use super::*;
use crate::model::{Lane, MemoryType, TransportClass};

/// The receiver's `ucp_worker_print_info` with UCX_RNDV_SCHEME=put_zcopy, and the sender's request
/// info string for the same 1 MiB messages (UCX 1.22, this machine).
const PUT: &str = include_str!("../../tests/fixtures/ucx/receiver-print-info-rndv-put_zcopy.txt");
/// The same with UCX's default scheme (the receiver reads).
const GET: &str = include_str!("../../tests/fixtures/ucx/receiver-print-info-rndv-auto.txt");
/// The sender's log (`UCX_PROTO_INFO=y`) against a receiver on UCX_RNDV_SCHEME=put_zcopy, 4 MiB.
const SEND: &str = include_str!("../../tests/fixtures/ucx/sender-log-rndv-put_zcopy.txt");
const MIB: u64 = 1 << 20;

fn cma() -> Vec<Lane> {
    vec![Lane {
        transport: "cma".into(),
        device: "memory".into(),
    }]
}

#[test]
fn the_receivers_fetch_tables_are_parsed_and_empty_variants_dropped() {
    let tables = parse(PUT);
    assert_eq!(tables.len(), 2, "{tables:?}");
    assert!(tables.iter().all(|t| t.operation.starts_with("rendezvous data fetch")));
    assert_eq!(tables[0].rows[1].min, 1);
    assert_eq!(tables[0].rows[1].max, u64::MAX);
    assert_eq!(tables[0].rows[1].description, "(?) zero-copy flushed write to remote");
    assert_eq!(parse_range("8K..8K"), Some((8192, 8192)));
}

#[test]
fn a_put_scheme_receiver_says_the_sender_writes() {
    let view = receive_view(&parse(PUT), MemoryPair::HOST_HOST, MIB).expect("the receiver's view");
    assert_eq!(view.side, ProtocolSide::Target);
    assert_eq!(view.protocol, "rendezvous zero-copy flushed write");
    assert_eq!(view.transports, cma());
    assert_eq!(view.class, TransportClass::Cma);
    assert!(view.depends_on_peer, "UCX marks the put row (?)");
}

#[test]
fn a_get_scheme_receiver_reads_and_disagreeing_tables_name_both() {
    let tables = parse(GET);
    let view = receive_view(&tables, MemoryPair::HOST_HOST, MIB).unwrap();
    assert_eq!(view.protocol, "rendezvous zero-copy read");
    assert!(!view.depends_on_peer);
    // 2000 bytes: the (multi) table fragments over sysv, the plain one reads over cma.
    let small = receive_view(&tables, MemoryPair::HOST_HOST, 2000).unwrap();
    assert_eq!(small.class, TransportClass::SharedMemory, "the worse class: {small:?}");
    assert!(
        small.protocol.contains("fragmented copy-in copy-out") && small.protocol.contains(" or "),
        "{small:?}"
    );
}

#[test]
fn no_view_for_other_memory_or_an_empty_message() {
    let tables = parse(PUT);
    let cuda_target = MemoryPair {
        initiator: MemoryType::Host,
        target: MemoryType::Cuda,
    };
    assert!(receive_view(&tables, cuda_target, MIB).is_none());
    // "no data fetch" names no transport.
    assert!(receive_view(&tables, MemoryPair::HOST_HOST, 0).is_none());
    assert!(receive_view(&[], MemoryPair::HOST_HOST, MIB).is_none());
    // A sender's table is not a receiver's.
    let send = "| ep cfg#0 |\n| rendezvous data send(multi) from host memory to host |\n| Range | Description | Config |\n| 0..inf | zero-copy flushed write to remote | cma/memory |\n";
    assert!(receive_view(&parse(send), MemoryPair::HOST_HOST, MIB).is_none());
}

#[test]
fn a_sender_asked_to_send_says_it_wrote() {
    let tables = parse(SEND);
    assert_eq!(
        tables.len(),
        4,
        "three tag_send tables and one data send table: {tables:?}"
    );
    let view = send_view(&tables, MemoryPair::HOST_HOST, 4 * MIB).expect("the sender's view");
    assert_eq!(view.side, ProtocolSide::Initiator);
    assert_eq!(view.protocol, "rendezvous zero-copy flushed write");
    assert_eq!(view.transports, cma());
    assert_eq!(view.class, TransportClass::Cma);
    assert!(!view.depends_on_peer, "the sender's own row is no guess");
    // Below 3965 bytes the sender fragments over sysv.
    let small = send_view(&tables, MemoryPair::HOST_HOST, 2000).unwrap();
    assert_eq!(small.protocol, "rendezvous fragmented copy-in copy-out");
    assert_eq!(small.class, TransportClass::SharedMemory);
}

#[test]
fn a_send_view_needs_a_data_send_table_for_the_cases_memory() {
    let tables = parse(SEND);
    let to_gpu = MemoryPair {
        initiator: MemoryType::Host,
        target: MemoryType::Cuda,
    };
    assert!(send_view(&tables, to_gpu, MIB).is_none());
    // The tag_send tables' (?) rows are not a send view, nor is a receiver's fetch table.
    let tag_send_only: Vec<ProtoTable> = tables
        .iter()
        .filter(|t| !t.operation.starts_with("rendezvous data send"))
        .cloned()
        .collect();
    assert!(send_view(&tag_send_only, MemoryPair::HOST_HOST, MIB).is_none());
    assert!(send_view(&parse(PUT), MemoryPair::HOST_HOST, MIB).is_none());
    assert!(send_view(&parse(GET), MemoryPair::HOST_HOST, MIB).is_none());
    // A fetch view is not read out of a sender's tables either.
    assert!(receive_view(&tables, MemoryPair::HOST_HOST, MIB).is_none());
    // GPU memory as UCX names it: `from cuda/GPU0 memory to host`.
    let gpu = "| ep cfg#1 |\n| rendezvous data send(multi) from cuda/GPU0 memory to host |\n| Range | Description | Config |\n| 0..inf | zero-copy flushed write to remote | rc_mlx5/mlx5_0:1 |\n";
    let from_gpu = MemoryPair {
        initiator: MemoryType::Cuda,
        target: MemoryType::Host,
    };
    let view = send_view(&parse(gpu), from_gpu, MIB).expect("a GPU sender's view");
    assert_eq!(view.class, TransportClass::Rdma);
    assert!(send_view(&parse(gpu), MemoryPair::HOST_HOST, MIB).is_none());
}
