//! docs/schema.md's examples must be real: they parse as the structs, and the verdicts in them
//! are what the verdict rules give.

use icb_core::checks::ProbeReport;
use icb_core::model::{PAIR_SCHEMA, PairReport};
use icb_core::verdict::{judge, parse_expectation_config};

fn blocks(lang: &str) -> Vec<String> {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/schema.md")).unwrap();
    let fence = format!("```{lang}\n");
    doc.split(&fence)
        .skip(1)
        .map(|rest| rest.split("\n```").next().unwrap_or("").to_string())
        .collect()
}

#[test]
fn pair_example_is_a_judged_report() {
    let json = blocks("json");
    assert_eq!(
        json.len(),
        14,
        "one pair, one case NIC counters, one controls, one rails, one rail health, one kv, one CUDA allocation, one probe, one rail map, one sweep, one gate, one baseline, one probe serving and one fabric matrix example"
    );
    let report: PairReport = serde_json::from_str(&json[0]).unwrap();
    assert_eq!(report.schema, PAIR_SCHEMA);
    // A rendezvous tag case names the receiver's choice (issue 35).
    let rendezvous = report
        .cases
        .iter()
        .find_map(|c| c.transport.as_ref().and_then(|t| t.chosen_by));
    assert_eq!(rendezvous, Some(icb_core::model::ProtocolSide::Target));
    let mut rejudged = report.clone();
    judge(&mut rejudged);
    assert_eq!(rejudged.verdict, report.verdict);
    for (a, b) in rejudged.cases.iter().zip(&report.cases) {
        assert_eq!(a.verdict, b.verdict, "case {} {}", a.test, a.size);
    }
    // The readiness section is what comparing its two sides gives (issue 40).
    let readiness = report.readiness.as_deref().expect("a readiness section");
    let compared = icb_core::readiness::PairReadiness::of(readiness.prefill.clone(), readiness.decode.clone());
    assert_eq!(readiness, &compared);
    let doc: serde_json::Value = serde_json::from_str(&json[0]).unwrap();
    assert_eq!(
        serde_json::to_value(readiness).unwrap(),
        doc["readiness"],
        "no field renamed or dropped"
    );
}

/// Issue 35 item 4: the controls example is what the types write, and its knobs-off entry's
/// effect is what the margin gives for its two rows.
#[test]
fn controls_example_is_what_the_types_write() {
    use icb_core::model::{ControlKind, ControlResult, KnobsEffect};
    let text = &blocks("json")[2];
    let controls: Vec<ControlResult> = serde_json::from_str(text).unwrap();
    let doc: serde_json::Value = serde_json::from_str(text).unwrap();
    assert_eq!(
        serde_json::to_value(&controls).unwrap(),
        doc,
        "no field renamed or dropped"
    );
    let kinds: Vec<ControlKind> = controls.iter().map(|c| c.kind).collect();
    assert_eq!(kinds, [ControlKind::Tcp, ControlKind::KnobsOff]);
    let k = &controls[1];
    let effect = KnobsEffect::of(k.main_bandwidth_bps.unwrap(), k.bandwidth_bps.unwrap());
    assert_eq!(
        (k.effect, effect),
        (Some(KnobsEffect::Slower), Some(KnobsEffect::Slower))
    );
    assert!(
        k.detail.starts_with(&format!("the recipe's {}", k.removed.join(", "))),
        "{}",
        k.detail
    );
}

#[test]
fn rails_example_is_what_the_rail_judge_gives() {
    use icb_core::model::{BandwidthUnit, VerdictStatus};
    use icb_core::rails::RailsOutcome;
    use icb_core::rails::judge::judge_rails;
    let text = &blocks("json")[3];
    let rails: RailsOutcome = serde_json::from_str(text).unwrap();
    // What the document shows is what the types write.
    let doc: serde_json::Value = serde_json::from_str(text).unwrap();
    assert_eq!(serde_json::to_value(&rails).unwrap(), doc);
    // And the verdicts and findings are the judge's, from the rows' runs and counters.
    let mut rows = rails.rails.clone();
    for r in &mut rows {
        r.status = VerdictStatus::Pass;
        r.line_rate_share = None;
    }
    let again = judge_rails(rails.pattern, rows, rails.margin, BandwidthUnit::GBps);
    assert_eq!(again, rails);
    assert_eq!(rails.findings[0].rail, Some(1));
}

#[test]
fn kv_example_is_what_the_types_write() {
    use icb_core::KvOutcome;
    let text = &blocks("json")[5];
    let kv: KvOutcome = serde_json::from_str(text).unwrap();
    let doc: serde_json::Value = serde_json::from_str(text).unwrap();
    assert_eq!(serde_json::to_value(&kv).unwrap(), doc);
    // The figures agree with each other: synchronised, a request ends with its last peer in
    // every repetition (so its p50 is at least every peer's), one record per rank process, each
    // in every repetition; the sums are the peers'.
    assert!(kv.synchronised);
    let slowest = kv.peers.iter().filter_map(|p| p.request_ms_p50).fold(0.0, f64::max);
    assert!(kv.request_ms_p50.is_some_and(|r| r >= slowest));
    assert_eq!(kv.ranks.len() as u32, kv.prefill_tp + kv.decode_tp);
    let reps = kv.repetitions.unwrap();
    assert!(kv.ranks.iter().all(|r| r.repetitions == reps));
    assert!(kv.peers.iter().all(|p| p.repetitions == reps));
    assert_eq!(
        kv.bytes_moved_per_request,
        kv.peers.iter().map(|p| p.bytes).sum::<u64>()
    );
    assert_eq!(
        kv.descriptors_per_request,
        kv.peers.iter().map(|p| p.descriptors).sum::<u64>()
    );
    assert!(kv.summary.starts_with("llama-3.1-8b, 64 tokens, TP2→TP1: KV transfer "));
    // Issue 42: the bursts' figures agree with their rule (aggregate = every copy's bytes over
    // the burst's p50; the frontier the smallest size at 90 % of the best), and the other
    // operation is the one the run did not do, its rate its bytes over its p50.
    let bursts = kv.bursts.as_ref().expect("the example's bursts");
    for b in &bursts.sizes {
        let rate = f64::from(b.requests) * kv.bytes_moved_per_request as f64 / (b.burst_ms_p50 / 1e3);
        assert!((b.aggregate_bps - rate).abs() < 1.0, "{b:?}");
        assert!(
            b.request_ms_p95 >= b.request_ms_p50 && b.burst_ms_p95 >= b.request_ms_p95,
            "{b:?}"
        );
    }
    let best = bursts.sizes.iter().map(|b| b.aggregate_bps).fold(0.0, f64::max);
    let frontier = bursts
        .sizes
        .iter()
        .find(|b| b.aggregate_bps >= 0.9 * best)
        .map(|b| b.requests);
    assert_eq!(bursts.frontier, frontier);
    let other = &kv.directions.as_ref().expect("the example's push and pull").other;
    assert_ne!(other.op, kv.op);
    let rate = kv.bytes_moved_per_request as f64 / (other.times.request_ms_p50.unwrap() / 1e3);
    assert!((other.times.bandwidth_bps.unwrap() - rate).abs() < 1.0, "{other:?}");
    // Issue 42's CollectiveX fields: the model's layers; every request time's spread ordered
    // (min ≤ p50 ≤ p95 ≤ p99 ≤ max) over the main run, the bulk row and the other operation, and
    // each burst's (min ≤ p50 ≤ p95 ≤ max, the first request done no later than the burst).
    assert_eq!(kv.layers, Some(32));
    let bulk = kv.bulk.as_ref().expect("the example's bulk row");
    for (p50, p99, s) in [
        (kv.request_ms_p50, kv.request_ms_p99, &kv.spread),
        (bulk.times.request_ms_p50, bulk.times.request_ms_p99, &bulk.times.spread),
        (
            other.times.request_ms_p50,
            other.times.request_ms_p99,
            &other.times.spread,
        ),
    ] {
        let v = [s.min, p50, s.p95, p99, s.max].map(|v| v.expect("in the example"));
        assert!(v.windows(2).all(|w| w[0] <= w[1]), "{v:?}");
    }
    for b in &bursts.sizes {
        let burst = [
            b.burst_ms_min,
            Some(b.burst_ms_p50),
            Some(b.burst_ms_p95),
            b.burst_ms_max,
        ];
        let request = [
            b.request_ms_min,
            Some(b.request_ms_p50),
            Some(b.request_ms_p95),
            b.request_ms_max,
        ];
        for v in [burst, request].map(|v| v.map(|v| v.expect("in the example"))) {
            assert!(v.windows(2).all(|w| w[0] <= w[1]), "{b:?}");
        }
        assert!(b.request_ms_min <= b.burst_ms_min, "{b:?}");
    }
}

/// The KV example as CollectiveX `kv-transfer` rows (docs/collectivex.md): the paged request
/// (batch 1, `prep_ms` its cold path's preparation), its bursts of 2 and more, the other
/// operation, the bulk row; each row's GB/s its bytes × batch over its p50.
#[test]
fn the_kv_example_is_collectivex_rows_field_by_field() {
    use icb_core::KvOutcome;
    use icb_report::{Format, render_pair};
    let kv: KvOutcome = serde_json::from_str(&blocks("json")[5]).unwrap();
    let mut report: PairReport = serde_json::from_str(&blocks("json")[0]).unwrap();
    report.kv = Some(Box::new(kv.clone()));
    let doc: serde_json::Value = serde_json::from_str(&render_pair(&report, Format::Collectivex).unwrap()).unwrap();
    assert_eq!(doc["suite"], "kv-transfer");
    assert_eq!(doc["measurement"]["payload_unit"], "request-kv-bytes");
    let rows = doc["measurement"]["rows"].as_array().unwrap();
    let bursts = kv.bursts.as_ref().unwrap();
    let burst_rows = bursts.sizes.iter().filter(|b| b.requests > 1).count();
    assert_eq!(rows.len(), 1 + burst_rows + 2, "{doc:#}");
    let paged = &rows[0];
    assert_eq!(
        (paged["kind"].as_str(), paged["op"].as_str(), paged["batch"].as_u64()),
        (Some("paged"), Some("pull"), Some(1))
    );
    assert_eq!(paged["preset"], "llama-3.1-8b");
    assert_eq!(paged["isl"], 64);
    assert_eq!(paged["page_tokens"], 16);
    assert_eq!(paged["page_bytes"], 16384);
    assert_eq!(paged["descs"], 512);
    assert_eq!(paged["layers"], 32);
    assert_eq!(paged["req_bytes"], 8388608);
    assert_eq!(paged["prep_ms"].as_f64(), kv.cold.as_ref().map(|c| c.prepare_ms));
    let p50 = kv.request_ms_p50.unwrap();
    assert_eq!(paged["latency_ms"]["p50"].as_f64(), Some(p50));
    let spread = |row: &serde_json::Value| ["p95", "min", "max"].map(|k| row["latency_ms"][k].as_f64());
    assert_eq!(spread(paged), [kv.spread.p95, kv.spread.min, kv.spread.max]);
    assert!(kv.spread.p95.is_some());
    let gbps = 8388608.0 / p50 / 1e6;
    assert!((paged["gbps_p50"].as_f64().unwrap() - gbps).abs() < 1e-9, "{paged}");
    assert_eq!(paged["verify"]["passed"], true);
    assert_eq!(paged["data_paths"][0], "cma/memory");
    for (row, b) in rows[1..=burst_rows]
        .iter()
        .zip(bursts.sizes.iter().filter(|b| b.requests > 1))
    {
        assert_eq!(row["batch"].as_u64(), Some(u64::from(b.requests)));
        assert_eq!(row["latency_ms"]["p50"].as_f64(), Some(b.burst_ms_p50));
        assert_eq!(row["request_ms"]["p95"].as_f64(), Some(b.request_ms_p95));
        assert_eq!(spread(row), [Some(b.burst_ms_p95), b.burst_ms_min, b.burst_ms_max]);
        let within = ["min", "max"].map(|k| row["request_ms"][k].as_f64());
        assert_eq!(within, [b.request_ms_min, b.request_ms_max]);
        assert_eq!(row["layers"], 32);
        assert_eq!(
            row["request_ms"]["n"].as_u64(),
            Some(b.repetitions * u64::from(b.requests))
        );
        let gbps = f64::from(b.requests) * 8388608.0 / b.burst_ms_p50 / 1e6;
        assert!((row["gbps_p50"].as_f64().unwrap() - gbps).abs() < 1e-6, "{row}");
        assert!(row["prep_ms"].is_null());
    }
    let other = &rows[1 + burst_rows];
    assert_eq!(
        (other["kind"].as_str(), other["op"].as_str()),
        (Some("paged"), Some("push"))
    );
    let o = &kv.directions.as_ref().unwrap().other;
    assert_eq!(
        spread(other),
        [o.times.spread.p95, o.times.spread.min, o.times.spread.max]
    );
    let bulk = &rows[2 + burst_rows];
    assert_eq!(bulk["kind"], "bulk");
    assert!(bulk["page_tokens"].is_null() && bulk["page_bytes"].is_null());
    assert_eq!(bulk["descs"], 2);
    let b = kv.bulk.as_ref().unwrap();
    assert_eq!(
        spread(bulk),
        [b.times.spread.p95, b.times.spread.min, b.times.spread.max]
    );
    assert_eq!(bulk["layers"], 32);
    // A pair report without a KV section has no rows: refused, with what to use instead.
    report.kv = None;
    let err = render_pair(&report, Format::Collectivex).unwrap_err().to_string();
    assert_eq!(
        err,
        "-o collectivex cannot show a pair report without --kv-shape: use table, json, junit, prometheus or svg (run pair --kv-shape for KV rows)"
    );
}

#[test]
fn probe_example_rolls_up_as_the_code_does() {
    let probe: ProbeReport = serde_json::from_str(&blocks("json")[7]).unwrap();
    let again = ProbeReport::new(
        &probe.kind,
        &probe.target,
        probe.checks.clone(),
        probe.next_steps.clone(),
    );
    assert_eq!(again, probe);
}

#[test]
fn rail_map_example_parses_and_prints_its_ucx_line() {
    use icb_core::rails::{LeftOutReason, PcieRelation, RailMap};
    let map: RailMap = serde_json::from_str(&blocks("json")[8]).unwrap();
    assert_eq!(map.rails[0].relation, Some(PcieRelation::Pix));
    assert_eq!(map.ucx_net_devices(), vec!["rank 0: UCX_NET_DEVICES=mlx5_2:1"]);
    assert_eq!(map.left_out[0].reasons[1], LeftOutReason::Slow { fastest_gbps: 400.0 });
    // What the document shows is what the types write (no field renamed or dropped).
    let doc: serde_json::Value = serde_json::from_str(&blocks("json")[8]).unwrap();
    assert_eq!(serde_json::to_value(&map).unwrap(), doc);
}

/// Issue 38: the sweep example is what the types write (an enumeration's JSON spelling is the
/// documented one), its typed points are what they say, and its node verdicts are what the
/// scorer gives for its pairs.
#[test]
fn sweep_example_is_what_the_types_write_and_the_scorer_gives() {
    use icb_core::VerdictStatus;
    use icb_core::model::{Direction, TestKind};
    use icb_sweep::{Outcome, SweepResults};
    let text = &blocks("json")[9];
    let results = SweepResults::from_text(std::path::Path::new("schema.md"), text).unwrap();
    let doc: serde_json::Value = serde_json::from_str(text).unwrap();
    assert_eq!(
        serde_json::to_value(&results).unwrap(),
        doc,
        "no field renamed, respelled or dropped"
    );
    let Outcome::Measured {
        verdict,
        series,
        latency,
        ..
    } = &results.pairs[0].outcome
    else {
        panic!("the example's pair is measured");
    };
    assert_eq!(*verdict, VerdictStatus::Pass);
    let points: Vec<(TestKind, Option<Direction>)> = series.iter().map(|p| (p.test, p.direction)).collect();
    assert_eq!(
        points,
        [
            (TestKind::PutBw, Some(Direction::Write)),
            (TestKind::GetBw, Some(Direction::Read))
        ]
    );
    assert_eq!(latency[0].test, TestKind::TagLat);
    assert_eq!(
        icb_sweep::score::final_verdicts(&results.nodes, &results.pairs),
        results.node_verdicts
    );
    // A respelled enumeration is refused, not read as something else.
    let respelled = text.replace("\"direction\": \"write\"", "\"direction\": \"push\"");
    assert!(SweepResults::from_text(std::path::Path::new("schema.md"), &respelled).is_err());
}

#[test]
fn gate_example_rolls_up_as_the_code_does() {
    use icb_core::model::{GATE_SCHEMA, GateReport};
    let gate: GateReport = serde_json::from_str(&blocks("json")[10]).unwrap();
    assert_eq!(gate.schema, GATE_SCHEMA);
    let mut again = gate.clone();
    again.conclude();
    assert_eq!(again.verdict, gate.verdict);
    assert_eq!(again.reason, gate.reason);
}

#[test]
fn expectations_file_example_parses() {
    let yaml = blocks("yaml");
    assert_eq!(yaml.len(), 1);
    let cfg = parse_expectation_config(&yaml[0]).unwrap();
    let o = cfg.overrides_for(icb_core::model::Locality::DifferentHosts).unwrap();
    assert_eq!(o.min_host_bandwidth_bps, Some(12.5e9));
}

#[test]
fn baseline_example_is_what_the_types_write() {
    use icb_core::model::{BaselineReport, BaselineVerdict, Metric};
    let text = &blocks("json")[11];
    let b: BaselineReport = serde_json::from_str(text).unwrap();
    let doc: serde_json::Value = serde_json::from_str(text).unwrap();
    assert_eq!(serde_json::to_value(&b).unwrap(), doc, "no field renamed or dropped");
    let regressed = b
        .checks
        .iter()
        .filter(|c| c.verdict == BaselineVerdict::Regressed)
        .count();
    assert_eq!(b.regressed, regressed);
    let bw = &b.checks[0];
    assert_eq!(bw.metric, Metric::BandwidthBps);
    let mean = bw.recent.iter().sum::<f64>() / bw.recent.len() as f64;
    assert!((bw.baseline_mean.unwrap() - mean).abs() < 1.0, "the mean of recent");
    assert!((bw.change.unwrap() - (bw.value - mean) / mean).abs() < 1e-9);
    assert!(-bw.change.unwrap() > bw.threshold, "regressed: beyond the threshold");
}

#[test]
fn serving_example_rolls_up_and_is_what_the_types_write() {
    let text = &blocks("json")[12];
    let probe: ProbeReport = serde_json::from_str(text).unwrap();
    assert_eq!(probe.kind, "serving");
    let mut again = ProbeReport::new(
        &probe.kind,
        &probe.target,
        probe.checks.clone(),
        probe.next_steps.clone(),
    );
    again.serving = probe.serving.clone();
    assert_eq!(again, probe);
    let serving = probe.serving.as_ref().unwrap();
    assert_eq!(serving.basis, icb_core::serving::SERVING_BASIS);
    let f = &serving.engines[0];
    let b = f.fabric.as_ref().unwrap();
    assert_eq!(b.engine_ratio, f.rank_gbps.unwrap() / b.latest_gbps);
    let doc: serde_json::Value = serde_json::from_str(text).unwrap();
    assert_eq!(
        serde_json::to_value(&probe).unwrap(),
        doc,
        "no field renamed or dropped"
    );
}

/// Issue 40: the rail health example is what the types write, and its findings are what the
/// rules give for a slow rail.
#[test]
fn rail_health_example_is_what_the_rules_give() {
    use icb_core::rails::nic_health::rail::RailHealth;
    use icb_core::rails::nic_health::rules::HealthKind;
    let text = &blocks("json")[4];
    let health: RailHealth = serde_json::from_str(text).unwrap();
    let doc: serde_json::Value = serde_json::from_str(text).unwrap();
    assert_eq!(
        serde_json::to_value(&health).unwrap(),
        doc,
        "no field renamed or dropped"
    );
    let mut again = health.clone();
    again.judge_ports(true);
    assert_eq!(again, health);
    assert_eq!(health.prefill.of(HealthKind::Congested).count(), 1);
    assert_eq!(health.cell(), "congested");
}

/// The allocation example (issue 39): the mode and capability parse as the types, and the
/// verdicts are the allocator finding the rules give.
#[test]
fn cuda_alloc_example_is_the_allocator_fallback_the_rules_give() {
    let text = &blocks("json")[6];
    let report: PairReport = serde_json::from_str(text).unwrap();
    assert_eq!(report.settings.cuda_alloc, icb_core::CudaAllocMode::Vmm);
    let alloc = report.cases[0].cuda_alloc.expect("the case's allocation");
    assert_eq!(alloc.legacy_ipc, icb_core::LegacyIpc::No);
    let mut rejudged = report.clone();
    judge(&mut rejudged);
    assert_eq!(rejudged.verdict, report.verdict);
    assert_eq!(rejudged.cases[0].verdict, report.cases[0].verdict);
    assert!(
        report.verdict.reason.starts_with("allocation-mode fallback"),
        "{}",
        report.verdict.reason
    );
}

/// The per-case NIC counters example (issue 40): what the types write, and the rules' findings.
#[test]
fn case_nic_health_example_is_what_the_rules_give() {
    use icb_core::rails::nic_health::case::CaseHealth;
    use icb_core::rails::nic_health::rules::HealthKind;
    let text = &blocks("json")[1];
    let health: CaseHealth = serde_json::from_str(text).unwrap();
    let doc: serde_json::Value = serde_json::from_str(text).unwrap();
    assert_eq!(
        serde_json::to_value(&health).unwrap(),
        doc,
        "no field renamed or dropped"
    );
    let mut again = health.clone();
    again.judge(true, None);
    assert_eq!(again, health);
    let congested: Vec<&str> = health
        .findings()
        .filter(|(_, f)| f.kind == HealthKind::Congested)
        .map(|(side, _)| side)
        .collect();
    assert_eq!(congested, ["prefill"]);
    assert_eq!(health.cell(), "congested");
}
