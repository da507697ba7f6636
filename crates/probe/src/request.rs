//! `probe node` and `probe nixl` as typed requests: the flags read once into a request, which
//! names its vantage and the script a remote vantage runs, and turns the node once opened into
//! the one report. Opening the node (the Kubernetes calls) and printing stay with the caller.

use crate::remote::{nixl_script, node_script};
use crate::vantage::Opened;
use crate::{
    GatherOptions, LocalSource, NixlOptions, NodeExpectations, ReplayDirs, ReplayError, TransportEnv, Vantage,
};
use icb_core::checks::ProbeReport;
use std::path::PathBuf;
use std::time::Duration;

/// `probe node`: how the node is read and what it is held to.
#[derive(Debug, Clone)]
pub struct NodeRequest {
    pub gather: GatherOptions,
    /// The recipe's transport variables and whether they ask for RDMA (`--recipe`); without a
    /// recipe the node is held to the environment seen at its vantage.
    pub recipe: Option<(TransportEnv, bool)>,
    /// `--require-rdma`.
    pub require_rdma: bool,
}

impl NodeRequest {
    /// The snapshot script a pod runs (the counter pause bounded at 30 s).
    pub fn script(&self) -> String {
        let pause = self.gather.counter_interval.as_secs().min(30) as u32;
        node_script(pause, self.gather.tool_timeout.as_secs())
    }

    /// The node's report as read at `vantage`: judged for what the vantage can say, with the
    /// replayed roots named first.
    pub fn report(&self, vantage: &Vantage, opened: Opened) -> ProbeReport {
        let (env, recipe_rdma) = match &self.recipe {
            Some((env, rdma)) => (env.clone(), *rdma),
            None => (opened.env.unwrap_or_default(), false),
        };
        let expect = NodeExpectations {
            env,
            rdma_required: self.require_rdma || recipe_rdma,
        };
        let (report, _facts) = crate::probe_node(opened.source.as_ref(), &self.gather, &expect);
        let mut report = vantage.judge(report);
        let replay_note = match vantage {
            Vantage::Local(s) => s.replay_note(),
            _ => None,
        };
        report.next_steps.splice(0..0, replay_note);
        report
    }
}

/// `--pod`, `--node`, or this machine (with the `--*-root` replays, each checked).
pub fn node_vantage(pod: Option<&str>, node: Option<&str>, replay: &ReplayDirs) -> Result<Vantage, ReplayError> {
    Ok(match (pod, node) {
        (Some(pod), _) => Vantage::Pod(pod.to_string()),
        (None, Some(node)) => Vantage::ProbePod(node.to_string()),
        (None, None) => Vantage::Local(LocalSource::from_replay_flags(replay)?),
    })
}

/// `probe nixl`: where the install is read and where libnixl is looked for first.
#[derive(Debug, Clone)]
pub struct NixlRequest {
    /// Deadline for python3 (finding the nixl package).
    pub tool_timeout: Duration,
    /// `--pod` (else this machine) and its namespace, as the `pair` hint names it.
    pub pod: Option<String>,
    pub namespace: Option<String>,
    /// `--nixl-lib DIR`, as given.
    pub nixl_lib: Option<PathBuf>,
}

impl NixlRequest {
    pub fn vantage(&self) -> Vantage {
        match &self.pod {
            Some(pod) => Vantage::Pod(pod.clone()),
            None => Vantage::Local(LocalSource::default()),
        }
    }

    /// The script a pod runs.
    pub fn script(&self) -> String {
        nixl_script(self.tool_timeout.as_secs())
    }

    /// The options of the checks, with the environment seen at the vantage.
    pub fn options(&self, env: TransportEnv) -> NixlOptions {
        let ns = self
            .namespace
            .as_deref()
            .map(|n| format!(" -n {n}"))
            .unwrap_or_default();
        NixlOptions {
            env,
            tool_timeout: self.tool_timeout,
            pair_hint_target: self.pod.as_ref().map(|pod| format!("pod/{pod}{ns}")),
            lib_dirs: self
                .nixl_lib
                .iter()
                .filter_map(|d| std::path::absolute(d).ok())
                .map(|d| d.display().to_string())
                .collect(),
        }
    }

    /// The install's report; `engine_load` is the NIXL engine's own load attempt where it ran.
    pub fn report(&self, opened: Opened, engine_load: Option<Result<String, impl std::fmt::Display>>) -> ProbeReport {
        let opts = self.options(opened.env.unwrap_or_default());
        crate::probe_nixl_with_engine(opened.source.as_ref(), &opts, engine_load)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nixl(pod: Option<&str>, namespace: Option<&str>, lib: Option<&str>) -> NixlRequest {
        NixlRequest {
            tool_timeout: Duration::from_secs(10),
            pod: pod.map(str::to_string),
            namespace: namespace.map(str::to_string),
            nixl_lib: lib.map(PathBuf::from),
        }
    }

    #[test]
    fn the_nixl_hint_names_the_pod_and_its_namespace_and_the_library_is_absolute() {
        let o = nixl(Some("w-0"), Some("dynamo"), Some("rel/lib")).options(TransportEnv::default());
        assert_eq!(o.pair_hint_target.as_deref(), Some("pod/w-0 -n dynamo"));
        assert_eq!(o.lib_dirs.len(), 1);
        assert!(PathBuf::from(&o.lib_dirs[0]).is_absolute(), "{:?}", o.lib_dirs);
        assert!(o.lib_dirs[0].ends_with("rel/lib"), "{:?}", o.lib_dirs);
        let here = nixl(None, Some("dynamo"), None);
        assert_eq!(here.options(TransportEnv::default()).pair_hint_target, None);
        assert!(matches!(here.vantage(), Vantage::Local(_)));
        assert!(matches!(nixl(Some("w-0"), None, None).vantage(), Vantage::Pod(p) if p == "w-0"));
    }

    #[test]
    fn the_node_vantage_follows_the_flags_and_a_missing_replay_root_is_named() {
        let none = ReplayDirs::default();
        assert!(matches!(node_vantage(Some("p"), None, &none), Ok(Vantage::Pod(p)) if p == "p"));
        assert!(matches!(node_vantage(None, Some("n"), &none), Ok(Vantage::ProbePod(n)) if n == "n"));
        assert!(matches!(node_vantage(None, None, &none), Ok(Vantage::Local(_))));
        let missing = ReplayDirs {
            sysfs_root: Some(PathBuf::from("/nonexistent/icb-sys")),
            ..ReplayDirs::default()
        };
        let e = node_vantage(None, None, &missing).unwrap_err();
        assert!(e.to_string().contains("--sysfs-root"), "{e}");
    }

    #[test]
    fn the_node_script_bounds_the_counter_pause() {
        let request = |pause_s| NodeRequest {
            gather: GatherOptions {
                tool_timeout: Duration::from_secs(10),
                counter_interval: Duration::from_secs(pause_s),
            },
            recipe: None,
            require_rdma: false,
        };
        assert_eq!(request(300).script(), node_script(30, 10));
        assert_eq!(request(1).script(), node_script(1, 10));
    }

    fn no_rdma_node() -> ReplayDirs {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/nodes/no_rdma");
        ReplayDirs {
            sysfs_root: Some(root.join("sys")),
            ..ReplayDirs::default()
        }
    }

    fn rdma_devs(report: &ProbeReport) -> icb_core::Status {
        let check = report.checks.iter().find(|c| c.id == "node.rdma_devs");
        check.expect("a node.rdma_devs check").status
    }

    #[test]
    fn the_node_report_holds_the_node_to_the_recipe_and_names_a_partial_replay_first() {
        let vantage = node_vantage(None, None, &no_rdma_node()).unwrap();
        let Vantage::Local(source) = vantage.clone() else {
            panic!("a local vantage")
        };
        let opened = || Opened {
            source: Box::new(source.clone()),
            env: None,
        };
        let request = |recipe, require_rdma| NodeRequest {
            gather: GatherOptions {
                tool_timeout: Duration::from_secs(5),
                counter_interval: Duration::ZERO,
            },
            recipe,
            require_rdma,
        };
        let plain = request(None, false).report(&vantage, opened());
        let note = plain.next_steps.first().expect("the replay note");
        assert!(note.contains("/dev"), "{note}");
        assert_ne!(rdma_devs(&plain), icb_core::Status::Fail);
        // A recipe that asks for RDMA holds the node to it, as --require-rdma does.
        let recipe = Some((TransportEnv::default(), true));
        assert_eq!(
            rdma_devs(&request(recipe, false).report(&vantage, opened())),
            icb_core::Status::Fail
        );
        assert_eq!(
            rdma_devs(&request(None, true).report(&vantage, opened())),
            icb_core::Status::Fail
        );
    }
}
