use super::*;
use crate::classify::proto_tables::{parse, receive_view, send_view};

/// The receiver's `ucp_worker_print_info` with UCX_RNDV_SCHEME=put_zcopy and with UCX's default
/// scheme, each with the sender's request info string for the same 1 MiB messages, and the
/// sender's own log against a put_zcopy receiver (UCX 1.22, this machine).
const PUT: &str = include_str!("../../tests/fixtures/ucx/receiver-print-info-rndv-put_zcopy.txt");
const GET: &str = include_str!("../../tests/fixtures/ucx/receiver-print-info-rndv-auto.txt");
const SEND: &str = include_str!("../../tests/fixtures/ucx/sender-log-rndv-put_zcopy.txt");
const MIB: u64 = 1 << 20;
const HOST: MemoryPair = MemoryPair::HOST_HOST;

fn lane(transport: &str, device: &str) -> Lane {
    Lane {
        transport: transport.into(),
        device: device.into(),
    }
}

fn cma() -> Vec<Lane> {
    vec![lane("cma", "memory")]
}

/// An intra-node endpoint's lanes: shared memory for messages, cma for zero-copy, tcp beside.
fn intra_node() -> Vec<Lane> {
    vec![lane("sysv", "memory"), lane("cma", "memory"), lane("tcp", "lo")]
}

/// The sender's request info string as the fixture recorded it.
fn sender_info(fixture: &str) -> &str {
    let line = fixture
        .lines()
        .find_map(|l| l.strip_prefix("sender request info: "))
        .expect("the fixture records the sender's info string");
    line.trim_matches('\'')
}

fn views<'a>(receive: Option<&'a ProtocolView>, send: Option<&'a ProtocolView>) -> TagViews<'a> {
    TagViews { receive, send }
}

#[test]
fn get_scheme_the_receivers_fetch_row_names_the_path() {
    let get = receive_view(&parse(GET), HOST, MIB).unwrap();
    // A data send table the sender kept from another message does not outvote the receiver.
    let stale = send_view(&parse(SEND), HOST, MIB).unwrap();
    let ev = classify_tag(Some(sender_info(GET)), &cma(), HOST, views(Some(&get), Some(&stale)));
    assert_eq!(ev.chosen_by, Some(ProtocolSide::Target));
    assert_eq!(ev.data_path.protocol, "rendezvous zero-copy read");
    assert_eq!(ev.data_path.class, TransportClass::Cma);
    assert_eq!(ev.data_path.source, EvidenceSource::ProtoInfo);
    // Both sides named the read: no other view.
    assert!(ev.other_view.is_none(), "{ev:?}");
    assert_eq!(ev.views_note(), None);
}

#[test]
fn put_scheme_the_senders_data_send_row_names_the_path() {
    let info = sender_info(PUT);
    // The old bug: the sender's request names the read it guessed, though the bytes were written.
    let old = crate::classify::classify(Some(info), &cma(), HOST);
    assert_eq!(old.data_path.protocol, "rendezvous zero-copy read");
    let receive = receive_view(&parse(PUT), HOST, MIB).unwrap();
    assert!(receive.depends_on_peer, "the receiver's put row is a (?) one");
    let send = send_view(&parse(SEND), HOST, MIB).unwrap();
    let ev = classify_tag(Some(info), &cma(), HOST, views(Some(&receive), Some(&send)));
    assert_eq!(ev.chosen_by, Some(ProtocolSide::Initiator));
    assert_eq!(ev.data_path.protocol, "rendezvous zero-copy flushed write");
    assert_eq!(ev.data_path.class, TransportClass::Cma);
    assert_eq!(ev.data_path.transports, cma());
    assert_eq!(ev.data_path.source, EvidenceSource::ProtoInfo);
    assert_eq!(
        ev.protocol.as_deref(),
        Some("rendezvous zero-copy flushed write cma/memory")
    );
    // The receiver's (?) row guessed the same write: dropped, nothing differs.
    assert!(ev.other_view.is_none(), "{ev:?}");

    // Where the receiver's guess differs from what the sender did, it is kept beside the path.
    let fragments = send_view(&parse(SEND), HOST, 2000).unwrap();
    let ev = classify_tag(Some(info), &intra_node(), HOST, views(Some(&receive), Some(&fragments)));
    assert_eq!(ev.chosen_by, Some(ProtocolSide::Initiator));
    assert_eq!(ev.data_path.class, TransportClass::SharedMemory);
    let other = ev.other_view.clone().expect("the receiver guessed a write");
    assert_eq!(other.side, ProtocolSide::Target);
    assert_eq!(other.protocol, "rendezvous zero-copy flushed write");
    assert!(other.depends_on_peer);
    assert_eq!(
        ev.views_note().as_deref(),
        Some("initiator chose; target named rendezvous zero-copy flushed write, cma/memory")
    );
}

#[test]
fn neither_table_leaves_the_path_not_known() {
    let info = sender_info(PUT);
    let receive = receive_view(&parse(PUT), HOST, MIB).unwrap();
    let send = send_view(&parse(SEND), HOST, MIB).unwrap();
    // The receiver had the sender write, but the sender's table is missing: the receiver's (?)
    // row is kept as the guess it is, and the path is not known.
    let ev = classify_tag(Some(info), &intra_node(), HOST, views(Some(&receive), None));
    assert_eq!(ev.chosen_by, None);
    assert_eq!(ev.data_path.class, TransportClass::Unknown);
    assert_eq!(ev.data_path.source, EvidenceSource::None);
    assert!(ev.data_path.transports.is_empty());
    let other = ev.other_view.clone().expect("the guess is kept");
    assert_eq!(other.side, ProtocolSide::Target);
    assert!(other.depends_on_peer);
    assert_eq!(
        ev.views_note().as_deref(),
        Some("the choosing side is not known; target named rendezvous zero-copy flushed write, cma/memory")
    );
    // No receiver view (an older server, a hidden table): the sender's table alone proves
    // nothing for this case, and its request's (?) row is a guess.
    for send in [None, Some(&send)] {
        let ev = classify_tag(Some(info), &intra_node(), HOST, views(None, send));
        assert_eq!(ev.chosen_by, None);
        assert_eq!(ev.data_path.class, TransportClass::Unknown, "{ev:?}");
        let other = ev.other_view.expect("the sender's guess is kept");
        assert_eq!(other.side, ProtocolSide::Initiator);
        assert_eq!(other.protocol, "rendezvous zero-copy read");
        assert!(other.depends_on_peer);
    }
    // A (?) row in the sender's own table is a guess too.
    let guessing = ProtocolView {
        depends_on_peer: true,
        ..send.clone()
    };
    let ev = classify_tag(Some(info), &intra_node(), HOST, views(Some(&receive), Some(&guessing)));
    assert_eq!(ev.data_path.class, TransportClass::Unknown);
    assert_eq!(ev.chosen_by, None);
}

#[test]
fn a_path_not_known_over_nothing_but_tcp_is_still_tcp() {
    let info = "tag_send from host memory length 1048576 rendezvous fragmented copy-in copy-out tcp/lo";
    let tcp = vec![lane("tcp", "lo")];
    let ev = classify_tag(Some(info), &tcp, HOST, views(None, None));
    assert_eq!(ev.chosen_by, None);
    assert_eq!(ev.data_path.class, TransportClass::Tcp);
    assert_eq!(ev.data_path.source, EvidenceSource::EndpointLanes);
    assert!(ev.other_view.is_some());
}

#[test]
fn eager_is_the_senders_request_whatever_the_tables_say() {
    let receive = receive_view(&parse(PUT), HOST, MIB).unwrap();
    let send = send_view(&parse(SEND), HOST, MIB).unwrap();
    let eager = "tag_send from host memory length 64 eager short sysv/memory";
    for v in [views(None, None), views(Some(&receive), Some(&send))] {
        let ev = classify_tag(Some(eager), &intra_node(), HOST, v);
        assert_eq!(ev.chosen_by, Some(ProtocolSide::Initiator));
        assert_eq!(ev.data_path.class, TransportClass::SharedMemory);
        assert_eq!(ev.data_path.source, EvidenceSource::RequestInfo);
        assert!(ev.other_view.is_none());
    }
    // No request info at all: the lanes, and nobody named as choosing.
    let ev = classify_tag(None, &cma(), HOST, views(Some(&receive), Some(&send)));
    assert_eq!(ev.chosen_by, None);
    assert_eq!(ev.data_path.source, EvidenceSource::EndpointLanes);
}

#[test]
fn rma_is_the_initiators_request() {
    let info = "put from host memory length 4194304 zero-copy cma/memory";
    let ev = classify_case(TestKind::PutBw, Some(info), &cma(), HOST, TagViews::default());
    assert_eq!(ev.chosen_by, Some(ProtocolSide::Initiator));
    assert_eq!(ev.data_path.class, TransportClass::Cma);
}
