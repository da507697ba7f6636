use crate::common;

use common::*;
use icb_core::checks::ProbeReport;
use icb_core::model::{CaseStatus, PairReport, Status, TestKind, VerdictStatus};
use icb_report::{ExportError, Format, View, render_pair, render_pair_in, render_probe, render_probe_in};
use quick_xml::events::Event;
use std::collections::BTreeMap;

/// One XML element as the tests need it: name, attributes (raw) and the text directly inside.
#[derive(Debug, Default)]
struct Elem {
    name: String,
    attrs: BTreeMap<String, String>,
    text: String,
    parent: Option<usize>,
}

/// Parses `xml` strictly enough to prove it is well formed (matched tags, one root, nothing
/// after it) and returns its elements in document order.
fn parse_xml(xml: &str) -> Vec<Elem> {
    let mut reader = quick_xml::Reader::from_str(xml);
    let mut elems: Vec<Elem> = Vec::new();
    let mut stack: Vec<usize> = Vec::new();
    let mut roots = 0;
    let mut open = |e: &quick_xml::events::BytesStart, elems: &mut Vec<Elem>, stack: &Vec<usize>| {
        let mut attrs = BTreeMap::new();
        for a in e.attributes() {
            let a = a.expect("well-formed attribute");
            attrs.insert(
                String::from_utf8(a.key.as_ref().to_vec()).unwrap(),
                String::from_utf8(a.value.to_vec()).unwrap(),
            );
        }
        if stack.is_empty() {
            roots += 1;
        }
        elems.push(Elem {
            name: String::from_utf8(e.name().as_ref().to_vec()).unwrap(),
            attrs,
            text: String::new(),
            parent: stack.last().copied(),
        });
        elems.len() - 1
    };
    loop {
        match reader
            .read_event()
            .unwrap_or_else(|e| panic!("not well-formed XML: {e}\n{xml}"))
        {
            Event::Start(e) => {
                let i = open(&e, &mut elems, &stack);
                stack.push(i);
            }
            Event::Empty(e) => {
                open(&e, &mut elems, &stack);
            }
            Event::End(_) => {
                stack.pop().expect("end tag without start");
            }
            Event::Text(t) => {
                let raw = String::from_utf8(t.to_vec()).unwrap();
                if let Some(&i) = stack.last() {
                    elems[i].text.push_str(&raw);
                } else {
                    assert!(raw.trim().is_empty(), "text outside the root: {raw:?}");
                }
            }
            Event::Eof => break,
            _ => {}
        }
    }
    assert!(stack.is_empty(), "unclosed elements");
    assert_eq!(roots, 1, "exactly one root element");
    elems
}

#[test]
fn format_values_and_the_unknown_value_error() {
    for (text, f) in [
        ("table", Format::Table),
        ("wide", Format::Wide),
        ("json", Format::Json),
        ("junit", Format::Junit),
        ("prometheus", Format::Prometheus),
        ("svg", Format::Svg),
        ("JSON", Format::Json),
    ] {
        assert_eq!(text.parse::<Format>().unwrap(), f);
    }
    for f in Format::ALL {
        assert_eq!(f.to_string().parse::<Format>().unwrap(), f);
    }
    let err = "yaml".parse::<Format>().unwrap_err().to_string();
    assert_eq!(
        err,
        "unknown output format 'yaml': use table, wide, json, junit, prometheus, svg or collectivex"
    );
}

#[test]
fn fixtures_carry_the_expected_verdicts() {
    assert_eq!(pods_same_node().verdict.status, VerdictStatus::Fail);
    assert_eq!(same_host_healthy().verdict.status, VerdictStatus::Pass);
    assert_eq!(two_nodes_rdma().verdict.status, VerdictStatus::Warn);
}

#[test]
fn table_shows_units_cases_findings_and_the_verdict() {
    let r = pods_same_node();
    let out = render_pair(&r, Format::Wide).unwrap();
    for want in [
        "Bandwidth (GB/s)",
        "Latency p50 / p99 (µs)",
        "Data path",
        "rendezvous zero-copy fenced write, tcp/lo, tcp/eth0",
        "4.59",
        "6.60 / 10.56",
        "no CUDA driver",
        "verdict: FAIL: tcp fallback: data went over tcp/lo",
        "hint: the two sides do not share IPC/PID namespaces (pods)",
        "fail ×1: tcp fallback: get emulated over active messages on tcp/lo",
        "expected for same host (defaults): host→host ≥ 1.00 GB/s",
    ] {
        assert!(out.contains(want), "table lacks {want:?}:\n{out}");
    }
    // One row per measured or failed case, one per (memory pair, reason) of skipped cases, plus
    // the header row.
    let mut skip_groups: Vec<(String, Option<String>)> = Vec::new();
    for c in r.cases.iter().filter(|c| c.status == CaseStatus::Skipped) {
        let key = (c.memory.to_string(), c.reason.clone());
        if !skip_groups.contains(&key) {
            skip_groups.push(key);
        }
    }
    let others = r.cases.iter().filter(|c| c.status != CaseStatus::Skipped).count();
    assert_eq!(
        out.lines().filter(|l| l.starts_with('│')).count(),
        others + skip_groups.len() + 1,
        "{out}"
    );
    insta::assert_snapshot!("pair_table_pods_same_node", out);
    insta::assert_snapshot!(
        "pair_table_pods_same_node_80_columns",
        render_pair_in(&r, Format::Table, View::default()).unwrap()
    );
}

#[test]
fn skipped_cases_sharing_a_reason_collapse_into_one_row() {
    let mut r = pods_same_node();
    let skipped = r
        .cases
        .iter()
        .find(|c| c.status == CaseStatus::Skipped)
        .cloned()
        .expect("fixture has a skipped case");
    let rows_of = |r: &PairReport| {
        render_pair(r, Format::Wide)
            .unwrap()
            .lines()
            .filter(|l| l.starts_with('│'))
            .count()
    };
    let before = rows_of(&r);
    let group = r
        .cases
        .iter()
        .filter(|c| c.memory == skipped.memory && c.reason == skipped.reason)
        .count();
    for size in [1u64 << 10, 1 << 20] {
        let mut more = skipped.clone();
        more.size = size;
        more.test = TestKind::PutBw;
        r.cases.push(more);
    }
    assert_eq!(
        rows_of(&r),
        before,
        "skipped cases with one memory pair and reason make one row"
    );
    let out = render_pair(&r, Format::Wide).unwrap();
    let row = out.lines().find(|l| l.contains("skipped ×")).expect("a collapsed row");
    let count = format!("skipped ×{}", group + 2);
    for want in [
        count.as_str(),
        "put_bw",
        "3 sizes",
        "no CUDA driver",
        &skipped.memory.to_string(),
    ] {
        assert!(row.contains(want), "{want:?} missing in {row}");
    }
}

/// Issue 38: a pair's case findings read like a compiler's diagnostics in a fitted view (status,
/// `case`, which cases; then the reason at full width); `-o wide` keeps one line each.
#[test]
fn case_findings_are_diagnostics_unless_wide() {
    let r = pods_same_node();
    let out = render_pair_in(&r, Format::Table, View { width: 80, wide: false }).unwrap();
    let lines: Vec<&str> = out.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.starts_with("fail[case]: 3 cases, e.g. "))
        .unwrap_or_else(|| panic!("no header for the three alike:\n{out}"));
    assert_eq!(lines[at + 1], "  tcp fallback: data went over tcp/lo", "{out}");
    let one = lines
        .iter()
        .position(|l| *l == "fail[case]: get_bw 64 MiB host→host")
        .unwrap_or_else(|| panic!("no header for the one case:\n{out}"));
    assert!(
        lines[one + 1].starts_with("  tcp fallback: get emulated over active messages"),
        "{out}"
    );
    assert!(!out.contains(" ×3: "), "{out}");
    let wide = render_pair(&r, Format::Wide).unwrap();
    assert!(
        wide.contains("  fail ×3: tcp fallback: data went over tcp/lo\n"),
        "{wide}"
    );
}

#[test]
fn table_of_a_passing_run_has_no_hint() {
    let out = render_pair(&same_host_healthy(), Format::Wide).unwrap();
    assert!(out.contains("verdict: PASS: all 5 measured cases ok"), "{out}");
    assert!(!out.contains("hint:") && !out.contains("findings:"), "{out}");
    assert!(out.contains("rendezvous zero-copy read, cma/memory"));
}

#[test]
fn table_for_a_probe() {
    let out = render_probe(&probe_env(), Format::Wide).unwrap();
    for want in [
        "env.ucx_tls.tcp_only",
        "set UCX_TLS=rc_x,rc,dc_x,dc,cuda_copy,cuda_ipc",
        "1 ok, 1 warn, 1 fail, 1 skipped",
        "verdict: fail: fix first: env.ucx_tls.tcp_only",
        "next: ic-bench pair --local --isolation pod",
    ] {
        assert!(out.contains(want), "probe table lacks {want:?}:\n{out}");
    }
}

#[test]
fn json_is_the_struct_as_is() {
    let r = pods_same_node();
    let out = render_pair(&r, Format::Json).unwrap();
    let back: PairReport = serde_json::from_str(&out).unwrap();
    assert_eq!(back, r);
    let v: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["schema"], "ic-bench.pair/v1");
    assert_eq!(v["cases"][1]["transport"]["data_path"]["class"], "tcp");
    assert!(out.contains("\n  \"tool\": {"), "pretty printed");

    let p = probe_env();
    let back: ProbeReport = serde_json::from_str(&render_probe(&p, Format::Json).unwrap()).unwrap();
    assert_eq!(back, p);
}

#[test]
fn json_example_for_the_schema_doc() {
    // The docs/schema.md pair example is this fixture; keep them in step.
    insta::assert_snapshot!(
        "pair_json_same_host_healthy",
        render_pair(&same_host_healthy(), Format::Json).unwrap()
    );
    insta::assert_snapshot!("probe_json_env", render_probe(&probe_env(), Format::Json).unwrap());
}

#[test]
fn junit_has_one_testcase_per_case_and_failures_carry_the_reason() {
    let r = pods_same_node();
    let xml = render_pair(&r, Format::Junit).unwrap();
    let elems = parse_xml(&xml);
    let cases: Vec<(usize, &Elem)> = elems.iter().enumerate().filter(|(_, e)| e.name == "testcase").collect();
    assert_eq!(cases.len(), r.cases.len());
    let child = |parent: usize, name: &str| elems.iter().find(|e| e.parent == Some(parent) && e.name == name);

    let mut failures = 0;
    let mut skips = 0;
    for ((i, tc), case) in cases.iter().zip(&r.cases) {
        assert!(tc.attrs["name"].starts_with(case.test.as_str()), "{:?}", tc.attrs);
        let v = case.verdict.as_ref().unwrap();
        match v.status {
            Status::Fail => {
                failures += 1;
                let f = child(*i, "failure").expect("failure element");
                assert!(f.attrs["message"].contains("tcp fallback"), "{:?}", f.attrs);
                assert!(f.text.contains("hostIPC/hostPID"), "{}", f.text);
            }
            Status::Skipped => {
                skips += 1;
                assert!(child(*i, "skipped").is_some());
            }
            _ => assert!(child(*i, "failure").is_none()),
        }
    }
    assert_eq!(failures, 5);
    assert_eq!(skips, 2);
    let suite = elems.iter().find(|e| e.name == "testsuite").unwrap();
    assert_eq!(suite.attrs["failures"], "5");
    assert_eq!(suite.attrs["tests"], r.cases.len().to_string());

    let ok = parse_xml(&render_pair(&same_host_healthy(), Format::Junit).unwrap());
    assert!(ok.iter().all(|e| e.name != "failure"));

    // Warnings pass but stay visible.
    let warn = parse_xml(&render_pair(&two_nodes_rdma(), Format::Junit).unwrap());
    assert!(
        warn.iter()
            .any(|e| e.name == "system-out" && e.text.contains("warn: GPU memory staged"))
    );
}

#[test]
fn junit_for_a_probe_escapes_details() {
    let xml = render_probe(&probe_env(), Format::Junit).unwrap();
    let elems = parse_xml(&xml);
    assert_eq!(elems.iter().filter(|e| e.name == "testcase").count(), 4);
    let failure = elems.iter().find(|e| e.name == "failure").unwrap();
    assert!(failure.attrs["message"].contains("UCX_TLS=tcp"));
    assert!(xml.contains("&lt;crashes&gt; &amp; kernel"), "{xml}");
}

/// A sample line: `name{k="v",…} value`.
fn parse_sample(line: &str) -> (String, BTreeMap<String, String>, f64) {
    let (head, value) = line.rsplit_once(' ').expect("name and value");
    let value: f64 = value.parse().unwrap_or_else(|_| panic!("bad value in {line:?}"));
    let (name, labels) = match head.split_once('{') {
        Some((n, rest)) => (n, rest.strip_suffix('}').expect("closing brace")),
        None => (head, ""),
    };
    assert!(name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'), "{name}");
    let mut map = BTreeMap::new();
    for pair in labels.split("\",").filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once("=\"").expect("k=\"v\"");
        map.insert(k.to_string(), v.trim_end_matches('"').to_string());
    }
    (name.to_string(), map, value)
}

#[test]
fn prometheus_lines_parse_and_carry_base_units() {
    let r = pods_same_node();
    let text = render_pair(&r, Format::Prometheus).unwrap();
    assert!(text.trim_end().ends_with("# EOF"), "{text}");
    let samples: Vec<_> = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(parse_sample)
        .collect();

    let bw: Vec<_> = samples
        .iter()
        .filter(|s| s.0 == "icbench_bandwidth_bytes_per_second")
        .collect();
    assert_eq!(bw.len(), 4, "{text}");
    let big = bw
        .iter()
        .find(|s| s.1["test"] == "tag_bw" && s.1["size"] == "67108864")
        .expect("tag_bw 64 MiB sample");
    assert_eq!(big.1["memory"], "host-host");
    assert_eq!(big.1["transport"], "tcp");
    assert!((big.2 - 4.59e9).abs() < 1.0);

    let lat: Vec<_> = samples.iter().filter(|s| s.0 == "icbench_latency_seconds").collect();
    assert_eq!(lat.len(), 2);
    let p50 = lat.iter().find(|s| s.1["quantile"] == "0.5").unwrap();
    assert!((p50.2 - 6.6e-6).abs() < 1e-12);

    let statuses: Vec<_> = samples.iter().filter(|s| s.0 == "icbench_case_status").collect();
    assert_eq!(statuses.len(), r.cases.len());
    assert_eq!(statuses.iter().filter(|s| s.2 == 2.0).count(), 5);
    assert_eq!(statuses.iter().filter(|s| s.2 == -1.0).count(), 2);
    let verdict = samples.iter().find(|s| s.0 == "icbench_verdict_status").unwrap();
    assert_eq!(verdict.2, 2.0);
    assert_eq!(verdict.1["locality"], "same host");
    assert!(text.contains("# UNIT icbench_latency_seconds seconds"));
}

#[test]
fn prometheus_for_a_probe() {
    let text = render_probe(&probe_env(), Format::Prometheus).unwrap();
    let samples: Vec<_> = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(parse_sample)
        .collect();
    let fail = samples
        .iter()
        .find(|s| s.0 == "icbench_probe_check_status" && s.1["check"] == "env.ucx_tls.tcp_only")
        .unwrap();
    assert_eq!(fail.2, 2.0);
    assert_eq!(fail.1["scope"], "prefill");
    let overall = samples.iter().find(|s| s.0 == "icbench_probe_status").unwrap();
    assert_eq!(overall.2, 2.0);
}

#[test]
fn svg_is_xml_with_one_polyline_per_series() {
    for (r, series) in [(pods_same_node(), 3), (same_host_healthy(), 3), (two_nodes_rdma(), 3)] {
        let svg = render_pair(&r, Format::Svg).unwrap();
        let elems = parse_xml(&svg);
        assert_eq!(elems[0].name, "svg");
        assert_eq!(elems[0].attrs["xmlns"], "http://www.w3.org/2000/svg");
        let lines: Vec<&Elem> = elems.iter().filter(|e| e.name == "polyline").collect();
        assert_eq!(lines.len(), series, "{svg}");
        let measured_bw = r
            .cases
            .iter()
            .filter(|c| c.status == CaseStatus::Measured && c.test.is_bandwidth())
            .count();
        assert_eq!(
            elems.iter().filter(|e| e.attrs.contains_key("data-point")).count(),
            measured_bw
        );
        for l in &lines {
            for pt in l.attrs["points"].split(' ') {
                let (x, y) = pt.split_once(',').unwrap();
                let (x, y): (f64, f64) = (x.parse().unwrap(), y.parse().unwrap());
                assert!((0.0..=880.0).contains(&x) && (0.0..=520.0).contains(&y), "{pt}");
            }
        }
        assert!(svg.contains("bandwidth (GB/s)"));
        assert!(svg.contains("message size (log2 scale)"));
    }
    // Sizes grow left to right.
    let svg = render_pair(&same_host_healthy(), Format::Svg).unwrap();
    let elems = parse_xml(&svg);
    let tag = elems
        .iter()
        .find(|e| e.name == "polyline" && e.attrs["data-series"] == "tag_bw host→host")
        .unwrap();
    let xs: Vec<f64> = tag.attrs["points"]
        .split(' ')
        .map(|p| p.split_once(',').unwrap().0.parse().unwrap())
        .collect();
    assert!(xs.windows(2).all(|w| w[0] < w[1]));
}

#[test]
fn svg_without_bandwidth_cases_and_for_probes() {
    let mut r = same_host_healthy();
    r.cases.retain(|c| !c.test.is_bandwidth());
    let svg = render_pair(&r, Format::Svg).unwrap();
    let elems = parse_xml(&svg);
    assert!(elems.iter().all(|e| e.name != "polyline"));
    assert!(svg.contains("no bandwidth case was measured"));

    let err = render_probe(&probe_env(), Format::Svg).unwrap_err();
    assert!(matches!(err, ExportError::Unsupported { .. }));
    assert_eq!(
        err.to_string(),
        "-o svg cannot show probe results (there is no bandwidth to plot): use -o table, json, junit or prometheus"
    );
}

/// Display columns of a line (the box-drawing and arrow characters are one column each).
fn columns(line: &str) -> usize {
    line.chars().count()
}

#[test]
fn tables_fit_the_readers_width() {
    for width in [80u16, 100, 200] {
        let view = View { width, wide: false };
        for out in [
            render_pair_in(&pods_same_node(), Format::Table, view).unwrap(),
            render_pair_in(&two_nodes_rdma(), Format::Table, view).unwrap(),
            render_probe_in(&probe_env(), Format::Table, view).unwrap(),
        ] {
            for line in out.lines() {
                assert!(
                    columns(line) <= usize::from(width),
                    "{width}: {line:?} is too wide:\n{out}"
                );
            }
        }
    }
    // -o wide does not fold: the long data path stays on one row.
    let wide = render_pair_in(&pods_same_node(), Format::Wide, View { width: 80, wide: false }).unwrap();
    assert!(wide.lines().any(|l| columns(l) > 80), "{wide}");
}

#[test]
fn the_summary_comes_first_and_names_the_fix() {
    let out = render_pair_in(&pods_same_node(), Format::Table, View::default()).unwrap();
    let first_paragraph: String = out.split("\n\n").next().unwrap().replace("\n  ", " ");
    assert!(first_paragraph.starts_with("FAIL: tcp fallback"), "{first_paragraph}");
    assert!(
        first_paragraph.contains("Fix first: the two sides do not share IPC/PID namespaces"),
        "{first_paragraph}"
    );
    assert!(first_paragraph.contains("Evidence:"), "{first_paragraph}");

    let out = render_probe_in(&probe_env(), Format::Table, View::default()).unwrap();
    let first_paragraph: String = out.split("\n\n").next().unwrap().replace("\n  ", " ");
    assert!(
        first_paragraph.starts_with("FAIL. Fix first: env.ucx_tls.tcp_only"),
        "{first_paragraph}"
    );
    assert!(first_paragraph.contains("-o wide lists them"), "{first_paragraph}");
}

#[test]
fn ok_checks_collapse_into_a_count_unless_wide() {
    let p = probe_env();
    let ok_ids: Vec<&str> = p
        .checks
        .iter()
        .filter(|c| c.status == Status::Ok)
        .map(|c| c.id.as_str())
        .collect();
    assert!(!ok_ids.is_empty(), "the fixture has an ok check");
    let table = render_probe_in(&p, Format::Table, View::default()).unwrap();
    let wide = render_probe_in(&p, Format::Wide, View::default()).unwrap();
    for id in ok_ids {
        assert!(!table.contains(&format!("[{id}]")), "{table}");
        assert!(wide.lines().any(|l| l.starts_with('│') && l.contains(id)), "{wide}");
    }
    // What is not ok is listed, each a header with its status and id.
    for c in p.checks.iter().filter(|c| c.status != Status::Ok) {
        let head = format!("{}[{}]", c.status, c.id);
        assert!(table.lines().any(|l| l.starts_with(&head)), "{head}:\n{table}");
    }
    assert!(table.contains("ok checks not listed: -o wide lists all"), "{table}");
}

#[test]
fn shared_directories_of_paths_are_said_once() {
    let mut p = probe_env();
    for (i, c) in p.checks.iter_mut().enumerate() {
        c.scope = Some(format!("decode (Worker, /srv/recipes/team-{i}/deploy.yaml)"));
    }
    let p = ProbeReport::new(&p.kind, &p.target, p.checks, p.next_steps);
    let out = render_probe_in(
        &p,
        Format::Table,
        View {
            width: 200,
            wide: false,
        },
    )
    .unwrap();
    assert!(out.contains("paths below are relative to /srv/recipes/"), "{out}");
    let below = out.split("paths below are relative to /srv/recipes/").nth(1).unwrap();
    assert!(!below.contains("/srv/recipes/"), "{out}");
    assert!(
        below
            .lines()
            .any(|l| l.ends_with(": decode (Worker, team-0/deploy.yaml)")),
        "{out}"
    );
}

#[test]
fn svg_floors_start_where_they_apply_and_failures_are_marked() {
    let r = pods_same_node();
    let svg = render_pair(&r, Format::Svg).unwrap();
    let elems = parse_xml(&svg);
    let x_of = |label: &str| -> f64 {
        let tick = elems
            .iter()
            .position(|e| e.name == "text" && e.text == label)
            .unwrap_or_else(|| panic!("no {label} tick in {svg}"));
        elems[tick].attrs["x"].parse().unwrap()
    };
    // The last tick is the largest size measured.
    let largest = r.cases.iter().map(|c| c.size).max().unwrap();
    x_of(&icb_core::units::format_size(largest));
    let floor_from = icb_core::units::format_size(r.expectation.min_size_for_bandwidth);
    let floors: Vec<&Elem> = elems.iter().filter(|e| e.attrs.contains_key("data-floor")).collect();
    assert!(!floors.is_empty(), "{svg}");
    for f in floors {
        let x1: f64 = f.attrs["x1"].parse().unwrap();
        assert!(
            x1 > 80.0 && x1 <= x_of(&floor_from) + 0.1,
            "floor drawn from {x1}, not from {floor_from}"
        );
    }
    let failed_bw = r
        .cases
        .iter()
        .filter(|c| c.test.is_bandwidth() && c.verdict.as_ref().is_some_and(|v| v.status == Status::Fail))
        .count();
    assert!(failed_bw > 0);
    assert_eq!(
        elems.iter().filter(|e| e.attrs.contains_key("data-failed")).count(),
        failed_bw
    );
    // The legend names each series' data path.
    let paths: Vec<&str> = elems
        .iter()
        .filter_map(|e| e.attrs.get("data-path").map(String::as_str))
        .collect();
    assert!(paths.contains(&"tcp"), "{paths:?}");
    // Series differ in their dash pattern, so a line on top of another leaves it visible.
    let dashes: std::collections::BTreeSet<&str> = elems
        .iter()
        .filter(|e| e.name == "polyline")
        .map(|e| e.attrs["stroke-dasharray"].as_str())
        .collect();
    assert_eq!(dashes.len(), elems.iter().filter(|e| e.name == "polyline").count());
}

#[test]
fn prometheus_samples_are_sorted_and_carry_run_placement_and_hosts() {
    let r = two_nodes_rdma();
    let text = render_pair(&r, Format::Prometheus).unwrap();
    // Deterministic: the same report renders the same bytes every time.
    for _ in 0..5 {
        assert_eq!(render_pair(&r, Format::Prometheus).unwrap(), text);
    }
    let samples: Vec<_> = text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(parse_sample)
        .collect();
    assert!(!samples.is_empty());
    for (_, labels, _) in &samples {
        assert_eq!(labels["run_id"], r.started_at);
        assert_eq!(labels["placement"], "different_hosts");
        assert_eq!(labels["prefill_host"], r.placement.prefill.host);
        assert_eq!(labels["decode_host"], r.placement.decode.host);
    }
    // Within one metric and test, sizes ascend numerically.
    let bw: Vec<(String, u64)> = samples
        .iter()
        .filter(|s| s.0 == "icbench_bandwidth_bytes_per_second")
        .map(|s| {
            (
                format!("{} {}", s.1["memory"], s.1["test"]),
                s.1["size"].parse().unwrap(),
            )
        })
        .collect();
    let mut sorted = bw.clone();
    sorted.sort();
    assert_eq!(bw, sorted, "{text}");
}

#[test]
fn junit_testcases_carry_the_measured_values() {
    let r = two_nodes_rdma();
    let xml = render_pair(&r, Format::Junit).unwrap();
    let elems = parse_xml(&xml);
    let measured = r.cases.iter().find(|c| c.status == CaseStatus::Measured).unwrap();
    let case = elems
        .iter()
        .position(|e| e.name == "testcase" && e.attrs["name"] == icb_report_case_name(measured))
        .unwrap_or_else(|| panic!("no testcase for {measured:?} in {xml}"));
    let props: BTreeMap<&str, &str> = elems
        .iter()
        .filter(|e| e.name == "property")
        .filter(|e| {
            // A property belongs to the testcase when its <properties> parent is the testcase's child.
            e.parent.and_then(|p| elems[p].parent) == Some(case)
        })
        .map(|e| (e.attrs["name"].as_str(), e.attrs["value"].as_str()))
        .collect();
    assert_eq!(props["size_bytes"], measured.size.to_string());
    assert!(props.contains_key("data_path"), "{props:?}");
    let m = measured.measurement.as_ref().unwrap();
    match (m.bandwidth_bps, &m.latency_us) {
        (Some(bps), _) => assert_eq!(props["bandwidth_bytes_per_second"], format!("{bps:.0}")),
        (None, Some(l)) => assert_eq!(props["latency_p50_us"], format!("{:.3}", l.p50)),
        _ => panic!("a measured case has a value"),
    }
}

fn icb_report_case_name(c: &icb_core::model::CaseResult) -> String {
    format!("{} {} {}", c.test, c.memory, icb_core::units::format_size(c.size))
}

#[test]
fn a_thousand_findings_become_one_row_per_check_and_fix() {
    let p = probe_env();
    let mut checks = Vec::new();
    for i in 0..1000 {
        for c in p.checks.iter().filter(|c| c.status != Status::Ok) {
            let mut c = c.clone();
            c.scope = Some(format!("prefill (Worker, /srv/recipes/team-{}/r{i}.yaml)", i % 20));
            checks.push(c);
        }
    }
    let distinct = p.checks.iter().filter(|c| c.status != Status::Ok).count();
    let many = ProbeReport::new(&p.kind, &p.target, checks, vec![]);
    let out = render_probe_in(
        &many,
        Format::Table,
        View {
            width: 120,
            wide: false,
        },
    )
    .unwrap();
    let headers = out
        .lines()
        .filter(|l| ["fail[", "warn[", "skipped["].iter().any(|h| l.starts_with(h)))
        .count();
    assert!(
        out.contains(&format!(
            "{} findings, said once per check and fix ({distinct} below",
            1000 * distinct
        )),
        "{out}"
    );
    assert!(out.contains("1000 places, e.g."), "{out}");
    assert_eq!(headers, distinct, "{out}");
    assert!(out.lines().count() < 60, "{out}");
    // -o wide still lists every one.
    let wide = render_probe_in(&many, Format::Wide, View::default()).unwrap();
    assert!(wide.lines().filter(|l| l.starts_with('│')).count() > 1000 * distinct);
}

/// `connect --json-line`: exactly one compact JSON line, the report, on its stdout; without it
/// the `-o` format's text ending in one newline.
#[test]
fn a_pair_report_is_one_json_line_or_the_formats_text() {
    let report = same_host_healthy();
    let output = icb_report::output::Output::new(Format::Json, None, icb_report::Exports::new()).unwrap();
    let mut out = Vec::new();
    output.emit_pair(&report, true, &mut out).unwrap();
    let text = String::from_utf8(out).unwrap();
    assert_eq!(text.lines().count(), 1, "{text}");
    let back: PairReport = serde_json::from_str(text.trim_end()).unwrap();
    assert_eq!(back.cases.len(), report.cases.len());
    let mut out = Vec::new();
    output.emit_pair(&report, false, &mut out).unwrap();
    let want = render_pair_in(&report, Format::Json, output.view()).unwrap();
    assert_eq!(String::from_utf8(out).unwrap().trim_end(), want.trim_end());
}
