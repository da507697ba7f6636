use super::*;
use crate::classify::classify_tag;
use crate::model::{EvidenceSource, Lane, MemoryType, TransportClass};

/// The receiver's `ucp_worker_print_info` with UCX_RNDV_SCHEME=put_zcopy, and the sender's request
/// info string for the same 1 MiB messages (UCX 1.22, this machine).
const PUT: &str = include_str!("../../tests/fixtures/ucx/receiver-print-info-rndv-put_zcopy.txt");
/// The same with UCX's default scheme (the receiver reads).
const GET: &str = include_str!("../../tests/fixtures/ucx/receiver-print-info-rndv-auto.txt");
const MIB: u64 = 1 << 20;

fn cma() -> Vec<Lane> {
    vec![Lane {
        transport: "cma".into(),
        device: "memory".into(),
    }]
}

/// The sender's request info string as the fixture recorded it.
fn sender_info(fixture: &str) -> &str {
    let line = fixture
        .lines()
        .find_map(|l| l.strip_prefix("sender request info: "))
        .expect("the fixture records the sender's info string");
    line.trim_matches('\'')
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
fn a_rendezvous_row_names_the_receivers_choice_and_keeps_the_senders_when_they_differ() {
    let info = sender_info(PUT);
    // The bug: the sender's request names the read it guessed, though the bytes were written.
    let old = crate::classify::classify(Some(info), &cma(), MemoryPair::HOST_HOST);
    assert_eq!(old.data_path.protocol, "rendezvous zero-copy read");
    let view = receive_view(&parse(PUT), MemoryPair::HOST_HOST, MIB).unwrap();
    let ev = classify_tag(Some(info), &cma(), MemoryPair::HOST_HOST, Some(&view));
    assert_eq!(ev.chosen_by, Some(ProtocolSide::Target));
    assert_eq!(ev.data_path.protocol, "rendezvous zero-copy flushed write");
    assert_eq!(ev.data_path.class, TransportClass::Cma);
    assert_eq!(ev.data_path.source, EvidenceSource::ProtoInfo);
    assert_eq!(
        ev.protocol.as_deref(),
        Some("rendezvous zero-copy flushed write cma/memory")
    );
    assert_eq!(
        ev.views_note().as_deref(),
        Some("target chose; initiator named rendezvous zero-copy read, cma/memory")
    );
    let other = ev.other_view.expect("the views differ");
    assert_eq!(other.side, ProtocolSide::Initiator);
    assert_eq!(other.protocol, "rendezvous zero-copy read");
    // With the default scheme both sides agree: no other view.
    let get = receive_view(&parse(GET), MemoryPair::HOST_HOST, MIB).unwrap();
    let ev = classify_tag(Some(sender_info(GET)), &cma(), MemoryPair::HOST_HOST, Some(&get));
    assert_eq!(ev.chosen_by, Some(ProtocolSide::Target));
    assert_eq!(ev.data_path.protocol, "rendezvous zero-copy read");
    assert!(ev.other_view.is_none(), "{ev:?}");
    assert_eq!(ev.views_note(), None);
}

#[test]
fn eager_is_the_senders_choice_and_an_unreported_rendezvous_is_not_known() {
    let view = receive_view(&parse(PUT), MemoryPair::HOST_HOST, MIB).unwrap();
    let eager = "tag_send from host memory length 64 eager short sysv/memory";
    let ev = classify_tag(Some(eager), &cma(), MemoryPair::HOST_HOST, Some(&view));
    assert_eq!(ev.chosen_by, Some(ProtocolSide::Initiator));
    assert_eq!(ev.data_path.class, TransportClass::SharedMemory);
    assert!(ev.other_view.is_none());
    let ev = classify_tag(Some(sender_info(PUT)), &cma(), MemoryPair::HOST_HOST, None);
    assert_eq!(ev.chosen_by, None, "the receiver did not say what it chose");
    assert_eq!(ev.data_path.source, EvidenceSource::RequestInfo);
    let ev = classify_tag(None, &cma(), MemoryPair::HOST_HOST, Some(&view));
    assert_eq!(ev.chosen_by, None);
    assert_eq!(ev.data_path.source, EvidenceSource::EndpointLanes);
}
