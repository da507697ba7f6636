use super::*;

/// A real report, as `ic-bench pair --local -o json` printed it (tag_lat + put_bw at 4 KiB,
/// host-host measured, cuda-cuda skipped without a driver).
const REPORT: &str = include_str!("../../tests/fixtures/pair_report.json");

fn report() -> PairReport {
    serde_json::from_str(REPORT).expect("the fixture is a v1 report")
}

#[test]
fn every_event_round_trips_through_one_line() {
    let report = report();
    let events = [
        SideEvent::Listening(Listening::new("10.99.0.1:41234", "1.22.0")),
        SideEvent::Case(Box::new(CaseProgress {
            schema: SIDE_SCHEMA.into(),
            index: 1,
            total: report.cases.len(),
            case: report.cases[0].clone(),
        })),
        SideEvent::Report(Box::new(report.clone())),
        SideEvent::Failed(SideFailure::new(
            SideErrorKind::UcxInit {
                variable: Some("UCX_TLS=bogus".into()),
            },
            "UCX setup failed: UCX ucp_init failed: No such device (status -14)",
        )),
        SideEvent::Failed(SideFailure::new(SideErrorKind::UcxNotFound, "UCX not found")),
    ];
    for event in events {
        let line = side_line(&event);
        assert!(!line.contains('\n'), "{line}");
        assert_eq!(parse_side_line(&line).unwrap(), Some(event));
    }
}

#[test]
fn the_listening_line_keeps_its_documented_shape() {
    let line = side_line(&SideEvent::Listening(Listening::new("127.0.0.1:35511", "1.22.0")));
    let v: serde_json::Value = serde_json::from_str(&line).unwrap();
    assert_eq!(v["event"], "listening");
    assert_eq!(v["schema"], "ic-bench.serve/v1");
    assert_eq!(v["address"], "127.0.0.1:35511");
    assert_eq!(v["ucx"], "1.22.0");
}

#[test]
fn foreign_lines_are_skipped() {
    for line in [
        "",
        "starting up",
        "[1795315460.977421] [vm:28799:0] mpool.c:122 UCX DEBUG mpool ucp_requests {0x1}",
        r#"{"event":"other","schema":"ic-bench.serve/v1"}"#,
        r#"{"schema":"something.else/v1"}"#,
        r#"{"a":1}"#,
    ] {
        assert_eq!(parse_side_line(line).unwrap(), None, "{line}");
    }
}

#[test]
fn our_line_after_half_a_ucx_log_line_is_found() {
    // As seen with UCX_LOG_LEVEL=debug: UCX flushed half a line just before ours.
    let line = r#"[1795315460.977421] [vm:28799:0] mpool.c:122 UCX DEBUG mpool ucp_re{"address":"127.0.0.1:35511","event":"listening","schema":"ic-bench.serve/v1","ucx":"1.22.0"}"#;
    assert_eq!(
        parse_side_line(line).unwrap(),
        Some(SideEvent::Listening(Listening::new("127.0.0.1:35511", "1.22.0")))
    );
}

#[test]
fn a_bare_report_is_a_report_event() {
    // `connect --json-line` prints the report without an event tag.
    let compact = serde_json::to_string(&report()).unwrap();
    assert_eq!(
        parse_side_line(&compact).unwrap(),
        Some(SideEvent::Report(Box::new(report())))
    );
}

#[test]
fn other_versions_and_broken_lines_are_errors() {
    let err = parse_side_line(r#"{"schema":"ic-bench.pair/v2","x":1}"#).unwrap_err();
    assert!(matches!(err, ProtocolError::Version { .. }), "{err}");
    assert!(err.to_string().contains("same ic-bench version"), "{err}");

    let err =
        parse_side_line(r#"{"event":"listening","schema":"ic-bench.serve/v9","address":"1.2.3.4:5"}"#).unwrap_err();
    assert!(matches!(err, ProtocolError::Version { .. }), "{err}");

    let err = parse_side_line(r#"{"schema":"ic-bench.pair/v1","x":1}"#).unwrap_err();
    assert!(matches!(err, ProtocolError::Malformed { what: "report", .. }), "{err}");

    let err = parse_side_line(r#"{"event":"listening","schema":"ic-bench.serve/v1","address":"nope","ucx":"1"}"#)
        .unwrap_err();
    assert_eq!(err, ProtocolError::BadAddress("nope".into()));
}

#[test]
fn plans_round_trip_and_refuse_other_versions() {
    let r = report();
    let plan = ChildPlan {
        schema: CHILD_PLAN_SCHEMA.into(),
        settings: r.settings.clone(),
        expectation: r.expectation.clone(),
        placement_mode: "local (isolation=pod)".into(),
        ucx_peer_errors: true,
        ucx_profile: Some(crate::model::UcxProfile::Nixl),
        connect_timeout_s: 30.0,
        ucx_config: vec![("TLS".into(), "tcp".into())],
    };
    assert_eq!(ChildPlan::from_json(&plan.to_json()).unwrap(), plan);

    let old = plan.to_json().replace(CHILD_PLAN_SCHEMA, "ic-bench.plan/v0");
    let err = ChildPlan::from_json(&old).unwrap_err();
    assert!(err.to_string().contains("ic-bench.plan/v0"), "{err}");
    assert!(ChildPlan::from_json("{").is_err());
    let err = ChildPlan::from_json("{}").unwrap_err();
    assert!(err.to_string().contains("no schema"), "{err}");
}

#[test]
fn the_failed_line_names_its_cause_by_kind() {
    let failure = SideFailure::new(
        SideErrorKind::UcxInit {
            variable: Some("UCX_TLS=bogus".into()),
        },
        "x",
    );
    let v: serde_json::Value = serde_json::from_str(&side_line(&SideEvent::Failed(failure))).unwrap();
    assert_eq!(v["event"], "failed");
    assert_eq!(v["schema"], "ic-bench.serve/v1");
    assert_eq!(v["cause"]["kind"], "ucx_init");
    assert_eq!(v["cause"]["variable"], "UCX_TLS=bogus");
}

/// What a side or a plan quotes back (a schema, an address, serde's message about a bad value)
/// is escaped and bounded: the error stays one line whatever the line or document held.
#[test]
fn quoted_outside_text_stays_on_one_line() {
    let one_line = |e: ProtocolError| {
        let e = e.to_string();
        assert!(!e.chars().any(char::is_control), "{e}");
        assert!(e.len() < 1000, "{e}");
        e
    };
    let e = one_line(parse_side_line(r#"{"event":"listening","schema":"ic-bench.serve/v2\n\u001b[2J"}"#).unwrap_err());
    assert!(e.contains(r"ic-bench.serve/v2\n\u{1b}[2J"), "{e}");
    one_line(
        parse_side_line(r#"{"event":"listening","schema":"ic-bench.serve/v1","address":"a\nb","ucx":"1"}"#)
            .unwrap_err(),
    );
    let long = format!(
        r#"{{"event":"case","schema":"ic-bench.serve/v1","index":"{}\n"}}"#,
        "x".repeat(50_000)
    );
    one_line(parse_side_line(&long).unwrap_err());
    one_line(ChildPlan::from_json("{\"schema\":\"plan\\r\\nforged line\"}").unwrap_err());
}
