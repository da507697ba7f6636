//! Issue 40 item 3: `pair` compares both sides' RDMA readiness before the transfer. A pass whose
//! sides disagree warns, naming both values and the fix; a failing verdict keeps its own answer;
//! a side not read compares nothing and changes no verdict.

use super::*;
use crate::readiness::{PairReadiness, PortReadiness, Readiness, ReadinessField};

fn side(netdev_mtu: u32) -> Readiness {
    Readiness {
        ports: vec![PortReadiness {
            port: "mlx5_1:1".into(),
            link_layer: Some("Ethernet".into()),
            netdev_mtu: Some(netdev_mtu),
            ..Default::default()
        }],
        gdr_mode: None,
        pcie_links: vec![],
    }
}

/// The healthy same-host run of the controls' tests (tag_bw 64 MiB over cma: a pass).
fn passing(readiness: PairReadiness) -> PairReport {
    let mut report = tcp_report(serde_json::json!({}));
    report.cases = vec![measured(TestKind::TagBw, HH, 64 * MIB, Some(TAG_CMA), &[], 7.0)];
    report.readiness = Some(Box::new(readiness));
    report
}

#[test]
fn a_pass_whose_sides_differ_in_mtu_warns_with_both_values_and_the_fix() {
    let mut report = passing(PairReadiness::of(Some(side(9000)), Some(side(1500))));
    judge(&mut report);
    assert_eq!(report.verdict.status, VerdictStatus::Warn, "{:?}", report.verdict);
    let reason = &report.verdict.reason;
    assert!(
        reason.ends_with("readiness differs: prefill mlx5_1:1 netdev MTU 9000, decode mlx5_1:1 netdev MTU 1500"),
        "{reason}"
    );
    assert_eq!(report.verdict.hint.as_deref(), Some(ReadinessField::NetdevMtu.fix()));
    assert_eq!(report.verdict.status.exit_code(), crate::exit::OK);
    // Judging again (the pipeline judges what the prefill side judged) says it once.
    judge(&mut report);
    assert_eq!(report.verdict.reason.matches("readiness differs").count(), 1);
}

#[test]
fn agreeing_or_unread_sides_leave_the_pass_alone() {
    for readiness in [
        PairReadiness::of(Some(side(9000)), Some(side(9000))),
        PairReadiness::of(Some(side(9000)), None),
    ] {
        let mut report = passing(readiness);
        judge(&mut report);
        assert_eq!(report.verdict.status, VerdictStatus::Pass, "{:?}", report.verdict);
        assert!(
            !report.verdict.reason.contains("readiness"),
            "{}",
            report.verdict.reason
        );
    }
}

#[test]
fn a_failing_run_keeps_its_own_answer_beside_a_difference() {
    let mut report = tcp_report(serde_json::json!({}));
    report.readiness = Some(Box::new(PairReadiness::of(Some(side(9000)), Some(side(1500)))));
    judge(&mut report);
    assert_eq!(report.verdict.status, VerdictStatus::Fail);
    assert!(
        !report.verdict.reason.contains("readiness"),
        "{}",
        report.verdict.reason
    );
    assert_eq!(report.readiness.as_ref().unwrap().mismatches.len(), 1);
}

#[test]
fn a_side_not_read_is_not_compared_never_agreeing() {
    let one = PairReadiness::of(None, Some(side(9000)));
    assert!(one.mismatches.is_empty());
    assert_eq!(one.not_compared, vec!["not read on prefill".to_string()]);
    assert_eq!(one.unread_sides(), vec!["prefill"]);
    let none = PairReadiness::of(None, None);
    assert_eq!(none.not_compared, vec!["not read on prefill and decode".to_string()]);
    let both = PairReadiness::of(Some(side(9000)), Some(side(9000)));
    assert!(both.mismatches.is_empty() && both.unread_sides().is_empty(), "{both:?}");
    // Every field of the port that neither side read is listed, not taken as equal.
    assert!(
        both.not_compared
            .iter()
            .any(|l| l == "prefill and decode mlx5_1:1 MTU not read"),
        "{:?}",
        both.not_compared
    );
}
