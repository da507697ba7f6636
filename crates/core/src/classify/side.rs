//! Whose view a tag case's row names: the side that moved its bytes.
//!
//! An eager message's protocol is the sender's choice, and its request's info string says it.
//! A rendezvous message's is the receiver's: the sender's request names the row UCX marks `(?)`
//! ("rendezvous zero-copy read", what the sender assumes the receiver will do), and says the same
//! when the receiver, on `UCX_RNDV_SCHEME=put_zcopy`, has the sender write the data instead, or
//! when a GPU receiver pipelines it through cuda_copy. The receiver's own "rendezvous data
//! fetch" table ([`super::proto_tables::receive_view`]) says which: a row of its own (it reads)
//! is the data path; a `(?)` row (it has the sender write) only guesses, and the sender's
//! "rendezvous data send" table ([`super::proto_tables::send_view`]) names how the sender did.

use super::{class_of_transport, classify, data_path_from_lanes, parse_protocol_info};
use crate::model::{
    DataPath, EvidenceSource, Lane, MemoryPair, ProtocolSide, ProtocolView, TestKind, TransportClass, TransportEvidence,
};

/// What each side's own protocol tables said about a tag case (either may be absent: an older
/// peer, an older UCX, a user's `UCX_PROTO_INFO` that hides the tables, an eager message).
#[derive(Debug, Clone, Copy, Default)]
pub struct TagViews<'a> {
    /// The receiver's "rendezvous data fetch" rows ([`super::proto_tables::receive_view`]),
    /// reported by the receiving side.
    pub receive: Option<&'a ProtocolView>,
    /// The sender's "rendezvous data send" rows ([`super::proto_tables::send_view`]), read by
    /// the sending side from its own UCX.
    pub send: Option<&'a ProtocolView>,
}

/// A UCX-engine case's evidence: [`classify_tag`] for tag tests; for RMA the initiator's request
/// (it alone chooses how its put or get moves).
pub fn classify_case(
    test: TestKind,
    initiator_info: Option<&str>,
    lanes: &[Lane],
    memory: MemoryPair,
    views: TagViews<'_>,
) -> TransportEvidence {
    if !test.is_rma() {
        return classify_tag(initiator_info, lanes, memory, views);
    }
    let mut evidence = classify(initiator_info, lanes, memory);
    if evidence.data_path.source == EvidenceSource::RequestInfo {
        evidence.chosen_by = Some(ProtocolSide::Initiator);
    }
    evidence
}

/// The evidence of a tag case from the sender's request info string (`sender_info`), its
/// endpoint's lanes and the two sides' own tables (`views`).
///
/// An eager message is the sender's choice: its request says it. A rendezvous message's data
/// path comes from the table of the side that moved the bytes, never from a `(?)` row: the
/// receiver's fetch row where the receiver reads (a get scheme: `chosen_by` target), the
/// sender's data send row where the receiver's row is a `(?)` one that has the sender send (a
/// put scheme: `chosen_by` initiator). The other side's view is kept as `other_view` where it
/// names another protocol or transport. Where neither table says, which side moved the bytes is
/// not known: the class is unknown (the endpoint's lanes name it only when they all have one
/// class, e.g. nothing but tcp), `chosen_by` is absent and the guess is kept as `other_view`. A
/// sender's data send table without the receiver's row proves nothing for this case: UCX keeps
/// it from the first message any receiver had it send.
pub fn classify_tag(
    sender_info: Option<&str>,
    lanes: &[Lane],
    memory: MemoryPair,
    views: TagViews<'_>,
) -> TransportEvidence {
    let mut evidence = classify(sender_info, lanes, memory);
    let Some(parsed) = sender_info.and_then(parse_protocol_info) else {
        return evidence;
    };
    if !parsed.is_rendezvous() {
        evidence.chosen_by = Some(ProtocolSide::Initiator);
        return evidence;
    }
    let guess = ProtocolView {
        side: ProtocolSide::Initiator,
        protocol: evidence.data_path.protocol.clone(),
        transports: evidence.data_path.transports.clone(),
        class: evidence.data_path.class,
        // The sender's rendezvous row is always the receiver's to decide.
        depends_on_peer: true,
    };
    match (views.receive, views.send) {
        // The receiver moved the bytes (it reads, or pipelines): its row is its choice.
        (Some(receive), _) if !receive.depends_on_peer => take(evidence, receive, guess),
        // The receiver had the sender send them: the sender's own table says how it did.
        (Some(receive), Some(send)) if !send.depends_on_peer => take(evidence, send, receive.clone()),
        (receive, _) => not_known(evidence, lanes, memory, receive.cloned().unwrap_or(guess)),
    }
}

/// The evidence naming `chosen` (a side's own table), with `other` kept where it differs.
fn take(mut evidence: TransportEvidence, chosen: &ProtocolView, other: ProtocolView) -> TransportEvidence {
    let differ = other.protocol != chosen.protocol || other.transports != chosen.transports;
    evidence.other_view = differ.then_some(other);
    evidence.protocol = Some(view_text(chosen));
    evidence.data_path = DataPath {
        class: chosen.class,
        transports: chosen.transports.clone(),
        protocol: chosen.protocol.clone(),
        source: EvidenceSource::ProtoInfo,
    };
    evidence.chosen_by = Some(chosen.side);
    evidence
}

/// A rendezvous whose bytes no side's table accounts for: not known, `guess` beside it.
fn not_known(
    mut evidence: TransportEvidence,
    lanes: &[Lane],
    memory: MemoryPair,
    guess: ProtocolView,
) -> TransportEvidence {
    let from_lanes = data_path_from_lanes(lanes, memory);
    // Every lane of one class: whatever the protocol, the bytes crossed on that class.
    let one_class = from_lanes.class != TransportClass::Unknown
        && lanes
            .iter()
            .all(|l| class_of_transport(&l.transport) == from_lanes.class);
    evidence.data_path = if one_class {
        from_lanes
    } else {
        DataPath {
            class: TransportClass::Unknown,
            transports: Vec::new(),
            protocol: String::new(),
            source: EvidenceSource::None,
        }
    };
    evidence.chosen_by = None;
    evidence.other_view = Some(guess);
    evidence
}

/// A side's view as one line, as a request's info string reads: `rendezvous zero-copy flushed
/// write cma/memory`.
fn view_text(view: &ProtocolView) -> String {
    let lanes = super::join_lanes(&view.transports);
    if lanes.is_empty() {
        view.protocol.clone()
    } else {
        format!("{} {lanes}", view.protocol)
    }
}

#[cfg(test)]
#[path = "side_tests.rs"]
mod tests;
