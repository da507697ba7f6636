//! Prometheus text exposition (OpenMetrics text, which Prometheus and the node-exporter textfile
//! collector read). Values are in base units — bytes per second and seconds — whatever unit the
//! report was printed in. Statuses are numbers so they can be alerted on:
//! 0 = ok/pass, 1 = warn, 2 = fail, -1 = skipped. Pair samples carry the run (`run_id`, its
//! start time), the `placement` and both hosts; samples come sorted, numbers as numbers.
//! Sweeps: `crate::sweep::prometheus`.

use crate::format::{ExportError, Exporter};
use crate::labels::{case_class, class_id, memory_id};
use icb_core::checks::ProbeReport;
use icb_core::model::{PairReport, Status, VerdictStatus};
use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::{Registry, Unit};
use std::sync::atomic::AtomicU64;

pub struct PrometheusExporter;

pub(crate) type Labels = Vec<(String, String)>;
pub(crate) type FloatFamily = Family<Labels, Gauge<f64, AtomicU64>>;
pub(crate) type IntFamily = Family<Labels, Gauge>;

fn status_value(s: Status) -> i64 {
    match s {
        Status::Ok => 0,
        Status::Warn => 1,
        Status::Fail => 2,
        Status::Skipped => -1,
    }
}

pub(crate) fn verdict_value(s: VerdictStatus) -> i64 {
    match s {
        VerdictStatus::Pass => 0,
        VerdictStatus::Warn => 1,
        VerdictStatus::Fail => 2,
        // Not an answer: the gauge says so apart from the three verdicts (as a skipped check).
        VerdictStatus::Interrupted => -1,
        // Its own value: not a pass, and not evidence of a bad fabric either.
        VerdictStatus::Inconclusive => 3,
    }
}

pub(crate) fn labels(pairs: &[(&str, String)]) -> Labels {
    pairs.iter().map(|(k, v)| (k.to_string(), v.clone())).collect()
}

pub(crate) fn finish(registry: &Registry) -> Result<String, ExportError> {
    let mut out = String::new();
    encode(&mut out, registry).map_err(|e| ExportError::Serialize {
        format: "prometheus",
        detail: e.to_string(),
    })?;
    Ok(sorted_samples(&out))
}

/// The exposition with each family's samples in a stable order (the registry keeps them in a
/// hash map): by labels, numbers compared as numbers, so `size="8"` comes before `size="1024"`
/// and two runs of the same report diff cleanly.
fn sorted_samples(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut samples: Vec<&str> = Vec::new();
    let flush = |samples: &mut Vec<&str>, out: &mut String| {
        samples.sort_by_cached_key(|l| natural_key(l));
        for l in samples.drain(..) {
            out.push_str(l);
            out.push('\n');
        }
    };
    for line in text.lines() {
        if line.starts_with('#') {
            flush(&mut samples, &mut out);
            out.push_str(line);
            out.push('\n');
        } else {
            samples.push(line);
        }
    }
    flush(&mut samples, &mut out);
    out
}

/// `line` with every run of digits left-padded, so text order is numeric order for numbers.
fn natural_key(line: &str) -> String {
    let mut key = String::with_capacity(line.len() + 32);
    let mut digits = String::new();
    for ch in line.chars().chain(std::iter::once('\0')) {
        if ch.is_ascii_digit() {
            digits.push(ch);
            continue;
        }
        if !digits.is_empty() {
            key.push_str(&format!("{digits:0>24}"));
            digits.clear();
        }
        key.push(ch);
    }
    key
}

/// The labels every pair sample carries, so samples of many runs can live in one store:
/// the run (its start time), the placement and the hosts of both sides.
fn run_labels(r: &PairReport) -> Vec<(&'static str, String)> {
    vec![
        ("run_id", r.started_at.clone()),
        (
            "placement",
            match r.placement.locality {
                icb_core::model::Locality::SameHost => "same_host".to_string(),
                icb_core::model::Locality::DifferentHosts => "different_hosts".to_string(),
            },
        ),
        ("prefill_host", r.placement.prefill.host.clone()),
        ("decode_host", r.placement.decode.host.clone()),
    ]
}

impl Exporter for PrometheusExporter {
    fn pair(&self, r: &PairReport) -> Result<String, ExportError> {
        let mut registry = Registry::with_prefix("icbench");
        let bandwidth = FloatFamily::default();
        let latency = FloatFamily::default();
        let case_status = IntFamily::default();
        let verdict = IntFamily::default();
        registry.register_with_unit(
            "bandwidth",
            "Measured bandwidth of one pair case",
            Unit::Other("bytes_per_second".to_string()),
            bandwidth.clone(),
        );
        registry.register_with_unit(
            "latency",
            "One-way latency of one pair case, by quantile",
            Unit::Seconds,
            latency.clone(),
        );
        registry.register(
            "case_status",
            "Verdict of one pair case: 0 ok, 1 warn, 2 fail, -1 skipped",
            case_status.clone(),
        );
        registry.register(
            "verdict_status",
            "Verdict of the pair run: 0 pass, 1 warn, 2 fail, 3 inconclusive, -1 interrupted",
            verdict.clone(),
        );

        let nic = IntFamily::default();
        if r.cases.iter().any(|c| c.nic_health.is_some()) {
            registry.register(
                "case_nic_counter_delta",
                "What one error or congestion counter of a pair side's NIC port moved over one case (absent: not read)",
                nic.clone(),
            );
        }
        let run = run_labels(r);
        for c in &r.cases {
            let mut base = run.clone();
            base.extend([
                ("test", c.test.to_string()),
                ("memory", memory_id(c.memory)),
                ("size", c.size.to_string()),
                ("transport", class_id(case_class(c)).to_string()),
            ]);
            base.extend(crate::labels::case_shape_labels(c));
            if let Some(m) = &c.measurement {
                if let Some(bps) = m.bandwidth_bps {
                    bandwidth.get_or_create(&labels(&base)).set(bps);
                }
                if let Some(l) = &m.latency_us {
                    for (q, v) in [("0.5", l.p50), ("0.99", l.p99)] {
                        let mut ls = labels(&base);
                        ls.push(("quantile".to_string(), q.to_string()));
                        latency.get_or_create(&ls).set(v / 1e6);
                    }
                }
            }
            if let Some(v) = &c.verdict {
                case_status.get_or_create(&labels(&base)).set(status_value(v.status));
            }
            for (side, port, counter, by) in crate::case_health::samples(c) {
                let mut ls = base.clone();
                ls.extend([("side", side.to_string()), ("port", port), ("counter", counter)]);
                nic.get_or_create(&labels(&ls))
                    .set(i64::try_from(by).unwrap_or(i64::MAX));
            }
        }
        let mut overall = run;
        overall.extend([
            ("locality", r.placement.locality.to_string()),
            ("mode", r.placement.mode.clone()),
        ]);
        verdict
            .get_or_create(&labels(&overall))
            .set(verdict_value(r.verdict.status));
        if !r.controls.is_empty() {
            let caught = IntFamily::default();
            registry.register(
                "control_caught",
                "A negative control of the pair run: 1 caught (the detector saw the fault it was given), 0 not caught (the run is inconclusive)",
                caught.clone(),
            );
            let effect = IntFamily::default();
            if r.controls.iter().any(|c| c.effect.is_some()) {
                registry.register(
                    "control_knobs_effect",
                    "The knobs-off control: 1 the recipe's env slower than UCX's defaults (the run warns), 0 no measurable difference, -1 faster",
                    effect.clone(),
                );
            }
            for c in &r.controls {
                let mut ls = run_labels(r);
                ls.push(("kind", c.kind.as_str().to_string()));
                caught.get_or_create(&labels(&ls)).set(i64::from(c.caught));
                if let Some(e) = c.effect {
                    effect.get_or_create(&labels(&ls)).set(knobs_effect_value(e));
                }
            }
        }
        if let Some(rails) = &r.rails {
            crate::rail_export::prometheus(&mut registry, rails, &run_labels(r));
        }
        finish(&registry)
    }

    fn probe(&self, r: &ProbeReport) -> Result<String, ExportError> {
        let mut registry = Registry::with_prefix("icbench_probe");
        let check = IntFamily::default();
        let overall = IntFamily::default();
        registry.register(
            "check_status",
            "One probe check: 0 ok, 1 warn, 2 fail, -1 skipped",
            check.clone(),
        );
        registry.register(
            "status",
            "The probe's rolled-up status: 0 ok, 1 warn, 2 fail",
            overall.clone(),
        );
        for c in &r.checks {
            check
                .get_or_create(&labels(&[
                    ("kind", r.kind.clone()),
                    ("check", c.id.clone()),
                    ("scope", c.scope.clone().unwrap_or_default()),
                ]))
                .set(status_value(c.status));
        }
        overall
            .get_or_create(&labels(&[("kind", r.kind.clone()), ("target", r.target.clone())]))
            .set(status_value(r.status));
        if let Some(serving) = &r.serving {
            crate::serving_table::prometheus(&mut registry, serving);
        }
        finish(&registry)
    }

    fn sweep(&self, results: &icb_sweep::SweepResults) -> Result<String, ExportError> {
        crate::sweep::prometheus::render(results)
    }
}

fn knobs_effect_value(e: icb_core::model::KnobsEffect) -> i64 {
    use icb_core::model::KnobsEffect;
    match e {
        KnobsEffect::Slower => 1,
        KnobsEffect::Unchanged => 0,
        KnobsEffect::Faster => -1,
    }
}
