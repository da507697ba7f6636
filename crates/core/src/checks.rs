//! The probe result: one struct tree = one JSON schema (`ic-bench.probe/v1`, see `docs/schema.md`).

use crate::model::Status;
use serde::{Deserialize, Serialize};

pub const PROBE_SCHEMA: &str = "ic-bench.probe/v1";

/// One read-only check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Check {
    /// Stable identifier, e.g. `env.ucx_tls.tcp_only`, `node.port_state`.
    pub id: String,
    pub status: Status,
    /// One line: what was seen (secrets masked).
    pub detail: String,
    /// Where it applies: a role (`prefill`), a file, a device (`mlx5_0:1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// One line: how to fix it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hint: Option<String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    pub ok: usize,
    pub warn: usize,
    pub fail: usize,
    pub skipped: usize,
}

/// A whole probe run (`probe env`, `probe node` or `probe nixl`). Not `Eq`: the rail map
/// carries link rates in Gb/s.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ProbeReport {
    pub schema: String,
    /// `env`, `node`, `nixl` or `serving`.
    pub kind: String,
    /// What was probed: paths, `local`, `pod/NAME`, `node/NAME`.
    pub target: String,
    pub checks: Vec<Check>,
    pub counts: Counts,
    /// `disaggregated transport can be trusted` or `fix first: …`.
    pub verdict: String,
    pub status: Status,
    /// Commands worth running next (e.g. the exact `ic-bench pair …`).
    #[serde(default)]
    pub next_steps: Vec<String>,
    /// `probe env` on several recipes: each recipe's own verdict (the report's is the worst).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub recipes: Vec<RecipeVerdict>,
    /// `probe env`: the transport variables each role resolved, values masked.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub transport_vars: Vec<RoleTransportVars>,
    /// `probe node`: each GPU's RDMA NIC port and their PCIe relation; absent where the node's
    /// PCI tree could not be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rail_map: Option<crate::rails::RailMap>,
    /// `probe node`: the RDMA readiness read on this side (ports' MTU, GID, firmware; GPUDirect
    /// mode; PCIe links), for comparing two sides ([`crate::readiness::compare`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub readiness: Option<crate::readiness::Readiness>,
    /// `probe serving`: the engines' KV-transfer figures beside ic-bench's own (issue 42).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serving: Option<crate::serving::ServingReport>,
}

/// One recipe of a `probe env` run, judged on its own inputs only.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RecipeVerdict {
    /// What the recipe is: `recipes/llama/vllm/disagg/deploy.yaml`, `kustomize overlays/aws`.
    pub recipe: String,
    /// Every file that contributed (overlays, patches, ConfigMaps it references).
    pub sources: Vec<String>,
    pub status: Status,
    pub verdict: String,
    pub counts: Counts,
}

/// The transport variables of one role (UCX_, NCCL_, NIXL_, FI_, NVSHMEM_ …).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RoleTransportVars {
    /// `prefill (VllmPrefillWorker, deploy.yaml)`: the same text as the checks' scope.
    pub scope: String,
    pub role: String,
    pub vars: Vec<ResolvedVar>,
}

/// One variable as the engine will see it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResolvedVar {
    pub name: String,
    /// Masked (`***`, `http://***@host`), or `<from Secret NAME>` when unknown at read time.
    pub value: String,
    /// The layer and place that set it: `spec.services.decode.envs (deploy.yaml:42)`,
    /// `envFrom ConfigMap/ucx (cm.yaml:4)`, `command (export) (deploy.yaml:30)`.
    pub source: String,
}

/// What a clean probe may claim, and no more: only recipes with a prefill or a decode role
/// (scopes such as `decode (VllmDecodeWorker, deploy.yaml)`) are disaggregated; a node probe says
/// the node is ready, a NIXL probe that the install is usable.
fn all_clear(kind: &str, checks: &[Check]) -> &'static str {
    let disaggregated = checks.iter().filter_map(|c| c.scope.as_deref()).any(|s| {
        let role = s.split([' ', ':']).next().unwrap_or_default();
        role == "prefill" || role == "decode"
    });
    match kind {
        "env" if disaggregated => "disaggregated transport can be trusted",
        "env" => "the recipe's transport settings can be trusted (no prefill/decode roles: not disaggregated)",
        "node" => "nothing on this node stands in the way of RDMA/NVLink transfers",
        "nixl" => "the NIXL install is usable",
        // Only a figure set beside the fabric's may claim a comparison (absence is no pass).
        "serving" if checks.iter().any(|c| c.id == "serving.engine") => {
            "the engines were judged against what the fabric delivers for their KV shape"
        }
        "serving" => "the engines' KV-transfer figures were read; none was compared with the fabric",
        _ => "every check passed",
    }
}

/// The failing checks' ids, each once, in order.
fn fix_first(checks: &[Check]) -> Vec<&str> {
    let mut first: Vec<&str> = Vec::new();
    for c in checks.iter().filter(|c| c.status == Status::Fail) {
        if !first.contains(&c.id.as_str()) {
            first.push(c.id.as_str());
        }
    }
    first
}

impl ProbeReport {
    /// Rolls checks up into counts, a status and a verdict line. `skipped` is never a pass: a run
    /// of only skipped checks is reported as inconclusive (warn).
    pub fn new(kind: &str, target: &str, checks: Vec<Check>, next_steps: Vec<String>) -> Self {
        let mut counts = Counts::default();
        for c in &checks {
            match c.status {
                Status::Ok => counts.ok += 1,
                Status::Warn => counts.warn += 1,
                Status::Fail => counts.fail += 1,
                Status::Skipped => counts.skipped += 1,
            }
        }
        let skipped_note = if counts.skipped > 0 {
            format!("; {} check(s) skipped, which is not a pass", counts.skipped)
        } else {
            String::new()
        };
        let (status, verdict) = if counts.fail > 0 {
            (Status::Fail, format!("fix first: {}", fix_first(&checks).join(", ")))
        } else if counts.ok == 0 && counts.warn == 0 {
            // Every check skipped: nothing was checked, which is no answer at all (exit 2).
            (Status::Skipped, "inconclusive: nothing could be checked".to_string())
        } else if counts.ok == 0 {
            (Status::Warn, "inconclusive: nothing could be checked".to_string())
        } else if counts.skipped > counts.ok + counts.warn {
            // Mostly unanswered: a couple of ok checks must not read as a clean bill of health.
            let ran = counts.ok + counts.warn;
            (
                Status::Warn,
                format!(
                    "inconclusive: only {ran} of {} checks could run ({} skipped); run where the tools and devices are",
                    checks.len(),
                    counts.skipped
                ),
            )
        } else if counts.warn > 0 {
            (
                Status::Warn,
                format!(
                    "{}, with {} warning(s) to review{skipped_note}",
                    all_clear(kind, &checks),
                    counts.warn
                ),
            )
        } else {
            (Status::Ok, format!("{}{skipped_note}", all_clear(kind, &checks)))
        };
        ProbeReport {
            schema: PROBE_SCHEMA.to_string(),
            kind: kind.to_string(),
            target: target.to_string(),
            checks,
            counts,
            verdict,
            status,
            next_steps,
            recipes: Vec::new(),
            transport_vars: Vec::new(),
            rail_map: None,
            readiness: None,
            serving: None,
        }
    }

    /// The failing checks' ids, each once, in the order the checks came: what the verdict's
    /// `fix first:` names. Readers take this list, never the verdict's text.
    pub fn fix_first(&self) -> Vec<&str> {
        fix_first(&self.checks)
    }

    /// 0 for ok/warn, 1 for fail, 2 when every check was skipped (nothing was checked: as a run
    /// that measured nothing).
    pub fn exit_code(&self) -> i32 {
        match self.status {
            Status::Fail => crate::exit::VERDICT_FAILED,
            Status::Skipped => crate::exit::USAGE_OR_SETUP,
            Status::Ok | Status::Warn => crate::exit::OK,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(id: &str, status: Status) -> Check {
        Check {
            id: id.into(),
            status,
            detail: "d".into(),
            scope: None,
            hint: None,
        }
    }

    #[test]
    fn fail_wins_and_names_the_failing_checks() {
        let r = ProbeReport::new(
            "env",
            "x",
            vec![
                check("a", Status::Ok),
                check("b", Status::Fail),
                check("c", Status::Warn),
            ],
            vec![],
        );
        assert_eq!(r.status, Status::Fail);
        assert_eq!(r.verdict, "fix first: b");
        assert_eq!(r.exit_code(), 1);
        assert_eq!(
            r.counts,
            Counts {
                ok: 1,
                warn: 1,
                fail: 1,
                skipped: 0
            }
        );
    }

    #[test]
    fn a_check_failing_in_two_roles_is_named_once() {
        let r = ProbeReport::new(
            "env",
            "x",
            vec![check("env.rndv", Status::Fail), check("env.rndv", Status::Fail)],
            vec![],
        );
        assert_eq!(r.verdict, "fix first: env.rndv");
        assert_eq!(r.fix_first(), ["env.rndv"]);
        // The list keeps the checks' order, which the verdict's sentence spells.
        let r = ProbeReport::new(
            "env",
            "x",
            vec![
                check("z", Status::Fail),
                check("a", Status::Warn),
                check("b", Status::Fail),
            ],
            vec![],
        );
        assert_eq!(r.fix_first(), ["z", "b"]);
        assert_eq!(r.verdict, "fix first: z, b");
    }

    #[test]
    fn only_skipped_is_inconclusive_not_a_pass() {
        let r = ProbeReport::new("node", "local", vec![check("a", Status::Skipped)], vec![]);
        assert_eq!(r.status, Status::Skipped);
        assert!(r.verdict.starts_with("inconclusive"));
        assert_eq!(r.exit_code(), crate::exit::USAGE_OR_SETUP, "nothing was checked");
        // A warning is something seen: still inconclusive, but not "nothing checked".
        let r = ProbeReport::new(
            "node",
            "local",
            vec![check("a", Status::Skipped), check("b", Status::Warn)],
            vec![],
        );
        assert_eq!((r.status, r.exit_code()), (Status::Warn, 0));
    }

    #[test]
    fn all_ok_is_trusted() {
        let r = ProbeReport::new(
            "node",
            "local",
            vec![check("a", Status::Ok), check("b", Status::Ok)],
            vec![],
        );
        assert_eq!(r.status, Status::Ok);
        assert_eq!(
            r.verdict,
            "nothing on this node stands in the way of RDMA/NVLink transfers"
        );
    }

    #[test]
    fn only_disaggregated_recipes_are_called_trusted_disaggregated_transport() {
        let scoped = |scope: &str| Check {
            scope: Some(scope.into()),
            ..check("env.rndv", Status::Ok)
        };
        let disagg = ProbeReport::new(
            "env",
            "deploy.yaml",
            vec![scoped("prefill (P, deploy.yaml)"), scoped("decode (D, deploy.yaml)")],
            vec![],
        );
        assert_eq!(disagg.verdict, "disaggregated transport can be trusted");
        let aggregated = ProbeReport::new("env", "agg.yaml", vec![scoped("worker (W, agg.yaml)")], vec![]);
        assert!(
            !aggregated.verdict.contains("disaggregated transport"),
            "{}",
            aggregated.verdict
        );
        let nixl = ProbeReport::new("nixl", "local", vec![check("nixl.lib", Status::Ok)], vec![]);
        assert_eq!(nixl.verdict, "the NIXL install is usable");
    }

    #[test]
    fn skipped_checks_are_named_and_a_mostly_skipped_run_is_inconclusive() {
        let r = ProbeReport::new(
            "node",
            "local",
            vec![check("a", Status::Ok), check("b", Status::Skipped)],
            vec![],
        );
        assert_eq!(r.status, Status::Ok);
        assert_eq!(
            r.verdict,
            "nothing on this node stands in the way of RDMA/NVLink transfers; 1 check(s) skipped, which is not a pass"
        );
        let mostly = vec![
            check("a", Status::Ok),
            check("b", Status::Skipped),
            check("c", Status::Skipped),
        ];
        let r = ProbeReport::new("node", "local", mostly, vec![]);
        assert_eq!(r.status, Status::Warn);
        assert!(
            r.verdict.starts_with("inconclusive: only 1 of 3 checks could run"),
            "{}",
            r.verdict
        );
    }
}
