//! Sweep results through the exporter trait: a fixed, realistic sweep (4 nodes, all-pairs, one
//! node whose pairs went over TCP at 1 GB/s, its second pass, verdicts from the real scoring) in
//! every format, with the values read back out of the text.
//!
//! The `ic-bench.sweep/v1` JSON is also a snapshot (`snapshots/sweep_exporters__sweep_json.snap`).
//! After a deliberate change to the file format, refresh it and update docs/schema.md:
//! `INSTA_UPDATE=always cargo test -p icb-report --test main sweep_exporters::` (or `cargo insta review`).

use crate::common;
use crate::sweep_fixture;

use icb_report::{ExportError, Format, HtmlExporter, View, render_sweep_in};
use std::collections::{BTreeMap, BTreeSet};
use sweep_fixture::fixture;

fn render(format: Format) -> String {
    render_sweep_in(&fixture(), format, View::default()).unwrap_or_else(|e| panic!("{format}: {e}"))
}

#[test]
fn the_fixture_blames_node_4_only() {
    // Everything below relies on it, so say it once with the reason if scoring ever changes.
    let r = fixture();
    let status: Vec<(&str, &str)> = r
        .node_verdicts
        .iter()
        .map(|v| (v.node.as_str(), v.status.as_str()))
        .collect();
    assert_eq!(
        status,
        [
            ("node-1", "pass"),
            ("node-2", "pass"),
            ("node-3", "pass"),
            ("node-4", "fail")
        ]
    );
    assert_eq!(r.pairs.iter().filter(|p| p.pass == 2).count(), 2);
}

#[test]
fn svg_cannot_show_a_sweep_and_says_what_can() {
    let err = render_sweep_in(&fixture(), Format::Svg, View::default()).unwrap_err();
    assert!(matches!(err, ExportError::Unsupported { format: "svg", .. }), "{err:?}");
    assert!(err.to_string().contains("--export-html"), "{err}");
}

#[test]
fn a_sweep_where_nothing_was_measured_says_so_instead_of_blaming_nodes() {
    let mut r = fixture();
    for p in &mut r.pairs {
        p.outcome = icb_sweep::Outcome::Error {
            reason: "the decode side exited before listening".into(),
        };
    }
    r.node_verdicts = icb_sweep::score::final_verdicts(&r.nodes, &r.pairs);
    let text = render_sweep_in(&r, Format::Table, View::default()).unwrap();
    let first = text.lines().next().unwrap();
    assert!(first.starts_with("ERROR: no pair was measured (8 pairs"), "{first}");
}

#[test]
fn table_names_the_bad_node_first_and_lists_every_node() {
    let text = render(Format::Table);
    let first = text.lines().next().unwrap();
    assert_eq!(first, "FAIL: node-4 (8 pairs run)");
    for n in ["node-1", "node-2", "node-3", "node-4"] {
        assert!(text.contains(n), "{n} missing:\n{text}");
    }
    let node4 = text
        .lines()
        .find(|l| l.contains("node-4") && l.contains("fail"))
        .unwrap();
    assert!(
        node4.contains("1.00") && node4.contains("3/3") && node4.contains("tcp"),
        "{node4}"
    );
    assert!(
        text.lines().all(|l| l.chars().count() <= 80),
        "fitted to 80 columns:\n{text}"
    );
    // -o wide: every evidence line, not only the first.
    let wide = render(Format::Wide);
    let evidence = &fixture().node_verdicts[3].evidence;
    assert!(evidence.len() > 1);
    for line in evidence {
        assert!(wide.contains(line.as_str()), "{line} missing:\n{wide}");
    }
}

#[test]
fn json_is_the_results_file_itself() {
    let r = fixture();
    let text = render(Format::Json);
    assert_eq!(text, r.to_json());
    let back: icb_report::SweepResults = serde_json::from_str(&text).unwrap();
    assert_eq!(back, r);
}

#[test]
fn sweep_json_snapshot() {
    insta::assert_snapshot!("sweep_json", render(Format::Json));
}

/// The section of docs/schema.md under `heading`, from it to the next one.
fn schema_doc_section(heading: &str) -> String {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/schema.md")).unwrap();
    let start = doc
        .find(heading)
        .unwrap_or_else(|| panic!("docs/schema.md has the section {heading}"));
    let rest = &doc[start + 3..];
    rest[..rest.find("\n## ").unwrap_or(rest.len())].to_string()
}

fn schema_doc_sweep_section() -> String {
    schema_doc_section("## `ic-bench.sweep/v1`")
}

fn keys(value: &serde_json::Value, out: &mut BTreeSet<String>) {
    match value {
        serde_json::Value::Object(map) => {
            for (k, v) in map {
                out.insert(k.clone());
                keys(v, out);
            }
        }
        serde_json::Value::Array(items) => items.iter().for_each(|v| keys(v, out)),
        _ => {}
    }
}

/// The keys `section` names neither as `` `key` `` nor as `"key"`.
fn undocumented<'a>(section: &str, keys: &'a BTreeSet<String>) -> Vec<&'a String> {
    keys.iter()
        .filter(|k| !section.contains(&format!("`{k}`")) && !section.contains(&format!("\"{k}\"")))
        .collect()
}

#[test]
fn every_field_of_the_sweep_json_is_in_docs_schema() {
    let section = schema_doc_sweep_section();
    let mut all = BTreeSet::new();
    keys(&serde_json::from_str(&render(Format::Json)).unwrap(), &mut all);
    let undocumented = undocumented(&section, &all);
    assert!(
        undocumented.is_empty(),
        "docs/schema.md does not describe {undocumented:?}"
    );
}

#[test]
fn junit_has_a_case_per_pair_and_per_node_with_failures_where_they_are() {
    let xml = render(Format::Junit);
    let r = fixture();
    assert_eq!(xml.matches("<testcase ").count(), r.pairs.len() + r.nodes.len());
    // Failures: the three first-pass pairs with node-4, both second-pass pairs, node-4 itself.
    assert_eq!(xml.matches("<failure").count(), 3 + 2 + 1, "{xml}");
    assert!(xml.contains("<testcase name=\"node-4\" classname=\"node\""), "{xml}");
    assert!(xml.contains("name=\"pass 1 node-1→node-4\""), "{xml}");
    assert!(xml.contains("name=\"complete\" value=\"true\""), "{xml}");
}

#[test]
fn html_is_a_sweep_only_format() {
    use icb_report::Exporter as _;
    let html = HtmlExporter.sweep(&fixture()).unwrap();
    assert_eq!(
        html.matches("class=\"cell\"").count(),
        6,
        "one cell per measured first-pass direction"
    );
    let pair = common::same_host_healthy();
    assert!(matches!(HtmlExporter.pair(&pair), Err(ExportError::Unsupported { .. })));
}

#[test]
fn credentials_in_error_text_are_masked_in_every_format() {
    let secret = "s3cr3tT0kenValue42";
    let mut r = fixture();
    r.pairs[0].outcome = icb_sweep::Outcome::Error {
        reason: format!("GET https://admin:{secret}@10.0.0.1:6443/api/v1/pods: 500"),
    };
    r.node_verdicts[0]
        .evidence
        .push(format!("Authorization: Bearer {secret}"));
    for f in [
        Format::Table,
        Format::Wide,
        Format::Json,
        Format::Junit,
        Format::Prometheus,
    ] {
        let text = render_sweep_in(&r, f, View { width: 400, wide: true }).unwrap();
        assert!(!text.contains(secret), "{f} printed the credential:\n{text}");
    }
    use icb_report::Exporter as _;
    let html = HtmlExporter.sweep(&icb_report::masked_sweep(&r)).unwrap();
    assert!(!html.contains(secret));
}

/// One sample of an exposition: metric name, labels, value.
type Sample = (String, BTreeMap<String, String>, f64);

/// Reads OpenMetrics text line by line, strictly enough to catch what a scraper rejects: every
/// sample's family declared (TYPE, HELP, and UNIT matching the name's suffix) before its samples,
/// valid metric and label names, quoted label values with escapes, a number as value, no sample
/// twice, and `# EOF` last.
fn parse_exposition(text: &str) -> Vec<Sample> {
    fn valid_name(s: &str, colon: bool) -> bool {
        let mut chars = s.chars();
        chars
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || (colon && c == ':'))
            && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || (colon && c == ':'))
    }
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.last(), Some(&"# EOF"), "ends with # EOF");
    let mut types: BTreeMap<String, String> = BTreeMap::new();
    let mut helps: BTreeSet<String> = BTreeSet::new();
    let mut units: BTreeMap<String, String> = BTreeMap::new();
    let mut samples: Vec<Sample> = Vec::new();
    let mut seen: BTreeSet<String> = BTreeSet::new();
    for line in &lines[..lines.len() - 1] {
        if let Some(rest) = line.strip_prefix("# ") {
            let mut parts = rest.splitn(3, ' ');
            let (kind, name, value) = (parts.next().unwrap(), parts.next().unwrap(), parts.next());
            assert!(valid_name(name, true), "metric name {name:?}");
            let value = value
                .unwrap_or_else(|| panic!("{kind} {name} without a value"))
                .to_string();
            match kind {
                "TYPE" => assert!(types.insert(name.into(), value).is_none(), "TYPE {name} twice"),
                "HELP" => assert!(helps.insert(name.into()) && !value.is_empty(), "HELP {name}"),
                "UNIT" => {
                    assert!(
                        name.ends_with(&format!("_{value}")),
                        "{name} does not end in its unit {value}"
                    );
                    units.insert(name.into(), value);
                }
                other => panic!("unknown metadata line {other}: {line}"),
            }
            continue;
        }
        let (name, labels, value) = match line.find('{') {
            Some(open) => {
                let close = line.rfind('}').unwrap_or_else(|| panic!("unclosed labels: {line}"));
                (&line[..open], parse_labels(&line[open + 1..close]), &line[close + 1..])
            }
            None => {
                let n = line.split(' ').next().unwrap_or_default();
                (n, BTreeMap::new(), &line[n.len()..])
            }
        };
        assert!(valid_name(name, true), "metric name {name:?} in {line}");
        assert!(types.contains_key(name), "{name} sampled before its TYPE");
        assert!(helps.contains(name), "{name} has no HELP");
        assert_eq!(types[name], "gauge", "{name}");
        for k in labels.keys() {
            assert!(valid_name(k, false), "label name {k:?} in {line}");
        }
        let value = value
            .strip_prefix(' ')
            .unwrap_or_else(|| panic!("one space before the value: {line}"));
        let value: f64 = value
            .parse()
            .unwrap_or_else(|_| panic!("value {value:?} is not a number: {line}"));
        assert!(seen.insert(format!("{name}{labels:?}")), "sample twice: {line}");
        samples.push((name.to_string(), labels, value));
    }
    samples
}

/// `a="x",b="y\"z"` → {a: x, b: y"z}.
fn parse_labels(text: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut rest = text;
    while !rest.is_empty() {
        let (key, after) = rest
            .split_once("=\"")
            .unwrap_or_else(|| panic!("label without =\": {text}"));
        let mut value = String::new();
        let mut chars = after.char_indices();
        let end = loop {
            match chars.next() {
                Some((_, '\\')) => match chars.next() {
                    Some((_, 'n')) => value.push('\n'),
                    Some((_, c @ ('"' | '\\'))) => value.push(c),
                    other => panic!("bad escape {other:?} in {text}"),
                },
                Some((i, '"')) => break i,
                Some((_, c)) => value.push(c),
                None => panic!("unterminated label value in {text}"),
            }
        };
        assert!(out.insert(key.to_string(), value).is_none(), "label {key} twice");
        rest = &after[end + 1..];
        rest = rest.strip_prefix(',').unwrap_or(rest);
    }
    out
}

fn find<'a>(samples: &'a [Sample], name: &str, labels: &[(&str, &str)]) -> Vec<&'a Sample> {
    samples
        .iter()
        .filter(|(n, ls, _)| n == name && labels.iter().all(|(k, v)| ls.get(*k).map(String::as_str) == Some(*v)))
        .collect()
}

fn one(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> f64 {
    let found = find(samples, name, labels);
    assert_eq!(found.len(), 1, "{name} {labels:?}: {found:?}");
    found[0].2
}

#[test]
fn prometheus_is_valid_exposition_with_the_fixtures_values() {
    let text = render(Format::Prometheus);
    let samples = parse_exposition(&text);
    let r = fixture();
    let id = r.sweep_id.as_str();
    assert!(
        samples
            .iter()
            .all(|(_, ls, _)| ls.get("sweep_id").map(String::as_str) == Some(id))
    );

    // Run metadata.
    let info = find(&samples, "icbench_sweep_info", &[]);
    assert_eq!(info.len(), 1);
    let info_labels = &info[0].1;
    assert_eq!(info_labels["schedule"], "all-pairs");
    assert_eq!(info_labels["complete"], "true");
    assert_eq!(info_labels["started_at"], "2026-11-24T02:00:00Z");
    assert_eq!(info[0].2, 1.0);
    // 2026-11-24T02:00:00Z and 02:41:30.5Z as Unix time.
    assert_eq!(
        one(&samples, "icbench_sweep_started_timestamp_seconds", &[]),
        1_795_485_600.0
    );
    assert_eq!(
        one(&samples, "icbench_sweep_updated_timestamp_seconds", &[]),
        1_795_488_090.5
    );
    assert_eq!(one(&samples, "icbench_sweep_pairs", &[("state", "planned")]), 6.0);
    assert_eq!(
        one(&samples, "icbench_sweep_pairs", &[("state", "done_first_pass")]),
        6.0
    );
    assert_eq!(
        one(&samples, "icbench_sweep_pairs", &[("state", "done_second_pass")]),
        2.0
    );

    // Per pair: every series point, with direction for put/get.
    let bw = "icbench_sweep_pair_bandwidth_bytes_per_second";
    let point = |prefill, decode, pass, test, size, direction| {
        one(
            &samples,
            bw,
            &[
                ("prefill_node", prefill),
                ("decode_node", decode),
                ("pass", pass),
                ("test", test),
                ("memory", "host-host"),
                ("size", size),
                ("direction", direction),
            ],
        )
    };
    assert_eq!(point("node-1", "node-2", "1", "put_bw", "1048576", "write"), 23.5e9);
    assert_eq!(point("node-1", "node-2", "1", "get_bw", "65536", "read"), 17.25e9);
    assert_eq!(point("node-1", "node-4", "1", "put_bw", "1048576", "write"), 1.0e9);
    let points: usize = r
        .pairs
        .iter()
        .map(|p| match &p.outcome {
            icb_sweep::Outcome::Measured { series, .. } => series.len(),
            _ => 0,
        })
        .sum();
    assert_eq!(find(&samples, bw, &[]).len(), points);
    assert_eq!(points, 8 * 4, "8 pairs × put/get × 2 sizes");
    let lat = "icbench_sweep_pair_latency_seconds";
    let labels = [
        ("prefill_node", "node-2"),
        ("decode_node", "node-3"),
        ("pass", "1"),
        ("test", "tag_lat"),
        ("size", "8"),
    ];
    let q = |quantile| {
        let mut ls = labels.to_vec();
        ls.push(("quantile", quantile));
        one(&samples, lat, &ls)
    };
    assert_eq!(q("0.5"), 2.5e-6);
    assert_eq!(q("0.99"), 4.25e-6);
    assert_eq!(find(&samples, lat, &[]).len(), 8 * 2);
    let status = "icbench_sweep_pair_status";
    assert_eq!(
        one(
            &samples,
            status,
            &[("prefill_node", "node-1"), ("decode_node", "node-2")]
        ),
        0.0
    );
    assert_eq!(
        one(
            &samples,
            status,
            &[("prefill_node", "node-3"), ("decode_node", "node-4")]
        ),
        2.0
    );
    assert_eq!(find(&samples, status, &[("outcome", "measured")]).len(), 8);

    // Per node: health 1/0 with the status, median bandwidth.
    let health = "icbench_sweep_node_health";
    for n in ["node-1", "node-2", "node-3"] {
        assert_eq!(one(&samples, health, &[("node", n), ("status", "pass")]), 1.0);
    }
    assert_eq!(one(&samples, health, &[("node", "node-4"), ("status", "fail")]), 0.0);
    assert_eq!(find(&samples, health, &[]).len(), 4);
    let median = "icbench_sweep_node_median_bandwidth_bytes_per_second";
    for v in &r.node_verdicts {
        assert_eq!(one(&samples, median, &[("node", &v.node)]), v.median_bps.unwrap());
    }
    assert_eq!(one(&samples, median, &[("node", "node-4")]), 1.0e9);
}

#[test]
fn prometheus_of_a_running_sweep_shows_first_pass_health_and_no_timestamp_it_cannot_read() {
    let mut r = fixture();
    r.pairs.truncate(3);
    r.node_verdicts.clear();
    r.complete = false;
    r.updated_at = "not a time".into();
    let text = render_sweep_in(&r, Format::Prometheus, View::default()).unwrap();
    let samples = parse_exposition(&text);
    assert_eq!(find(&samples, "icbench_sweep_info", &[("complete", "false")]).len(), 1);
    assert!(find(&samples, "icbench_sweep_updated_timestamp_seconds", &[]).is_empty());
    assert_eq!(
        one(&samples, "icbench_sweep_pairs", &[("state", "done_first_pass")]),
        3.0
    );
    assert_eq!(find(&samples, "icbench_sweep_node_health", &[]).len(), 4);
}

#[test]
fn prometheus_says_when_each_pair_was_measured_and_nothing_for_a_pair_without_a_time() {
    let mut r = fixture();
    r.pairs[1].finished_at = None;
    let text = render_sweep_in(&r, Format::Prometheus, View::default()).unwrap();
    let samples = parse_exposition(&text);
    let finished = "icbench_sweep_pair_finished_timestamp_seconds";
    let first = &r.pairs[0];
    let want = "2026-11-22T02:01:00Z".parse::<jiff::Timestamp>().unwrap().as_second() as f64;
    assert_eq!(first.finished_at.as_deref(), Some("2026-11-22T02:01:00Z"));
    let labels = [
        ("prefill_node", first.pair.prefill.as_str()),
        ("decode_node", first.pair.decode.as_str()),
        ("pass", "1"),
    ];
    assert_eq!(one(&samples, finished, &labels), want);
    assert_eq!(
        find(&samples, finished, &[]).len(),
        r.pairs.len() - 1,
        "none for the pair without a time"
    );
}

#[test]
fn every_field_of_the_fabric_matrix_is_in_docs_schema_and_its_example_parses() {
    let section = schema_doc_section("## `ic-bench.fabric-matrix/v1`");
    let mut r = fixture();
    // A distrusted latency, so that every optional field is present somewhere.
    if let icb_sweep::Outcome::Measured { latency, .. } = &mut r.pairs[0].outcome {
        latency[0].quality = vec![icb_core::quality::QualityKind::ImplausibleLatency];
    }
    let matrix = icb_sweep::matrix::FabricMatrix::from_results(&r);
    let mut all = BTreeSet::new();
    keys(&serde_json::from_str(&matrix.to_json().unwrap()).unwrap(), &mut all);
    assert!(
        all.contains("latency_distrusted") && all.contains("measured_at"),
        "{all:?}"
    );
    let undocumented = undocumented(&section, &all);
    assert!(
        undocumented.is_empty(),
        "docs/schema.md does not describe {undocumented:?}"
    );
    let example = section
        .split("```json")
        .nth(1)
        .and_then(|rest| rest.split("```").next())
        .expect("the section has a JSON example");
    let parsed: icb_sweep::matrix::FabricMatrix = serde_json::from_str(example).expect("the example is a matrix");
    assert_eq!(parsed.schema, icb_sweep::matrix::MATRIX_SCHEMA);
}

#[test]
fn junit_fails_a_slow_pair_as_the_node_verdicts_count_it() {
    // TCP allowed (--allow-tcp): node-4's pairs pass their own verdict as warnings, but at
    // 1 GB/s against 22 GB/s they are slow, which is what blames node-4.
    let mut r = fixture();
    for p in &mut r.pairs {
        if let icb_sweep::Outcome::Measured { verdict, .. } = &mut p.outcome
            && *verdict == icb_core::VerdictStatus::Fail
        {
            *verdict = icb_core::VerdictStatus::Warn;
        }
    }
    let xml = render_sweep_in(&r, Format::Junit, View::default()).unwrap();
    let slow = xml
        .matches("message=\"warn (tcp, 1.00 GB/s) (slow: under 25% of the reference 22.00 GB/s)\"")
        .count();
    assert_eq!(slow, 5, "3 first-pass and 2 second-pass pairs with node-4:\n{xml}");
}

/// The fixture as it is written at the moment a signal stopped it: first-pass pairs only, no
/// node verdicts yet, `stopped` set.
fn interrupted() -> icb_report::SweepResults {
    let mut r = fixture();
    r.pairs.retain(|p| p.pass == 1 && !p.pair.involves("node-4"));
    r.node_verdicts.clear();
    r.complete = false;
    r.stopped = Some(icb_sweep::Stopped {
        reason: icb_sweep::StopReason::Interrupted,
        detail: "interrupted by SIGTERM".into(),
        at: "2026-11-24T02:10:00Z".into(),
    });
    r
}

#[test]
fn an_interrupted_sweep_never_reads_as_a_pass_in_any_format() {
    let r = interrupted();
    let table = render_sweep_in(&r, Format::Table, View::default()).unwrap();
    let first = table.lines().next().unwrap();
    assert!(first.starts_with("INTERRUPTED: interrupted by SIGTERM"), "{first}");
    assert!(!table.contains("PASS"), "{table}");
    let json = render_sweep_in(&r, Format::Json, View::default()).unwrap();
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["stopped"]["reason"], "interrupted");
    assert_eq!(v["complete"], false);
    let xml = render_sweep_in(&r, Format::Junit, View::default()).unwrap();
    assert!(xml.contains("name=\"stopped\" value=\"interrupted\""), "{xml}");
    assert!(xml.contains("<testcase name=\"sweep\" classname=\"sweep\""), "{xml}");
    assert!(xml.contains("<error"), "the stop is an error case: {xml}");
    let prom = render_sweep_in(&r, Format::Prometheus, View::default()).unwrap();
    assert!(
        prom.contains("icbench_sweep_stopped{sweep_id=\"swfix01\",reason=\"interrupted\"} 1"),
        "{prom}"
    );
    let html = icb_report::Exporter::sweep(&HtmlExporter, &r).unwrap();
    assert!(html.contains("stopped (interrupted): interrupted by SIGTERM"), "{html}");
    // Every node case is skipped (not judged), none passes.
    let node_cases = xml.matches("classname=\"node\"").count();
    assert_eq!(node_cases, 4, "{xml}");
    assert_eq!(xml.matches("<skipped").count(), node_cases, "{xml}");
}

#[test]
fn a_sweep_still_running_with_no_failure_is_not_a_pass_yet() {
    let mut r = interrupted();
    r.stopped = None;
    let table = render_sweep_in(&r, Format::Table, View::default()).unwrap();
    let first = table.lines().next().unwrap();
    assert!(first.starts_with("RUNNING: no node failed so far"), "{first}");
}

#[test]
fn suspects_are_named_as_suspects_and_failed_nodes_as_failed() {
    let mut r = fixture();
    r.node_verdicts[1].status = icb_sweep::NodeStatus::Suspect;
    let text = render_sweep_in(&r, Format::Table, View::default()).unwrap();
    assert_eq!(
        text.lines().next().unwrap(),
        "FAIL: node-4 (8 pairs run); suspect: node-2"
    );
    r.node_verdicts[3].status = icb_sweep::NodeStatus::Suspect;
    let text = render_sweep_in(&r, Format::Table, View::default()).unwrap();
    let first = text.lines().next().unwrap();
    assert!(first.starts_with("SUSPECT: node-2, node-4 (8 pairs run"), "{first}");
    assert!(!first.contains("FAIL"), "the headline matches the table: {first}");
}

#[test]
fn the_table_has_a_latency_column_and_fits_100_columns() {
    let view = View {
        width: 100,
        wide: false,
    };
    let text = render_sweep_in(&fixture(), Format::Table, view).unwrap();
    assert!(text.contains("p50 µs"), "{text}");
    let node4 = text.lines().find(|l| l.starts_with("│ node-4")).unwrap();
    assert!(node4.contains("45.0"), "node-4's median p50: {node4}");
    assert!(text.lines().all(|l| l.chars().count() <= 100), "{text}");
}

/// Issue 35: a latency-only sweep whose node-4 pairs measured 8 ms that their own quality check
/// called implausible. node-4 is unjudged, and every format says so with the reason, never a pass.
#[test]
fn a_node_left_unjudged_by_a_distrusted_latency_reads_as_not_judged() {
    use icb_core::quality::QualityKind;
    use icb_sweep::results::Outcome;
    let mut r = fixture();
    r.pairs.retain(|p| p.pass == 1);
    for p in &mut r.pairs {
        let on_node_4 = p.pair.involves("node-4");
        if let Outcome::Measured {
            verdict,
            bandwidth_bps,
            series,
            latency,
            ..
        } = &mut p.outcome
        {
            // Its data path was right (the pair passed); only its timing was not.
            (*verdict, *bandwidth_bps, *series) = (icb_core::VerdictStatus::Pass, None, vec![]);
            if on_node_4 {
                latency[0].p50_us = 8000.0;
                latency[0].quality = vec![QualityKind::ImplausibleLatency];
            }
        }
    }
    r.node_verdicts = icb_sweep::score::final_verdicts(&r.nodes, &r.pairs);
    let status: Vec<&str> = r.node_verdicts.iter().map(|v| v.status.as_str()).collect();
    assert_eq!(status, ["pass", "pass", "pass", "unjudged"], "{:#?}", r.node_verdicts);
    let wide_enough = View {
        width: 400,
        wide: false,
    };
    let table = render_sweep_in(&r, Format::Table, wide_enough).unwrap();
    let first = table.lines().next().unwrap();
    assert_eq!(
        first,
        "INCONCLUSIVE: no node failed, but node-4 could not be judged (6 pairs run; see the evidence)"
    );
    let row = table.lines().find(|l| l.starts_with("│ node-4")).unwrap();
    assert!(row.contains("not judged: no bandwidth measured"), "{table}");
    let xml = render_sweep_in(&r, Format::Junit, View::default()).unwrap();
    assert!(
        xml.contains("message=\"unjudged: not judged: no bandwidth measured and no latency to judge it by: node-3→node-4: latency 8000 µs (tag_lat 8 B) not used: its own quality check says latency far above what the data path gives"),
        "{xml}"
    );
}
