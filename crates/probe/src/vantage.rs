//! Where a node is probed from, and what that vantage can say. `probe node` and `probe nixl`
//! read a node from this machine (or a replayed root), from inside a running pod (the exec API:
//! the worker's own view, environment included), or from a short-lived probe pod on a node
//! (its own limits and environment say nothing about the workers', so its memlock check is
//! skipped and it brings no transport environment). The Kubernetes calls themselves are the
//! caller's ([`Remote`]); this module decides what to run and what the answer means.

use crate::envspec::TransportEnv;
use crate::remote::{SnapshotError, parse_snapshot, snapshot_from_exec};
use crate::source::{LocalSource, NodeSource};
use icb_core::Status;
use icb_core::checks::ProbeReport;

/// Where a node is read from.
#[derive(Debug, Clone)]
pub enum Vantage {
    /// This machine, or a replayed root.
    Local(LocalSource),
    /// An existing pod, through the exec API (`--pod`).
    Pod(String),
    /// A short-lived probe pod on a node (`--node`).
    ProbePod(String),
}

/// What the snapshot script printed where it ran.
#[derive(Debug, Clone)]
pub struct ExecOutput {
    pub stdout: String,
    pub stderr: String,
    pub exit_code: i32,
}

/// A snapshot that could not be read, with where it came from.
#[derive(Debug, thiserror::Error)]
#[error("{target}: {source}")]
pub struct SnapshotAt {
    pub target: String,
    #[source]
    pub source: SnapshotError,
}

/// The Kubernetes side of a remote vantage, supplied by the caller.
pub trait Remote {
    type Error: From<SnapshotAt>;
    /// Runs `script` (`sh -c`) in the running pod `pod`.
    fn exec(&mut self, pod: &str, script: &str) -> Result<ExecOutput, Self::Error>;
    /// Runs `script` as the command of a probe pod on `node` and returns what it printed.
    fn probe_pod(&mut self, node: &str, script: &str) -> Result<String, Self::Error>;
}

/// A node opened at its vantage: where to read it, and the transport environment seen there
/// when the vantage has one.
pub struct Opened {
    pub source: Box<dyn NodeSource>,
    pub env: Option<TransportEnv>,
}

impl Vantage {
    /// `pod/NAME`, `node/NAME`, or `local`.
    pub fn target(&self) -> String {
        match self {
            Vantage::Local(_) => "local".to_string(),
            Vantage::Pod(pod) => format!("pod/{pod}"),
            Vantage::ProbePod(node) => format!("node/{node}"),
        }
    }

    /// Reads the node: locally as it is, remotely by running `script` there (the snapshot
    /// script of `remote::node_script` or `remote::nixl_script`).
    pub fn open<R: Remote>(self, script: &str, remote: &mut R) -> Result<Opened, R::Error> {
        let target = self.target();
        let at = |source| SnapshotAt {
            target: target.clone(),
            source,
        };
        Ok(match self {
            Vantage::Local(source) => Opened {
                source: Box::new(source),
                env: Some(TransportEnv::from_process()),
            },
            Vantage::Pod(pod) => {
                let out = remote.exec(&pod, script)?;
                let snap = snapshot_from_exec(&target, &out.stdout, out.exit_code, &out.stderr).map_err(at)?;
                let env = TransportEnv::new(format!("{target} env"), snap.env.clone());
                Opened {
                    source: Box::new(snap),
                    env: Some(env),
                }
            }
            Vantage::ProbePod(node) => {
                let text = remote.probe_pod(&node, script)?;
                Opened {
                    source: Box::new(parse_snapshot(&target, &text).map_err(at)?),
                    env: None,
                }
            }
        })
    }

    /// The report as this vantage can stand behind it: from a probe pod, whose own limits say
    /// nothing about the workers', the memlock check is skipped (and the roll-up redone).
    pub fn judge(&self, report: ProbeReport) -> ProbeReport {
        if !matches!(self, Vantage::ProbePod(_)) {
            return report;
        }
        let mut checks = report.checks;
        for c in checks.iter_mut().filter(|c| c.id == "node.memlock") {
            c.status = Status::Skipped;
            c.detail = "not meaningful from a probe pod: run with --pod on a worker".into();
            c.hint = None;
        }
        let mut out = ProbeReport::new("node", &report.target, checks, report.next_steps);
        out.rail_map = report.rail_map;
        out.readiness = report.readiness;
        out
    }
}

/// What a probe pod on `node` printed (the `remote::node_script` snapshot), read as that node's
/// report against `expect` and judged as a probe pod can stand behind it: `gate` probes its
/// nodes this way, each against the transport env of the side that runs there.
pub fn probe_pod_report(
    node: &str,
    text: &str,
    gather: &crate::GatherOptions,
    expect: &crate::NodeExpectations,
) -> Result<ProbeReport, SnapshotError> {
    let snap = parse_snapshot(&format!("node/{node}"), text)?;
    let report = crate::probe_node(&snap, gather, expect).0;
    // The one memlock rule: a probe pod's own limits say nothing about the workers'.
    Ok(Vantage::ProbePod(node.to_string()).judge(report))
}

#[cfg(test)]
mod tests {
    use super::*;
    use icb_core::checks::Check;

    /// A scripted cluster: what each call returns, and what it was asked.
    #[derive(Default)]
    struct Scripted {
        exec: Option<ExecOutput>,
        pod_text: Option<String>,
        asked: Vec<String>,
    }

    #[derive(Debug)]
    enum Failed {
        Snapshot,
        Scripted,
    }

    impl From<SnapshotAt> for Failed {
        fn from(_: SnapshotAt) -> Failed {
            Failed::Snapshot
        }
    }

    impl Remote for Scripted {
        type Error = Failed;
        fn exec(&mut self, pod: &str, script: &str) -> Result<ExecOutput, Failed> {
            self.asked.push(format!("exec {pod}: {script}"));
            self.exec.clone().ok_or(Failed::Scripted)
        }
        fn probe_pod(&mut self, node: &str, script: &str) -> Result<String, Failed> {
            self.asked.push(format!("probe pod {node}: {script}"));
            self.pod_text.clone().ok_or(Failed::Scripted)
        }
    }

    fn check(id: &str, status: Status) -> Check {
        serde_json::from_value(serde_json::json!({
            "id": id, "title": id, "status": status, "detail": "d", "hint": "h"
        }))
        .expect("a check")
    }

    #[test]
    fn a_probe_pod_skips_memlock_and_rolls_up_again() {
        let report = ProbeReport::new(
            "node",
            "node/a",
            vec![check("node.memlock", Status::Fail), check("node.rdma", Status::Ok)],
            vec![],
        );
        let local = Vantage::Local(LocalSource::default()).judge(report.clone());
        assert_eq!(local.checks[0].status, Status::Fail);
        let pod = Vantage::Pod("w".into()).judge(report.clone());
        assert_eq!(pod.checks[0].status, Status::Fail);
        let probe_pod = Vantage::ProbePod("a".into()).judge(report.clone());
        assert_eq!(probe_pod.checks[0].status, Status::Skipped);
        assert!(probe_pod.checks[0].hint.is_none());
        assert_eq!(probe_pod.checks[1].status, Status::Ok);
        assert_ne!(probe_pod.exit_code(), report.exit_code());
    }

    #[test]
    fn a_probe_pods_output_is_its_nodes_report_or_why_it_is_unreadable() {
        let gather = crate::GatherOptions {
            tool_timeout: std::time::Duration::from_secs(1),
            counter_interval: std::time::Duration::ZERO,
        };
        let expect = crate::NodeExpectations::default();
        let report = probe_pod_report("n1", "@@ICB DONE\n", &gather, &expect).unwrap();
        assert_eq!(report.target, "node/n1");
        // The readiness read on the node survives the probe pod's re-roll-up.
        assert!(report.readiness.is_some(), "{report:?}");
        assert!(
            report
                .checks
                .iter()
                .filter(|c| c.id == "node.memlock")
                .all(|c| c.status == Status::Skipped)
        );
        assert!(probe_pod_report("n1", "", &gather, &expect).is_err());
    }

    #[test]
    fn each_vantage_runs_the_script_where_it_says_and_brings_its_env() {
        let mut remote = Scripted::default();
        let opened = Vantage::Local(LocalSource::default()).open("S", &mut remote);
        assert!(opened.is_ok_and(|o| o.env.is_some()));
        assert!(remote.asked.is_empty(), "a local read runs nothing remote");

        remote.pod_text = Some("@@ICB DONE\n".into());
        let opened = Vantage::ProbePod("n1".into()).open("S", &mut remote);
        assert!(
            opened.is_ok_and(|o| o.env.is_none()),
            "a probe pod's env is not the workers'"
        );
        assert_eq!(remote.asked, ["probe pod n1: S"]);

        remote.exec = Some(ExecOutput {
            stdout: String::new(),
            stderr: "sh: not found".into(),
            exit_code: 127,
        });
        let failed = Vantage::Pod("w".into()).open("S", &mut remote);
        assert!(
            matches!(failed, Err(Failed::Snapshot)),
            "a script that failed with no snapshot is an error"
        );
        assert_eq!(remote.asked.last().map(String::as_str), Some("exec w: S"));
    }
}
