//! What the gate reports as findings: the failed and warned checks of a probe report, a node
//! that could not be probed, and a pair whose UCX refused the recipe's environment. The steps
//! gather; these decide what is said.

use icb_core::Status;
use icb_core::checks::ProbeReport;
use icb_core::model::Finding;
use icb_core::readiness::{Readiness, compare};

/// The failed and warned checks of `report` (ok and skipped checks are not findings). Each
/// finding names the side it was seen on (the check's scope: `prefill (P, deploy.yaml)`), and
/// the same finding on both sides of a two-role recipe is one line naming both.
pub fn of_report(step: &str, report: &ProbeReport) -> Vec<Finding> {
    let mut out: Vec<(Finding, Vec<String>)> = Vec::new();
    for c in report
        .checks
        .iter()
        .filter(|c| matches!(c.status, Status::Fail | Status::Warn))
    {
        let same = out.iter_mut().find(|(f, _)| {
            f.status == c.status
                && f.check.as_deref() == Some(c.id.as_str())
                && f.detail == c.detail
                && f.hint == c.hint
        });
        let scope = c.scope.clone();
        match same {
            Some((_, scopes)) => scopes.extend(scope),
            None => out.push((
                Finding {
                    step: step.to_string(),
                    status: c.status,
                    check: Some(c.id.clone()),
                    detail: c.detail.clone(),
                    hint: c.hint.clone(),
                },
                scope.into_iter().collect(),
            )),
        }
    }
    // The check's id is the finding's `check`, said once by whatever shows it (the diagnostic's
    // header, the gate's reason); the detail starts with the sides it was seen on, which nothing
    // else carries (issue 38: `fail[env.x]: probe env` was followed by `env.x (…): …`).
    out.into_iter()
        .map(|(mut f, scopes)| {
            if !scopes.is_empty() {
                f.detail = format!("{}: {}", scopes.join(" and "), f.detail);
            }
            f
        })
        .collect()
}

/// How probing one node ended.
#[derive(Debug)]
pub enum NodeProbe {
    /// The node's report, as a probe pod can stand behind it (`icb_probe::Vantage::judge`).
    Report(Box<ProbeReport>),
    /// The probe pod ran but its output could not be read.
    Unreadable(String),
    /// The probe pod could not run (not allowed, not scheduled, no image).
    PodFailed(String),
}

/// The findings of probing `node`: a probe that could not run is a warning, never a failure
/// (the pair still measures the fabric).
pub fn of_node(node: &str, probe: NodeProbe) -> Vec<Finding> {
    let step = format!("probe node/{node}");
    let warn = |detail: String, hint: Option<&str>| Finding {
        step: step.clone(),
        status: Status::Warn,
        check: None,
        detail,
        hint: hint.map(str::to_string),
    };
    match probe {
        NodeProbe::Report(report) => of_report(&step, &report),
        NodeProbe::Unreadable(e) => vec![warn(e, None)],
        NodeProbe::PodFailed(e) => vec![warn(e, Some("pass --no-node-probe where probe pods are not allowed"))],
    }
}

/// What the pair's two nodes disagree on before the transfer, from each node's `probe node`
/// readiness ([`icb_core::readiness::compare`], the comparison a rails run makes per rail): one
/// warning per value, naming both (`prefill gpu-1 mlx5_1:1 MTU 4096, decode gpu-2 mlx5_1:1 MTU
/// 1024`) and the fix. A side whose readiness was not read compares nothing: one warning says
/// so, never an agreement. `a` and `b` are `(label, readiness)`.
pub fn readiness_mismatches(a: (&str, Option<&Readiness>), b: (&str, Option<&Readiness>)) -> Vec<Finding> {
    let finding = |detail: String, hint: &str| Finding {
        step: "probe node".into(),
        status: Status::Warn,
        check: Some(READINESS_MISMATCH.into()),
        detail,
        hint: Some(hint.to_string()),
    };
    let (Some(ra), Some(rb)) = (a.1, b.1) else {
        let unread: Vec<&str> = [a, b].iter().filter(|(_, r)| r.is_none()).map(|(l, _)| *l).collect();
        return vec![finding(
            format!("readiness not compared: not read on {}", unread.join(" and ")),
            "probe both nodes with an ic-bench that reads RDMA readiness (probe node's readiness)",
        )];
    };
    compare(a.0, ra, b.0, rb)
        .mismatches
        .iter()
        .map(|m| finding(m.to_string(), m.field.fix()))
        .collect()
}

/// The `check` of a readiness mismatch between the pair's two nodes.
pub const READINESS_MISMATCH: &str = "readiness.mismatch";

/// UCX refused the environment the bench pods were modelled on: with a recipe, that is the
/// recipe's fault, which is what the gate is for.
pub fn ucx_refused_recipe(message: &str, side: impl std::fmt::Display, variable: Option<&str>) -> Finding {
    Finding {
        step: "pair".into(),
        status: Status::Fail,
        check: Some("pair.ucx_init".into()),
        detail: format!("{message} (the {side} bench pod runs the recipe's transport env)"),
        hint: Some(match variable {
            Some(v) => format!("UCX cannot start with {v}: fix it in the recipe"),
            None => "UCX cannot start with the recipe's transport env: check its UCX_* settings".into(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use icb_core::checks::Check;

    fn check(id: &str, status: Status) -> Check {
        serde_json::from_value(serde_json::json!({"id": id, "status": status, "detail": "seen", "hint": "fix"}))
            .expect("a check")
    }

    #[test]
    fn only_failed_and_warned_checks_are_findings() {
        let report = ProbeReport::new(
            "node",
            "node/a",
            vec![
                check("node.ok", Status::Ok),
                check("node.memlock", Status::Skipped),
                check("node.gid", Status::Warn),
                check("node.port", Status::Fail),
            ],
            vec![],
        );
        let f = of_node("a", NodeProbe::Report(Box::new(report)));
        let ids: Vec<_> = f.iter().map(|f| f.check.as_deref().unwrap_or("")).collect();
        assert_eq!(ids, ["node.gid", "node.port"]);
        assert!(f.iter().all(|f| f.step == "probe node/a"));
        // The id is the finding's `check`, not repeated in its detail (issue 38).
        assert_eq!(
            (f[0].check.as_deref(), f[0].detail.as_str()),
            (Some("node.gid"), "seen")
        );
    }

    /// Issue 36 item 4: with a two-role recipe every finding appeared twice with no side.
    #[test]
    fn a_finding_names_its_side_and_both_sides_fold_into_one_line() {
        let scoped = |id: &str, scope: &str, detail: &str| -> Check {
            serde_json::from_value(serde_json::json!({"id": id, "status": "warn", "detail": detail, "scope": scope}))
                .expect("a check")
        };
        let report = ProbeReport::new(
            "env",
            "deploy.yaml",
            vec![
                scoped("env.rndv", "prefill (P, deploy.yaml)", "UCX_RNDV_THRESH unset"),
                scoped("env.rndv", "decode (D, deploy.yaml)", "UCX_RNDV_THRESH unset"),
                scoped("env.tls", "decode (D, deploy.yaml)", "tcp allowed"),
            ],
            vec![],
        );
        let f = of_report("probe env", &report);
        let details: Vec<&str> = f.iter().map(|f| f.detail.as_str()).collect();
        assert_eq!(
            details,
            [
                "prefill (P, deploy.yaml) and decode (D, deploy.yaml): UCX_RNDV_THRESH unset",
                "decode (D, deploy.yaml): tcp allowed"
            ]
        );
    }

    #[test]
    fn a_node_that_could_not_be_probed_is_a_warning_with_the_way_out() {
        let f = of_node("b", NodeProbe::PodFailed("forbidden".into()));
        assert_eq!((f[0].status, f[0].detail.as_str()), (Status::Warn, "forbidden"));
        assert!(f[0].hint.as_deref().is_some_and(|h| h.contains("--no-node-probe")));
        let f = of_node("b", NodeProbe::Unreadable("truncated".into()));
        assert_eq!((f[0].status, f[0].hint.as_deref()), (Status::Warn, None));
    }

    #[test]
    fn a_ucx_refusal_names_the_variable_to_fix() {
        let f = ucx_refused_recipe("UCX init failed", "prefill", Some("UCX_TLS"));
        assert_eq!(f.status, Status::Fail);
        assert_eq!(
            f.detail,
            "UCX init failed (the prefill bench pod runs the recipe's transport env)"
        );
        assert_eq!(
            f.hint.as_deref(),
            Some("UCX cannot start with UCX_TLS: fix it in the recipe")
        );
    }

    fn node(mtu: u32, gid: u32) -> Readiness {
        use icb_core::readiness::PortReadiness;
        Readiness {
            ports: vec![PortReadiness {
                port: "mlx5_1:1".into(),
                link_layer: Some("Ethernet".into()),
                active_mtu: Some(mtu),
                gid_index: Some(gid),
                firmware: Some("28.39.1002".into()),
                ..Default::default()
            }],
            ..Default::default()
        }
    }

    #[test]
    fn two_nodes_that_disagree_on_the_mtu_and_gid_warn_naming_both_values_and_the_fix() {
        let (a, b) = (node(4096, 3), node(1024, 5));
        let f = readiness_mismatches(("prefill gpu-1", Some(&a)), ("decode gpu-2", Some(&b)));
        let details: Vec<&str> = f.iter().map(|f| f.detail.as_str()).collect();
        assert_eq!(
            details,
            vec![
                "prefill gpu-1 mlx5_1:1 MTU 4096, decode gpu-2 mlx5_1:1 MTU 1024",
                "prefill gpu-1 mlx5_1:1 GID index 3, decode gpu-2 mlx5_1:1 GID index 5",
            ]
        );
        assert!(f.iter().all(|f| f.status == Status::Warn && f.step == "probe node"));
        assert!(f.iter().all(|f| f.check.as_deref() == Some(READINESS_MISMATCH)));
        assert!(f[0].hint.as_deref().unwrap().contains("one MTU"), "{:?}", f[0].hint);
        assert!(f[1].hint.as_deref().unwrap().contains("GID index"), "{:?}", f[1].hint);
        let same = readiness_mismatches(("prefill gpu-1", Some(&a)), ("decode gpu-2", Some(&node(4096, 3))));
        assert!(same.is_empty(), "{same:?}");
    }

    #[test]
    fn a_node_whose_readiness_was_not_read_is_said_never_an_agreement() {
        let a = node(4096, 3);
        let f = readiness_mismatches(("prefill gpu-1", Some(&a)), ("decode gpu-2", None));
        assert_eq!(f.len(), 1, "{f:?}");
        assert_eq!(f[0].status, Status::Warn);
        assert_eq!(f[0].detail, "readiness not compared: not read on decode gpu-2");
    }
}
