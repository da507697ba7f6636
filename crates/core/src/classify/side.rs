//! Whose view a tag case's row names: the side that chose the protocol.
//!
//! An eager message's protocol is the sender's choice, and its request's info string says it.
//! A rendezvous message's is the receiver's: the sender's request names the row UCX marks `(?)`
//! ("rendezvous zero-copy read", what the sender assumes the receiver will do), and says the same
//! when the receiver, on `UCX_RNDV_SCHEME=put_zcopy`, has the sender write the data instead, or
//! when a GPU receiver pipelines it through cuda_copy. So a rendezvous case takes the receiver's
//! own view ([`super::proto_tables::receive_view`]) where it reported one, and keeps the sender's
//! as `other_view` when the two differ.

use super::{classify, parse_protocol_info};
use crate::model::{
    DataPath, EvidenceSource, Lane, MemoryPair, ProtocolSide, ProtocolView, TestKind, TransportEvidence,
};

/// A UCX-engine case's evidence: [`classify_tag`] for tag tests; for RMA the initiator's request
/// (it alone chooses how its put or get moves).
pub fn classify_case(
    test: TestKind,
    initiator_info: Option<&str>,
    lanes: &[Lane],
    memory: MemoryPair,
    receiver: Option<&ProtocolView>,
) -> TransportEvidence {
    if !test.is_rma() {
        return classify_tag(initiator_info, lanes, memory, receiver);
    }
    let mut evidence = classify(initiator_info, lanes, memory);
    if evidence.data_path.source == EvidenceSource::RequestInfo {
        evidence.chosen_by = Some(ProtocolSide::Initiator);
    }
    evidence
}

/// The evidence of a tag case from the sender's request info string (`sender_info`), its
/// endpoint's lanes and, where the receiver reported it, the receiver's own view. A rendezvous
/// message whose receiver reported nothing keeps the sender's view with `chosen_by` absent: the
/// choice is not known.
pub fn classify_tag(
    sender_info: Option<&str>,
    lanes: &[Lane],
    memory: MemoryPair,
    receiver: Option<&ProtocolView>,
) -> TransportEvidence {
    let mut evidence = classify(sender_info, lanes, memory);
    let Some(parsed) = sender_info.and_then(parse_protocol_info) else {
        return evidence;
    };
    if !parsed.is_rendezvous() {
        evidence.chosen_by = Some(ProtocolSide::Initiator);
        return evidence;
    }
    let Some(receiver) = receiver else {
        return evidence;
    };
    let sender = ProtocolView {
        side: ProtocolSide::Initiator,
        protocol: evidence.data_path.protocol.clone(),
        transports: evidence.data_path.transports.clone(),
        class: evidence.data_path.class,
        // The sender's rendezvous row is always the receiver's to decide.
        depends_on_peer: true,
    };
    let differ = sender.protocol != receiver.protocol || sender.transports != receiver.transports;
    evidence.other_view = differ.then_some(sender);
    evidence.protocol = Some(receiver_text(receiver));
    evidence.data_path = DataPath {
        class: receiver.class,
        transports: receiver.transports.clone(),
        protocol: receiver.protocol.clone(),
        source: EvidenceSource::ProtoInfo,
    };
    evidence.chosen_by = Some(ProtocolSide::Target);
    evidence
}

/// The receiver's view as one line, as a request's info string reads: `rendezvous zero-copy
/// flushed write cma/memory`.
fn receiver_text(view: &ProtocolView) -> String {
    let lanes = super::join_lanes(&view.transports);
    if lanes.is_empty() {
        view.protocol.clone()
    } else {
        format!("{} {lanes}", view.protocol)
    }
}
