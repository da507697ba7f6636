//! A whole-node sweep (`sweep --rails`) in every format: 4 nodes × 4 aligned rails, node-3's
//! rail 2 slow with every partner, verdicts from the real scoring. The HTML report has the
//! node × rail heatmap (checked in headless Chromium too), the table lists the blamed rail under
//! the node verdicts within 80 and 100 columns, JUnit has a case per node rail and Prometheus a
//! gauge per node rail with its NIC and PCI address. A sweep without rails shows none of it.

use crate::sweep_fixture;

use icb_core::model::VerdictStatus;
use icb_core::rails::RailFindingKind;
use icb_report::{Exporter, Format, HtmlExporter, View, render_sweep_in};
use icb_sweep::results::{Outcome, PairResult, SWEEP_SCHEMA, SweepResults};
use icb_sweep::schedule::{Pair, Schedule};
use icb_sweep::{MovedCounters, RailNic, RailSummary};
use std::process::Command;

const RAILS: usize = 4;

fn nic(node: &str, rail: usize) -> RailNic {
    let n: usize = node.trim_start_matches("node-").parse().unwrap();
    RailNic {
        rail,
        nic: format!("mlx5_{rail}"),
        pci: Some(format!("0000:{:02x}:{rail:02x}.0", 0x10 * n)),
    }
}

fn outcome(pair: &Pair) -> Outcome {
    let slow = pair.involves("node-3");
    let rails = (0..RAILS)
        .map(|i| {
            let bad = slow && i == 2;
            RailSummary {
                index: i,
                prefill: nic(&pair.prefill, i),
                decode: nic(&pair.decode, i),
                bandwidth_bps: Some(if bad { 11.8e9 } else { 44.5e9 + i as f64 * 0.5e9 }),
                alone_bps: bad.then_some(11.9e9),
                status: if bad { VerdictStatus::Fail } else { VerdictStatus::Pass },
                findings: if bad {
                    vec![RailFindingKind::BelowMedian]
                } else {
                    vec![]
                },
                health: bad.then(|| "congested".into()),
                // node-3's NIC counted the congestion, its partner's nothing.
                counters: bad.then(|| {
                    let moved = vec![("np_cnp_sent".into(), 40), ("rp_cnp_handled".into(), 120)];
                    match pair.prefill == "node-3" {
                        true => MovedCounters {
                            prefill: moved,
                            decode: vec![],
                        },
                        false => MovedCounters {
                            prefill: vec![],
                            decode: moved,
                        },
                    }
                }),
            }
        })
        .collect();
    Outcome::Measured {
        verdict: if slow {
            icb_core::VerdictStatus::Fail
        } else {
            icb_core::VerdictStatus::Pass
        },
        reason: if slow {
            "rail 2 is slow"
        } else {
            "every rail met its floor"
        }
        .into(),
        data_paths: vec!["rdma".into()],
        bandwidth_bps: Some(if slow { 11.8e9 } else { 44.5e9 }),
        latency_us: None,
        series: vec![],
        latency: vec![],
        warnings: vec![],
        rails,
        controls: vec![],
        nic: None,
    }
}

fn rails_sweep() -> SweepResults {
    let nodes: Vec<String> = (1..=4).map(|i| format!("node-{i}")).collect();
    let rounds = Schedule::AllPairs.rounds(&nodes, 0).unwrap();
    let pairs: Vec<PairResult> = rounds
        .iter()
        .enumerate()
        .flat_map(|(i, round)| {
            round.iter().enumerate().map(move |(j, pair)| PairResult {
                pair: pair.clone(),
                pass: 1,
                run_id: format!("swrails01-p1r{i}x{j}"),
                duration_s: 20.0,
                finished_at: None,
                outcome: outcome(pair),
            })
        })
        .collect();
    let node_verdicts = icb_sweep::score::final_verdicts(&nodes, &pairs);
    SweepResults {
        schema: SWEEP_SCHEMA.into(),
        tool_version: "0.0.0-fixture".into(),
        sweep_id: "swrails01".into(),
        started_at: "2026-11-24T02:00:00Z".into(),
        updated_at: "2026-11-24T02:10:00Z".into(),
        complete: true,
        schedule: Schedule::AllPairs,
        nodes,
        pair_budget_s: 120.0,
        rounds,
        pairs,
        node_verdicts,
        criteria: None,
        attempt: 1,
        stopped: None,
        baseline: None,
        node_readiness: Default::default(),
        fleet: None,
    }
}

fn render(r: &SweepResults, format: Format, view: View) -> String {
    render_sweep_in(r, format, view).unwrap_or_else(|e| panic!("{format}: {e}"))
}

#[test]
fn the_fixture_blames_node_3_rail_2_only() {
    let r = rails_sweep();
    for v in &r.node_verdicts {
        let want = if v.node == "node-3" { "fail" } else { "pass" };
        assert_eq!(v.status.as_str(), want, "{}: {:?}", v.node, v.evidence);
    }
    let n3 = r.node_verdicts.iter().find(|v| v.node == "node-3").unwrap();
    assert_eq!(n3.bad_rails.len(), 1);
    assert_eq!(n3.bad_rails[0].nic, nic("node-3", 2));
    // The results file carries both, and reads back.
    let json = render(&r, Format::Json, View::default());
    let back: SweepResults = serde_json::from_str(&json).unwrap();
    assert_eq!(back, r);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["pairs"][0]["outcome"]["rails"].as_array().unwrap().len(), RAILS);
    let bad = v["node_verdicts"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["node"] == "node-3")
        .unwrap()["bad_rails"]
        .clone();
    assert_eq!(bad[0]["nic"]["pci"], "0000:30:02.0");
    assert_eq!(bad[0]["status"], "fail");
}

#[test]
fn html_has_a_node_by_rail_heatmap_with_partners_in_the_tooltips() {
    let html = HtmlExporter.sweep(&rails_sweep()).unwrap();
    assert!(html.contains("<table id=\"rail-heatmap\">"), "{html}");
    assert_eq!(html.matches("class=\"rail-cell ").count(), 4 * RAILS);
    assert_eq!(html.matches("class=\"rail-cell fail\"").count(), 1);
    let at = html.find("class=\"rail-cell fail\"").unwrap();
    let cell = &html[at..at + html[at..].find("</td>").unwrap()];
    assert!(
        cell.contains("title=\"node-3 rail 2 (mlx5_2 0000:30:02.0): fail"),
        "{cell}"
    );
    for partner in ["node-1", "node-2", "node-4"] {
        let line = format!("with {partner}: 11.80 GB/s, bad; NIC counters np_cnp_sent +40, rp_cnp_handled +120");
        assert!(
            cell.contains(&line),
            "the counters node-3's NIC counted with each: {cell}"
        );
    }
    // Its partners' rail 2 was slow with node-3 too, but their own NICs counted nothing.
    let cells = html.split("<td class=\"rail-cell ").skip(1);
    let cells = cells.map(|c| &c[..c.find("</td>").unwrap_or(c.len())]);
    let partner_cells: Vec<&str> = cells.filter(|c| c.contains(" rail 2 (")).collect();
    assert_eq!(partner_cells.len(), 4);
    for c in partner_cells.iter().filter(|c| !c.contains("node-3 rail 2")) {
        assert!(
            c.contains("with node-3: 11.80 GB/s, bad") && !c.contains("NIC counters"),
            "{c}"
        );
    }
    assert!(cell.ends_with(">11.80"), "the median across partners: {cell}");
    // The pair heatmap is still there, beside it.
    let maps = html.find("<div class=\"maps\">").unwrap();
    assert!(maps < html.find("id=\"heatmap\"").unwrap() && maps < html.find("id=\"rail-heatmap\"").unwrap());
    check_in_browser(&html);
    // Without rails, no rail view.
    let plain = HtmlExporter.sweep(&sweep_fixture::fixture()).unwrap();
    assert!(!plain.contains("id=\"rail-heatmap\"") && !plain.contains("class=\"rail-cell"));
}

#[test]
fn the_table_lists_the_blamed_rail_under_the_verdicts_within_the_width() {
    let r = rails_sweep();
    for width in [80u16, 100] {
        let text = render(&r, Format::Table, View { width, wide: false });
        for line in text.lines() {
            assert!(line.chars().count() <= width as usize, "{width}: {line:?}\n{text}");
        }
        assert!(text.starts_with("FAIL: node-3"), "{text}");
        let below = &text[text.find("Bad rails:").expect("a bad-rails list")..];
        assert!(
            below.contains("FAIL node-3 rail 2 (mlx5_2 0000:30:02.0): bad with"),
            "{below}"
        );
        assert_eq!(below.matches("FAIL ").count(), 1, "{below}");
    }
    let plain = render(&sweep_fixture::fixture(), Format::Table, View::default());
    assert!(!plain.contains("Bad rails:"), "{plain}");
}

#[test]
fn junit_has_a_case_per_node_rail_and_fails_the_blamed_one() {
    let xml = render(&rails_sweep(), Format::Junit, View::default());
    let suite = &xml[xml.find("<testsuite name=\"rails\"").expect("a rails suite")..];
    let suite = &suite[..suite.find("</testsuite>").unwrap()];
    assert_eq!(suite.matches("classname=\"rail\"").count(), 4 * RAILS, "{suite}");
    assert_eq!(suite.matches("<failure").count(), 1, "{suite}");
    assert!(
        suite.contains("fail: node-3 rail 2 (mlx5_2 0000:30:02.0): bad with node-1, node-2 and node-4"),
        "{suite}"
    );
    assert!(
        suite.contains("name=\"node-1 rail 2 (mlx5_2 0000:10:02.0)\""),
        "{suite}"
    );
    let plain = render(&sweep_fixture::fixture(), Format::Junit, View::default());
    assert!(!plain.contains("<testsuite name=\"rails\""));
}

#[test]
fn prometheus_has_per_rail_gauges_with_the_nic_and_its_pci_address() {
    let prom = render(&rails_sweep(), Format::Prometheus, View::default());
    let sample = |family: &str, node: &str, rail: usize| -> f64 {
        let want = format!(
            "node=\"{node}\",rail=\"{rail}\",nic=\"mlx5_{rail}\",pci=\"{}\"",
            nic(node, rail).pci.unwrap()
        );
        let line = prom
            .lines()
            .find(|l| l.starts_with(&format!("{family}{{")) && l.contains(&want))
            .unwrap_or_else(|| panic!("{family} {want}:\n{prom}"));
        line.rsplit(' ').next().unwrap().parse().unwrap()
    };
    assert_eq!(sample("icbench_sweep_rail_status", "node-3", 2), 2.0);
    assert_eq!(sample("icbench_sweep_rail_status", "node-3", 1), 0.0);
    assert_eq!(sample("icbench_sweep_rail_status", "node-1", 2), 0.0);
    assert_eq!(
        sample("icbench_sweep_rail_bandwidth_bytes_per_second", "node-3", 2),
        11.8e9
    );
    // node-1's rail 2 was slow only with node-3: its median is its healthy figure, its worst not.
    assert_eq!(
        sample("icbench_sweep_rail_bandwidth_bytes_per_second", "node-1", 2),
        45.5e9
    );
    assert_eq!(
        sample("icbench_sweep_rail_worst_bandwidth_bytes_per_second", "node-1", 2),
        11.8e9
    );
    let statuses = prom
        .lines()
        .filter(|l| l.starts_with("icbench_sweep_rail_status{"))
        .count();
    assert_eq!(statuses, 4 * RAILS);
    let plain = render(&sweep_fixture::fixture(), Format::Prometheus, View::default());
    assert!(!plain.contains("icbench_sweep_rail_"), "no empty rail families");
}

/// Loads the HTML in headless Chromium and reads the rendered DOM: the rail heatmap and its
/// cells must be there. Under CI Chromium is required (scripts/setup installs Debian's);
/// elsewhere a missing browser skips with a note.
fn check_in_browser(html: &str) {
    let Some(browser) = ["chromium", "chromium-browser", "google-chrome"].into_iter().find(|b| {
        Command::new(b)
            .arg("--version")
            .output()
            .is_ok_and(|o| o.status.success())
    }) else {
        assert!(
            std::env::var_os("CI").is_none(),
            "Chromium is required under CI (scripts/setup)"
        );
        eprintln!("check_in_browser: no Chromium installed; skipped");
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let page = dir.path().join("sweep.html");
    std::fs::write(&page, html).unwrap();
    let profile = dir.path().join("profile");
    // `timeout`: a browser that hangs fails the test instead of holding it.
    let out = Command::new("timeout")
        .args(["60", browser, "--headless", "--no-sandbox", "--disable-gpu"])
        .args([
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
        ])
        .args(["--no-first-run", "--dump-dom"])
        .arg(format!("--user-data-dir={}", profile.display()))
        .arg(format!("file://{}", page.display()))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{browser}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let dom = String::from_utf8_lossy(&out.stdout);
    assert!(dom.contains("id=\"rail-heatmap\""), "{}", &dom[..dom.len().min(500)]);
    assert_eq!(dom.matches("class=\"rail-cell ").count(), 4 * RAILS);
    assert_eq!(dom.matches("class=\"rail-cell fail\"").count(), 1);
    assert!(dom.contains("id=\"heatmap\"") && dom.contains("id=\"nodes\""));
}
