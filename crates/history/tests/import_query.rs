//! `history import` of pair and sweep files, and what `history list/show/compare` answer.

use crate::common;

use common::{TempHistory, night, sweep_night};
use icb_core::model::{BaselineVerdict, Metric};
use icb_history::HistoryError;
use icb_history::baseline::Thresholds;

fn write_json(t: &TempHistory, name: &str, value: &impl serde::Serialize) -> std::path::PathBuf {
    let path = t.dir.path().join(name);
    std::fs::write(&path, serde_json::to_string_pretty(value).unwrap()).unwrap();
    path
}

#[test]
fn pair_and_sweep_files_import_once() {
    let t = TempHistory::new();
    let files = [
        write_json(&t, "pair.json", &night(0, "n1", "n2", 1.0, 1.0)),
        write_json(&t, "sweep0.json", &sweep_night(0, None)),
        write_json(&t, "sweep1.json", &sweep_night(1, Some(("n3", 30e9)))),
    ];
    let mut h = t.open();
    let done = h.import(&files).unwrap();
    let kinds: Vec<_> = done.iter().map(|d| (d.kind, d.rows, d.replaced)).collect();
    assert_eq!(kinds, [("pair", 2, false), ("sweep", 6, false), ("sweep", 6, false)]);
    let again = h.import(&files[1..2]).unwrap();
    assert!(again[0].replaced, "a file imported twice replaces its run");
    let runs = h.runs(10).unwrap();
    assert_eq!(
        runs.iter().map(|r| r.run_id.as_str()).collect::<Vec<_>>()[..2],
        ["sw0001", "sw0000"]
    );
    assert_eq!(runs[0].pairs, 3);
}

#[test]
fn bad_import_files_are_refused_by_kind() {
    let t = TempHistory::new();
    let mut h = t.open();
    let not_json = t.dir.path().join("x.json");
    std::fs::write(&not_json, "nope").unwrap();
    let other = write_json(&t, "probe.json", &serde_json::json!({"schema": "ic-bench.probe/v1"}));
    for f in [not_json, other, t.dir.path().join("missing.json")] {
        let e = h.import(&[f]).unwrap_err();
        assert!(matches!(e, HistoryError::Import { .. }), "{e}");
        assert!(!e.to_string().contains('\n'));
    }
}

#[test]
fn node_and_pair_trends_and_a_comparison_show_the_throttled_node() {
    let t = TempHistory::new();
    let mut h = t.open();
    let files: Vec<_> = (0..4)
        .map(|n| {
            let slow = (n == 3).then_some(("n3", 20e9));
            write_json(&t, &format!("s{n}.json"), &sweep_night(n, slow))
        })
        .collect();
    h.import(&files).unwrap();
    let trend = h.node_trend("n3", 30).unwrap();
    assert_eq!(trend.len(), 4);
    assert_eq!(
        trend.iter().map(|p| p.median_bps.unwrap()).collect::<Vec<_>>(),
        [40e9, 40e9, 40e9, 20e9]
    );
    let text = icb_history::render::node("n3", &trend);
    assert!(text.contains("▄▄▄") || text.contains("███▁"), "{text}");
    assert!(text.lines().all(|l| l.chars().count() <= 100), "{text}");

    let pair = h.pair_trend("n3", "n1", 30).unwrap();
    let bw = pair.iter().find(|c| c.metric == Metric::BandwidthBps).unwrap();
    assert_eq!(bw.points.len(), 4);
    let text = icb_history::render::pair("n3", "n1", &pair, Some(100));
    assert!(text.contains("███▁"), "{text}");
    assert!(text.lines().all(|l| l.chars().count() <= 100), "{text}");

    let rows = h.compare_runs("sw0002", "sw0003", Thresholds::default()).unwrap();
    let regressed: Vec<_> = rows
        .iter()
        .filter(|r| r.verdict == Some(BaselineVerdict::Regressed))
        .map(|r| r.case.pair_label())
        .collect();
    assert_eq!(regressed.len(), 2, "the two pairs with n3: {regressed:?}");
    assert!(regressed.iter().all(|p| p.contains("n3")));
    let text = icb_history::render::compare("sw0002", "sw0003", &rows, Some(100));
    assert!(text.contains("-50.0%") && text.contains("regressed"), "{text}");
    assert!(text.lines().all(|l| l.chars().count() <= 100), "{text}");
    let e = h.compare_runs("sw0002", "nope", Thresholds::default()).unwrap_err();
    assert!(e.to_string().contains("no run 'nope'"), "{e}");
}
