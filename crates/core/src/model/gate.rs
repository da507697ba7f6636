//! The `gate` result (`ic-bench.gate/v1`): the findings of the gate's steps and the one verdict
//! they roll up to. The gate writes this report on every path — pass, fail, over budget, a setup
//! error after it started, a signal — so a CI job always has a file that says what happened.

use super::{Criteria, PairReport, Status};
use serde::{Deserialize, Serialize};

/// Schema identifier written into every gate report.
pub const GATE_SCHEMA: &str = "ic-bench.gate/v1";

/// The gate's answer. Only `pass` means "fit for benchmarking".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GateVerdict {
    Pass,
    Fail,
    /// The gate could not finish: over its `--budget`, or a setup error (cluster, recipe) after
    /// it started. Exit 2.
    Error,
    /// A signal stopped it. Exit 130, whatever had been found.
    Interrupted,
}

impl GateVerdict {
    pub fn as_str(self) -> &'static str {
        match self {
            GateVerdict::Pass => "pass",
            GateVerdict::Fail => "fail",
            GateVerdict::Error => "error",
            GateVerdict::Interrupted => "interrupted",
        }
    }

    pub fn exit_code(self) -> i32 {
        match self {
            GateVerdict::Pass => crate::exit::OK,
            GateVerdict::Fail => crate::exit::VERDICT_FAILED,
            GateVerdict::Error => crate::exit::USAGE_OR_SETUP,
            GateVerdict::Interrupted => crate::exit::INTERRUPTED,
        }
    }
}

/// One finding of a gate step (a probe check that is not ok, a failed pair case, …).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    /// `probe env`, `probe node/NAME` or `pair`.
    pub step: String,
    /// `warn` or `fail` (ok checks are not findings).
    pub status: Status,
    /// The probe check's id, when the finding is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub check: Option<String>,
    pub detail: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

/// How a step ended. `wall_s` per step as before; `ran` says whether it finished.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GateReport {
    pub schema: String,
    pub verdict: GateVerdict,
    pub reason: String,
    pub wall_s: f64,
    /// `[name, seconds]` for every step that ran (or was running when the gate stopped).
    pub steps: Vec<(String, f64)>,
    pub findings: Vec<Finding>,
    /// What each side's bench pod was modelled on: `(side, source)`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub modelled_on: Vec<(String, String)>,
    /// What was not copied into the bench pods, and other notes of the preparation.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pair: Option<PairReport>,
    /// What the gate judged against (tests, floors, `--allow-tcp`, engine, profile): a pass
    /// reads with the floors it passed, also when the pair never ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub criteria: Option<Criteria>,
}

impl GateReport {
    /// A report with no verdict yet (`error` until [`GateReport::conclude`] or a stop says more).
    pub fn new() -> GateReport {
        GateReport {
            schema: GATE_SCHEMA.into(),
            verdict: GateVerdict::Error,
            reason: String::new(),
            wall_s: 0.0,
            steps: Vec::new(),
            findings: Vec::new(),
            modelled_on: Vec::new(),
            notes: Vec::new(),
            pair: None,
            criteria: None,
        }
    }

    /// Findings from a pair report: each failed case, a failed run, and a run that measured
    /// nothing (never a pass: `nothing was measured` is what `pair` itself calls a setup problem),
    /// then each of the pair step's warnings (`warn`, which never fails the gate).
    pub fn add_pair(&mut self, pair: PairReport) {
        use super::{CaseStatus, VerdictStatus};
        for c in pair
            .cases
            .iter()
            .filter(|c| c.verdict.as_ref().is_some_and(|v| v.status == Status::Fail))
        {
            let why = c.verdict.as_ref().map(|v| v.reason.clone()).unwrap_or_default();
            self.findings.push(Finding {
                step: "pair".into(),
                status: Status::Fail,
                check: None,
                detail: format!(
                    "{} {} {}: {why}",
                    c.test.as_str(),
                    crate::units::format_size(c.size),
                    c.memory
                ),
                hint: None,
            });
        }
        let unverified = pair
            .cases
            .iter()
            .filter(|c| c.measurement.as_ref().is_some_and(|m| !m.verified))
            .count();
        if unverified > 0 {
            // A transfer whose bytes nobody checked proves nothing about the path: never a pass.
            self.findings.push(Finding {
                step: "pair".into(),
                status: Status::Fail,
                check: None,
                detail: format!("{unverified} case(s) moved payloads that were not verified on the receiving side"),
                hint: Some("unset IC_BENCH_UNTOUCHED_BUFFERS: the gate passes only verified transfers".into()),
            });
        }
        let measured = pair.cases.iter().any(|c| c.status == CaseStatus::Measured);
        if !measured {
            self.findings.push(Finding {
                step: "pair".into(),
                status: Status::Fail,
                check: None,
                detail: crate::exit::setup_problem(&pair).unwrap_or_else(|| "the pair measured nothing".into()),
                hint: None,
            });
        } else if matches!(pair.verdict.status, VerdictStatus::Fail | VerdictStatus::Inconclusive) {
            let paths: Vec<&str> = pair.verdict.data_paths.iter().map(|d| d.as_str()).collect();
            self.findings.push(Finding {
                step: "pair".into(),
                status: Status::Fail,
                check: None,
                detail: format!("{} (data paths: {})", pair.verdict.reason, paths.join(", ")),
                hint: pair.verdict.hint.clone(),
            });
        }
        self.findings.extend(super::gate_pair::warnings(&pair));
        self.pair = Some(pair);
    }

    /// Rolls the findings up: `fail` when any finding fails, else `pass`.
    pub fn conclude(&mut self) {
        let failing: Vec<String> = self
            .findings
            .iter()
            .filter(|f| f.status == Status::Fail)
            .map(|f| match &f.check {
                // The reason is the one line a CI log shows: it names the check, which a
                // finding's detail leaves to its `check` field.
                Some(id) => format!("{}: {id}: {}", f.step, f.detail),
                None => format!("{}: {}", f.step, f.detail),
            })
            .collect();
        if failing.is_empty() {
            self.verdict = GateVerdict::Pass;
            let over_tcp = self
                .pair
                .as_ref()
                .is_some_and(|p| p.verdict.data_paths.contains(&super::TransportClass::Tcp));
            // A pass that holds only because TCP was allowed must not read like a clean one.
            self.reason = if over_tcp {
                "fit for benchmarking only because TCP was allowed (--allow-tcp): the measured pair's data went over tcp"
                    .into()
            } else {
                "the recipe's transport and the measured pair are fit for benchmarking".into()
            };
            return;
        }
        let measured = self
            .pair
            .as_ref()
            .map(|p| {
                let paths: Vec<&str> = p.verdict.data_paths.iter().map(|d| d.as_str()).collect();
                format!("; measured data paths: {}", paths.join(", "))
            })
            .unwrap_or_default();
        self.verdict = GateVerdict::Fail;
        self.reason = failing.join("; ") + &measured;
    }

    /// The gate stopped before its verdict: `verdict` (error or interrupted) and why, whatever
    /// the findings so far said. They stay in the report as evidence.
    pub fn stop(&mut self, verdict: GateVerdict, reason: String) {
        self.verdict = verdict;
        self.reason = reason;
    }
}

impl Default for GateReport {
    fn default() -> Self {
        GateReport::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair_report(cases: serde_json::Value, verdict: &str) -> PairReport {
        let side = serde_json::json!({"hostname": "a", "ucx_version": "1.22.0", "ucx_library": "/x",
            "cuda": {"available": false, "detail": "no CUDA driver"}});
        serde_json::from_value(serde_json::json!({
            "schema": crate::model::PAIR_SCHEMA,
            "tool": {"name": "ic-bench", "version": "0", "git_commit": "x", "ucx_headers": "1.22.0"},
            "started_at": "2026-11-25T00:00:00Z",
            "duration_s": 1.0,
            "placement": {"locality": "different_hosts", "mode": "kubernetes", "prefill": {"host": "a"}, "decode": {"host": "b"}},
            "server": side,
            "client": side,
            "settings": crate::model::RunSettings::verdict_profile(),
            "expectation": crate::model::Expectation::defaults(crate::model::Locality::DifferentHosts),
            "cases": cases,
            "verdict": {"status": verdict, "reason": "r"}
        }))
        .unwrap()
    }

    /// Issue 35 item 4: a knobs-off control that found the recipe's env slower than UCX's
    /// defaults is a warning finding naming the variables; the gate still passes.
    #[test]
    fn a_recipe_knob_slower_than_the_defaults_is_a_warning_finding() {
        let mut pair = pair_report(measured_case(true), "warn");
        let knobs = |effect| crate::model::ControlResult {
            kind: crate::model::ControlKind::KnobsOff,
            caught: true,
            seen_as: Vec::new(),
            case: "put_bw 1 MiB host→host".into(),
            bandwidth_bps: Some(5e9),
            main_bandwidth_bps: Some(1e9),
            detail: "the recipe's UCX_TLS made it slower".into(),
            removed: vec!["UCX_TLS".into()],
            effect: Some(effect),
        };
        pair.controls = vec![knobs(crate::model::KnobsEffect::Slower)];
        let mut gate = GateReport::new();
        gate.add_pair(pair.clone());
        gate.conclude();
        assert_eq!(gate.verdict, GateVerdict::Pass, "{}", gate.reason);
        let warn: Vec<&Finding> = gate.findings.iter().filter(|f| f.status == Status::Warn).collect();
        assert_eq!(warn.len(), 1, "{:?}", gate.findings);
        assert!(warn[0].hint.as_deref().unwrap().contains("UCX_TLS"), "{:?}", warn[0]);
        // Knobs that changed nothing are the pair step's warning too (issue 36 item 4), without
        // the advice to drop them.
        pair.controls = vec![knobs(crate::model::KnobsEffect::Unchanged)];
        let mut gate = GateReport::new();
        gate.add_pair(pair);
        let warn: Vec<&Finding> = gate.findings.iter().filter(|f| f.status == Status::Warn).collect();
        assert_eq!(warn.len(), 1, "{:?}", gate.findings);
        assert!(!warn[0].hint.as_deref().unwrap().contains("drop"), "{:?}", warn[0]);
    }

    /// Issue 36 item 4: a pair verdict at warn is never dropped from the findings: from the
    /// cases' own verdicts when they warned (one line per reason, naming the cases), else the
    /// verdict's own line (a KV request slower than TCP sets no case's verdict).
    #[test]
    fn a_warning_pair_step_is_a_warning_finding_and_the_gate_still_passes() {
        let mut pair = pair_report(measured_case(true), "warn");
        let mut second = pair.cases[0].clone();
        second.size = 4 << 20;
        pair.cases.push(second);
        for c in &mut pair.cases {
            c.verdict = Some(super::super::CheckVerdict {
                status: Status::Warn,
                reason: "no RDMA transport: data went over tcp".into(),
                hint: None,
                finding: None,
            });
        }
        let mut gate = GateReport::new();
        gate.add_pair(pair.clone());
        gate.conclude();
        assert_eq!(gate.verdict, GateVerdict::Pass, "{}", gate.reason);
        assert_eq!(gate.findings.len(), 1, "{:?}", gate.findings);
        assert_eq!(
            gate.findings[0].detail,
            "no RDMA transport: data went over tcp (on put_bw 1 MiB host→host, put_bw 4 MiB host→host)"
        );
        for c in &mut pair.cases {
            c.verdict.as_mut().unwrap().status = Status::Ok;
        }
        pair.verdict.reason = "the KV transfer is slower than TCP".into();
        let mut gate = GateReport::new();
        gate.add_pair(pair);
        gate.conclude();
        assert_eq!(gate.verdict, GateVerdict::Pass);
        let details: Vec<(&str, Status)> = gate.findings.iter().map(|f| (f.detail.as_str(), f.status)).collect();
        assert_eq!(details, [("the KV transfer is slower than TCP", Status::Warn)]);
    }

    #[test]
    fn a_pair_that_measured_nothing_is_a_failing_finding_not_a_pass() {
        let mut gate = GateReport::new();
        gate.add_pair(pair_report(serde_json::json!([]), "warn"));
        gate.conclude();
        assert_eq!(gate.verdict, GateVerdict::Fail);
        assert!(gate.reason.contains("measured nothing"), "{}", gate.reason);
        assert_eq!(gate.verdict.exit_code(), crate::exit::VERDICT_FAILED);
    }

    fn measured_case(verified: bool) -> serde_json::Value {
        serde_json::json!([{
            "test": "put_bw", "size": 1048576,
            "memory": {"initiator": "host", "target": "host"},
            "status": "measured",
            "measurement": {"warmup_iterations": 1, "iterations": 8, "elapsed_s": 0.01, "bytes": 8388608,
                            "bandwidth_bps": 1e10, "window": 16,
                            "verified": verified},
            "verdict": {"status": "ok", "reason": "rdma"}
        }])
    }

    #[test]
    fn an_inconclusive_pair_or_an_unverified_payload_never_passes_the_gate() {
        let mut gate = GateReport::new();
        gate.add_pair(pair_report(measured_case(true), "inconclusive"));
        gate.conclude();
        assert_eq!(gate.verdict, GateVerdict::Fail, "{}", gate.reason);

        let mut gate = GateReport::new();
        gate.add_pair(pair_report(measured_case(false), "pass"));
        gate.conclude();
        assert_eq!(gate.verdict, GateVerdict::Fail);
        assert!(gate.reason.contains("not verified"), "{}", gate.reason);

        let mut gate = GateReport::new();
        gate.add_pair(pair_report(measured_case(true), "pass"));
        gate.conclude();
        assert_eq!(gate.verdict, GateVerdict::Pass, "{}", gate.reason);
    }

    #[test]
    fn a_pass_over_tcp_says_tcp_was_allowed_in_its_headline() {
        let mut over_tcp = pair_report(measured_case(true), "warn");
        over_tcp.verdict.data_paths = vec![super::super::TransportClass::Tcp];
        let mut gate = GateReport::new();
        gate.add_pair(over_tcp);
        gate.conclude();
        assert_eq!(gate.verdict, GateVerdict::Pass);
        assert!(gate.reason.contains("only because TCP was allowed"), "{}", gate.reason);
        let mut rdma = pair_report(measured_case(true), "pass");
        rdma.verdict.data_paths = vec![super::super::TransportClass::Rdma];
        let mut gate = GateReport::new();
        gate.add_pair(rdma);
        gate.conclude();
        assert!(!gate.reason.contains("TCP"), "{}", gate.reason);
    }

    #[test]
    fn findings_roll_up_and_a_stop_overrides_them() {
        let mut gate = GateReport::new();
        assert_eq!(gate.verdict, GateVerdict::Error, "no verdict until concluded");
        gate.findings.push(Finding {
            step: "probe node/gpu-1".into(),
            status: Status::Warn,
            check: Some("node.rdma.devices".into()),
            detail: "no RDMA device".into(),
            hint: None,
        });
        gate.conclude();
        assert_eq!(gate.verdict, GateVerdict::Pass, "warnings alone pass");
        gate.stop(GateVerdict::Interrupted, "interrupted by SIGTERM".into());
        assert_eq!(gate.verdict.exit_code(), crate::exit::INTERRUPTED);
        let json = serde_json::to_value(&gate).unwrap();
        assert_eq!(json["verdict"], "interrupted");
        assert_eq!(json["findings"][0]["status"], "warn");
    }
}
