//! A sweep as Prometheus text (OpenMetrics), for the node-exporter textfile collector or a
//! Pushgateway after a nightly run. Every sample carries `sweep_id`, so many runs can share a
//! store. Per pair: bandwidth and latency gauges labelled `prefill_node`, `decode_node`, `pass`,
//! `test`, `memory`, `size` (bytes) and, where the test has one, `direction` (seen from the
//! prefill side: `write` pushes into decode, `read` pulls from it), and the pair's status (with the
//! `data_paths` that carried a measured pair's bytes). Per
//! node: health 1 (pass) or 0 (anything else), its status as a label, and its median bandwidth.
//! Run metadata: an info gauge (schedule, version, start, `complete`), the start and last-update
//! times as Unix seconds, pairs planned and done, and — only for a sweep that stopped before its
//! end — a `stopped{reason}` gauge (1), so an alert can tell an interrupted night from a clean one.
//! A whole-node sweep adds per node rail gauges ([`super::rails`]).

use crate::format::ExportError;
use crate::prometheus::{FloatFamily, IntFamily, Labels, finish, labels};
use icb_sweep::results::{Outcome, PairResult, SweepResults};
use icb_sweep::score::NodeStatus;
use prometheus_client::registry::{Registry, Unit};

/// The pair's status as a number to alert on, the same scale as pair reports:
/// 0 pass, 1 warn, 2 fail (or nothing measured), -1 unschedulable or disrupted (not a fabric
/// verdict).
fn pair_status(o: &Outcome) -> i64 {
    match o {
        Outcome::Measured { verdict, .. } => match verdict {
            icb_core::VerdictStatus::Pass => 0,
            icb_core::VerdictStatus::Warn => 1,
            // Not a pass: inconclusive counts with fail here, as the node scoring does not.
            _ => 2,
        },
        Outcome::Error { .. } => 2,
        Outcome::Unschedulable { .. } | Outcome::Disrupted { .. } => -1,
    }
}

fn outcome_name(o: &Outcome) -> &'static str {
    match o {
        Outcome::Measured { .. } => "measured",
        Outcome::Unschedulable { .. } => "unschedulable",
        Outcome::Error { .. } => "error",
        Outcome::Disrupted { .. } => "disrupted",
    }
}

/// RFC 3339 as Unix seconds; `None` for a value that is not a timestamp.
fn unix_seconds(text: &str) -> Option<f64> {
    let t: jiff::Timestamp = text.parse().ok()?;
    Some(t.as_millisecond() as f64 / 1e3)
}

fn pair_labels(sweep_id: &str, p: &PairResult) -> Vec<(&'static str, String)> {
    vec![
        ("sweep_id", sweep_id.to_string()),
        ("prefill_node", p.pair.prefill.clone()),
        ("decode_node", p.pair.decode.clone()),
        ("pass", p.pass.to_string()),
    ]
}

/// The families of one sweep exposition, registered in the order they are printed.
struct Families {
    info: IntFamily,
    started: FloatFamily,
    updated: FloatFamily,
    pairs: IntFamily,
    bandwidth: FloatFamily,
    latency: FloatFamily,
    status: IntFamily,
    finished: FloatFamily,
    health: IntFamily,
    median: FloatFamily,
    stopped: IntFamily,
}

fn register(registry: &mut Registry) -> Families {
    let f = Families {
        info: IntFamily::default(),
        started: FloatFamily::default(),
        updated: FloatFamily::default(),
        pairs: IntFamily::default(),
        bandwidth: FloatFamily::default(),
        latency: FloatFamily::default(),
        status: IntFamily::default(),
        finished: FloatFamily::default(),
        health: IntFamily::default(),
        median: FloatFamily::default(),
        stopped: IntFamily::default(),
    };
    registry.register(
        "info",
        "The sweep: schedule, ic-bench version, start time and whether it is complete (always 1)",
        f.info.clone(),
    );
    registry.register_with_unit(
        "started_timestamp",
        "When the sweep started, Unix time",
        Unit::Seconds,
        f.started.clone(),
    );
    registry.register_with_unit(
        "updated_timestamp",
        "When the results were last written (after a pair, or at the end), Unix time",
        Unit::Seconds,
        f.updated.clone(),
    );
    registry.register(
        "stopped",
        "1 when the sweep stopped before its end (reason interrupted or cluster_error); its node health is first-pass so far",
        f.stopped.clone(),
    );
    registry.register(
        "pairs",
        "Pairs of the sweep: planned (first pass) and done, by pass",
        f.pairs.clone(),
    );
    registry.register_with_unit(
        "pair_bandwidth",
        "Measured bandwidth of one pair, test, memory pair and size",
        Unit::Other("bytes_per_second".to_string()),
        f.bandwidth.clone(),
    );
    registry.register_with_unit(
        "pair_latency",
        "One-way latency of one pair, test, memory pair and size, by quantile",
        Unit::Seconds,
        f.latency.clone(),
    );
    registry.register(
        "pair_status",
        "Verdict of one pair: 0 pass, 1 warn, 2 fail or nothing measured, -1 unschedulable",
        f.status.clone(),
    );
    registry.register_with_unit(
        "pair_finished_timestamp",
        "When the pair's run ended, Unix time: how fresh its figures are (absent for results written before it was kept)",
        Unit::Seconds,
        f.finished.clone(),
    );
    registry.register(
        "node_health",
        "Fabric health of one node: 1 pass, 0 anything else (the status label says what)",
        f.health.clone(),
    );
    registry.register_with_unit(
        "node_median_bandwidth",
        "Median bandwidth of the node's first-pass pairs",
        Unit::Other("bytes_per_second".to_string()),
        f.median.clone(),
    );
    f
}

pub(crate) fn render(r: &SweepResults) -> Result<String, ExportError> {
    let mut registry = Registry::with_prefix("icbench_sweep");
    let f = register(&mut registry);
    let id = || ("sweep_id", r.sweep_id.clone());

    f.info
        .get_or_create(&labels(&[
            id(),
            ("schedule", r.schedule.name().to_string()),
            ("tool_version", r.tool_version.clone()),
            ("started_at", r.started_at.clone()),
            ("complete", r.complete.to_string()),
        ]))
        .set(1);
    if let Some(t) = unix_seconds(&r.started_at) {
        f.started.get_or_create(&labels(&[id()])).set(t);
    }
    if let Some(t) = unix_seconds(&r.updated_at) {
        f.updated.get_or_create(&labels(&[id()])).set(t);
    }
    if let Some(stop) = &r.stopped {
        f.stopped
            .get_or_create(&labels(&[id(), ("reason", stop.reason.as_str().to_string())]))
            .set(1);
    }
    let done = |pass: u8| r.pairs.iter().filter(|p| p.pass == pass).count() as i64;
    for (state, value) in [
        ("planned", r.planned() as i64),
        ("done_first_pass", done(1)),
        ("done_second_pass", done(2)),
    ] {
        f.pairs
            .get_or_create(&labels(&[id(), ("state", state.to_string())]))
            .set(value);
    }

    for p in &r.pairs {
        let base = pair_labels(&r.sweep_id, p);
        let mut status = base.clone();
        status.push(("outcome", outcome_name(&p.outcome).to_string()));
        if let Outcome::Measured { data_paths, .. } = &p.outcome {
            // What carried the pair's bytes (`rdma`, `tcp+rdma` …): the dashboard's data paths.
            status.push(("data_paths", data_paths.join("+")));
        }
        f.status.get_or_create(&labels(&status)).set(pair_status(&p.outcome));
        if let Some(t) = p.finished_at.as_deref().and_then(unix_seconds) {
            f.finished.get_or_create(&labels(&base)).set(t);
        }
        let Outcome::Measured { series, latency, .. } = &p.outcome else {
            continue;
        };
        for point in series {
            let mut ls = base.clone();
            ls.push(("test", point.test.to_string()));
            if let Some(m) = &point.memory {
                ls.push(("memory", m.clone()));
            }
            ls.push(("size", point.size.to_string()));
            if let Some(d) = point.direction {
                ls.push(("direction", d.to_string()));
            }
            f.bandwidth.get_or_create(&labels(&ls)).set(point.bandwidth_bps);
        }
        for point in latency {
            let mut ls = base.clone();
            ls.push(("test", point.test.to_string()));
            if let Some(m) = &point.memory {
                ls.push(("memory", m.clone()));
            }
            ls.push(("size", point.size.to_string()));
            for (q, us) in [("0.5", point.p50_us), ("0.99", point.p99_us)] {
                let mut with_q: Labels = labels(&ls);
                with_q.push(("quantile".to_string(), q.to_string()));
                f.latency.get_or_create(&with_q).set(us / 1e6);
            }
        }
    }

    for v in super::verdicts(r).iter() {
        let node = || ("node", v.node.clone());
        f.health
            .get_or_create(&labels(&[id(), node(), ("status", v.status.as_str().to_string())]))
            .set(i64::from(v.status == NodeStatus::Pass));
        if let Some(bps) = v.median_bps {
            f.median.get_or_create(&labels(&[id(), node()])).set(bps);
        }
    }
    // Rail families only for a whole-node sweep: an empty family would still print its header.
    let verdicts = super::verdicts(r);
    let cells = icb_sweep::rails::node_rails(&r.pairs, &verdicts);
    if !cells.is_empty() {
        let rails = super::rails::register(&mut registry);
        super::rails::fill(&rails, &cells, &r.sweep_id);
    }
    finish(&registry)
}
