//! Issue 35 item 3: a rendezvous tag case whose data path no side's own table named (the
//! receiver's `(?)` row had the sender send, and the sender's "rendezvous data send" table was
//! not seen) is not known: never a pass on the guess, inconclusive as any unknown path is.

use super::*;
use crate::classify::{TagViews, classify_tag};

/// The sender's request (a `(?)` read) and the receiver's `(?)` put row, with no sender table.
fn unattributed(lanes: &[Lane]) -> CaseResult {
    let receive = ProtocolView {
        side: ProtocolSide::Target,
        protocol: "rendezvous zero-copy flushed write".into(),
        transports: vec![lane("cma", "memory")],
        class: TransportClass::Cma,
        depends_on_peer: true,
    };
    let mut case = measured(TestKind::TagBw, HH, 64 * MIB, Some(TAG_CMA), lanes, 7.0);
    let views = TagViews {
        receive: Some(&receive),
        send: None,
    };
    case.transport = Some(classify_tag(Some(TAG_CMA), lanes, HH, views));
    case
}

#[test]
fn a_rendezvous_no_table_named_is_inconclusive_not_a_pass_on_the_guess() {
    let lanes = [lane("sysv", "memory"), lane("cma", "memory"), lane("tcp", "lo")];
    let case = unattributed(&lanes);
    let exp = Expectation::defaults(Locality::SameHost);
    let v = judge_case(&case, &exp, &settings(false));
    assert_eq!(v.status, Status::Warn, "{v:?}");
    assert!(v.reason.contains("which side moved the bytes is not known"), "{v:?}");
    assert!(v.hint.as_deref().unwrap_or("").contains("UCX_PROTO_INFO"), "{v:?}");
    let (_, run_verdict) = run(Locality::SameHost, vec![case], false);
    assert_eq!(
        run_verdict.status,
        VerdictStatus::Inconclusive,
        "{}",
        run_verdict.reason
    );
    assert!(!run_verdict.status.is_fit());
}

#[test]
fn a_rendezvous_not_known_over_nothing_but_tcp_still_fails_as_tcp() {
    let case = unattributed(&[lane("tcp", "lo")]);
    let (_, v) = run(Locality::SameHost, vec![case], false);
    assert_eq!(v.status, VerdictStatus::Fail, "{}", v.reason);
}
