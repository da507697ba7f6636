//! Issue 17 item 8: `--ucx-profile nixl` judges what NIXL does (put/get), and names peer-failure
//! mode, not namespaces, when tag messages lose shared memory under it.

use super::*;

const PUT_CMA: &str = "{proto|cb} put from host memory length 4194304 zero-copy cma/memory";

/// A healthy same-host pair under NIXL's peer-failure mode: tag over tcp/lo, put over cma.
fn healthy_pair_under_peer_failure_mode() -> PairReport {
    let mut report = tcp_report(serde_json::json!({}));
    report
        .cases
        .push(measured(TestKind::PutBw, HH, 4 * MIB, Some(PUT_CMA), &[], 10.0));
    report
}

#[test]
fn a_healthy_pair_passes_on_its_rma_cases_and_names_peer_failure_mode() {
    let mut report = healthy_pair_under_peer_failure_mode();
    report.ucx_profile = Some(UcxProfile::Nixl);
    judge(&mut report);
    assert_eq!(report.verdict.status, VerdictStatus::Pass, "{:?}", report.verdict);
    assert_eq!(report.verdict.data_paths, vec![TransportClass::Cma]);
    assert!(
        report
            .verdict
            .reason
            .contains("1 tag case(s) measured but not judged under --ucx-profile nixl"),
        "{}",
        report.verdict.reason
    );
    let tag = report.cases[0].verdict.clone().unwrap();
    assert_eq!(tag.status, Status::Ok);
    assert!(tag.reason.contains("peer-failure mode"), "{}", tag.reason);
    assert!(!tag.reason.contains("namespaces"), "{}", tag.reason);
    assert!(report.verdict.hint.is_none(), "{:?}", report.verdict.hint);
}

#[test]
fn without_the_profile_the_same_pair_still_fails_on_tcp() {
    let mut report = healthy_pair_under_peer_failure_mode();
    judge(&mut report);
    assert_eq!(report.verdict.status, VerdictStatus::Fail);
}

#[test]
fn rma_over_tcp_still_fails_under_the_profile() {
    let mut report = tcp_report(serde_json::json!({}));
    let put_tcp = "{proto|cb} put from host memory length 4194304 zero-copy tcp/eth0";
    report
        .cases
        .push(measured(TestKind::PutBw, HH, 4 * MIB, Some(put_tcp), &[], 1.0));
    report.ucx_profile = Some(UcxProfile::Nixl);
    judge(&mut report);
    assert_eq!(report.verdict.status, VerdictStatus::Fail);
    assert!(report.verdict.reason.contains("put"), "{}", report.verdict.reason);
}

#[test]
fn only_tag_cases_under_the_profile_are_inconclusive_not_a_pass() {
    let mut report = tcp_report(serde_json::json!({}));
    report.ucx_profile = Some(UcxProfile::Nixl);
    judge(&mut report);
    assert_eq!(report.verdict.status, VerdictStatus::Inconclusive);
    assert!(
        report.verdict.reason.starts_with("inconclusive"),
        "{}",
        report.verdict.reason
    );
}
