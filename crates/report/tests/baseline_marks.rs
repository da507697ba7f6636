//! `--baseline` in every format: a figure slower than its history is "pass, regressed" (never a
//! fail) in the pair table and JUnit, the sweep table, JUnit and HTML (with the trend), with the
//! baseline figure beside it. The baselines are the history crate's, from recorded nights.

use crate::common;
use crate::sweep_fixture;

use icb_core::model::{BaselineVerdict, PairReport};
use icb_history::{BaselineSource, Options, Prepared};
use icb_report::{Format, View, render_pair_in, render_sweep_in};
use icb_sweep::results::Outcome;

fn history(dir: &tempfile::TempDir) -> Prepared {
    Options {
        history: Some(dir.path().join("h.db")),
        baseline: Some(BaselineSource::Last(5)),
        ..Options::default()
    }
    .prepare()
    .unwrap()
}

/// The healthy same-host report on night `n`, every bandwidth × `bw`.
fn pair_night(n: u32, bw: f64) -> PairReport {
    let mut r = common::same_host_healthy();
    r.started_at = format!("2026-11-{:02}T02:00:00Z", n + 1);
    for m in r.cases.iter_mut().filter_map(|c| c.measurement.as_mut()) {
        if let Some(b) = m.bandwidth_bps.as_mut() {
            *b *= bw;
        }
    }
    r
}

const VIEW: View = View {
    width: 100,
    wide: false,
};

#[test]
fn a_regressed_pair_case_reads_ok_regressed_with_its_baseline() {
    let dir = tempfile::tempdir().unwrap();
    let mut h = history(&dir);
    for n in 0..3 {
        h.pair(&mut pair_night(n, 1.0)).unwrap();
    }
    let mut r = pair_night(3, 0.5);
    h.pair(&mut r).unwrap();
    let b = r.baseline.as_deref().unwrap();
    assert!(b.regressed > 0);
    let table = render_pair_in(&r, Format::Table, VIEW).unwrap();
    assert!(table.starts_with("PASS:"), "regressed is not failed: {table}");
    // The verdict cell reads `ok, regressed`, on one line or wrapped at its comma (at 100
    // columns the data path's `rendezvous zero-copy read,` is kept whole first, issue 38).
    let verdict_cells: Vec<&str> = table
        .lines()
        .filter_map(|l| l.rsplit('┆').next())
        .map(|cell| cell.trim_end_matches('│').trim())
        .collect();
    assert!(
        table.contains("ok, regressed") || verdict_cells.windows(2).any(|w| w == ["ok,", "regressed"]),
        "{table}"
    );
    assert!(
        table.contains("Regressed:") && table.contains("baseline last:5:"),
        "{table}"
    );
    assert!(table.contains("regressed -50.0 % vs"), "the baseline figure: {table}");
    assert!(table.lines().all(|l| l.chars().count() <= 100), "{table}");
    let junit = render_pair_in(&r, Format::Junit, VIEW).unwrap();
    assert!(
        junit.contains("name=\"baseline.bandwidth\" value=\"regressed -50.0 % vs"),
        "{junit}"
    );
    assert!(!junit.contains("<failure"), "{junit}");
    let json: serde_json::Value = serde_json::from_str(&render_pair_in(&r, Format::Json, VIEW).unwrap()).unwrap();
    assert_eq!(json["baseline"]["regressed"], b.regressed);
}

/// The fixture sweep on night `n`, node-2's pairs × `slow`.
fn sweep_night(n: u32, slow: f64) -> icb_sweep::SweepResults {
    let mut r = sweep_fixture::fixture();
    r.sweep_id = format!("swfix{n:02}");
    r.started_at = format!("2026-11-{:02}T02:00:00Z", n + 1);
    // A healthy fleet (the fixture's node-4 over TCP made healthy), so a median moves only with
    // its own node.
    let healthy = r
        .pairs
        .iter()
        .find(|p| p.pair.involves("node-1") && p.pair.involves("node-3"))
        .unwrap()
        .outcome
        .clone();
    r.pairs.retain(|p| p.pass == 1);
    for p in r.pairs.iter_mut().filter(|p| p.pair.involves("node-4")) {
        p.outcome = healthy.clone();
    }
    for p in r.pairs.iter_mut().filter(|p| p.pair.involves("node-2")) {
        if let Outcome::Measured { series, .. } = &mut p.outcome {
            series.iter_mut().for_each(|s| s.bandwidth_bps *= slow);
        }
        if let Outcome::Measured {
            bandwidth_bps: Some(b), ..
        } = &mut p.outcome
        {
            *b *= slow;
        }
    }
    r.node_verdicts = icb_sweep::score::final_verdicts(&r.nodes, &r.pairs);
    r
}

#[test]
fn a_sweep_marks_the_regressed_node_in_its_table_junit_and_html() {
    let dir = tempfile::tempdir().unwrap();
    let mut h = history(&dir);
    for n in 0..3 {
        h.sweep(&mut sweep_night(n, 1.0)).unwrap();
    }
    let mut r = sweep_night(3, 0.85);
    h.sweep(&mut r).unwrap();
    let b = r.baseline.as_deref().unwrap();
    assert!(
        b.regressed > 0
            && b.regressions()
                .all(|c| c.case.prefill == "node-2" || c.case.decode == "node-2")
    );
    let table = render_sweep_in(&r, Format::Table, VIEW).unwrap();
    let node2 = table.lines().find(|l| l.contains("node-2")).unwrap();
    assert!(node2.contains("pass, regressed"), "{table}");
    for partner in ["node-1", "node-3", "node-4"] {
        let row = table.lines().find(|l| l.starts_with(&format!("│ {partner} "))).unwrap();
        assert!(
            !row.contains("regressed"),
            "one slow pair with node-2 does not make {partner} regressed: {table}"
        );
    }
    assert!(table.contains("regressed -15.0 % vs"), "{table}");
    let junit = render_sweep_in(&r, Format::Junit, VIEW).unwrap();
    assert!(
        junit.contains("name=\"baseline.median_bandwidth\" value=\"regressed -15.0 % vs 22.00 GB/s (mean of 3)\""),
        "{junit}"
    );
    let html = icb_report::Exporter::sweep(&icb_report::HtmlExporter, &r).unwrap();
    assert!(
        html.contains("<table id=\"pair-trends\">") && html.contains("<table id=\"node-trends\">"),
        "{html}"
    );
    let regressed_rows = html.matches("<tr class=\"regressed\">").count();
    let regressed_nodes = r.nodes.iter().filter(|n| b.node_regressed(n)).count();
    assert_eq!(regressed_nodes, 1, "node-2 alone");
    assert_eq!(
        regressed_rows,
        b.regressed + regressed_nodes,
        "every regressed figure and node marked"
    );
    assert_eq!(
        b.checks
            .iter()
            .filter(|c| c.verdict == BaselineVerdict::Regressed)
            .count(),
        b.regressed
    );
    assert!(html.contains("<svg class=\"spark\""));
}
