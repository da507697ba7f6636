//! One rank of a Kubernetes whole-node run, exec'd into its node's bench pod: its pinning as
//! shell assignments, the wrapper that stops it when its exec's stdin ends ([`RANK_SCRIPT`]),
//! the run's token sent on stdin, and the row launcher that starts a rail row's two sides so
//! ([`KubeRailLauncher`]). `pair --kv-shape` on bench pods starts its ranks and its coordinator
//! the same way ([`exec_rank`]).

use icb_core::model::{Locality, PairReport, Placement};
use icb_core::protocol::{ChildPlan, Listening};
use icb_core::rails::RailEnd;
use icb_kube::Cluster;
use icb_pair::inplace::{InPlaceSide, Worker, pods_placement};
use icb_pair::launcher::{LaunchError, Launcher, Side as _};
use std::time::Duration;

/// A rank's pinning inside its pod: the environment and the NUMA node whose CPUs it runs on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodPinning {
    pub env: Vec<(String, String)>,
    pub numa: Option<u32>,
}

/// The side's own environment first, the row's pinning over it.
pub(super) fn rank_pinning(side_env: &[(String, String)], end: &RailEnd) -> PodPinning {
    let pinned = super::local::rank_env(end);
    let mut env: Vec<(String, String)> = side_env
        .iter()
        .filter(|(k, _)| !pinned.iter().any(|(p, _)| p == k))
        .cloned()
        .collect();
    env.extend(pinned);
    PodPinning {
        env,
        numa: super::local::rank_numa(end),
    }
}

/// Runs `"$@"` as one rank: pinned to the NUMA node's CPUs (`$numa`, as this pod's sysfs lists
/// them) where taskset exists and may use them, stopped when stdin ends (only while it is still
/// ic-bench), and waited for.
/// The row's token arrives first on stdin, as one line, into the rank's environment (never on a
/// command line).
const RANK_SCRIPT: &str = r#"IFS= read -r IC_BENCH_TOKEN || { echo "the run's token did not arrive" >&2; exit 98; }
export IC_BENCH_TOKEN
if [ -n "$numa" ]; then
  cpus=$(cat "/sys/devices/system/node/node$numa/cpulist" 2>/dev/null)
  if [ -n "$cpus" ] && taskset -c "$cpus" true >/dev/null 2>&1; then set -- taskset -c "$cpus" "$@"; fi
fi
exec 3<&0
"$@" </dev/null &
p=$!
echo "icb-rails-started $p"
( cat <&3 >/dev/null 2>&1
  case "$(readlink "/proc/$p/exe" 2>/dev/null)" in *ic-bench*) kill "$p" 2>/dev/null;; esac ) >/dev/null 2>&1 &
exec 3<&-
wait "$p"
"#;

/// `value` as one word for sh.
fn sh_quote(value: &str) -> String {
    format!("'{}'", value.replace('\'', r"'\''"))
}

/// The exec command of one rank: the pinning as shell assignments, then [`RANK_SCRIPT`].
pub fn rank_command(pinning: &PodPinning, args: &[String]) -> Vec<String> {
    let mut script = String::new();
    for (k, v) in &pinning.env {
        script.push_str(&format!("export {k}={}\n", sh_quote(v)));
    }
    let numa = pinning.numa.map(|n| n.to_string()).unwrap_or_default();
    script.push_str(&format!("numa={}\n{RANK_SCRIPT}", sh_quote(&numa)));
    let mut command = vec!["sh".to_string(), "-c".into(), script, "sh".into(), "ic-bench".into()];
    command.extend(args.iter().cloned());
    command
}

/// One row's two ranks, exec'd into the rails' pods.
pub struct KubeRailLauncher {
    pub(super) cluster: Cluster,
    pub(super) row: usize,
    pub(super) prefill: (Worker, PodPinning),
    pub(super) decode: (Worker, PodPinning),
    pub(super) open_timeout: Duration,
    pub(super) side_timeout: Duration,
    pub(super) side_args: Vec<String>,
    /// This row's token, sent to both ranks on stdin (`RANK_SCRIPT`); never printed.
    pub(super) token: String,
}

impl KubeRailLauncher {
    async fn exec(&self, role: &'static str, args: Vec<String>) -> Result<InPlaceSide, LaunchError> {
        let (worker, pinning) = match role {
            "decode" => &self.decode,
            _ => &self.prefill,
        };
        let mut args = args;
        args.extend(self.side_args.iter().cloned());
        let exec = RankExec {
            cluster: &self.cluster,
            worker,
            token: &self.token,
            open_timeout: self.open_timeout,
        };
        exec.start(role, &format!("rail {} {role} side", self.row), pinning, &args)
            .await
    }
}

/// Where and how ranks are exec'd: one bench pod, the run's token, the deadline to open.
pub struct RankExec<'a> {
    pub cluster: &'a Cluster,
    pub worker: &'a Worker,
    /// Sent to the rank on stdin ([`RANK_SCRIPT`]); never printed.
    pub token: &'a str,
    /// Opening the exec, sending the token and the rank's start line, each.
    pub open_timeout: Duration,
}

impl RankExec<'_> {
    /// Starts `ic-bench ARGS` pinned as `pinning`, up to the wrapper's start line; `what` names
    /// it in errors (`rail 2 decode side`, `decode rank 3`). The returned side's output is the
    /// rank's; closing its stdin stops it.
    pub async fn start(
        &self,
        role: &'static str,
        what: &str,
        pinning: &PodPinning,
        args: &[String],
    ) -> Result<InPlaceSide, LaunchError> {
        let worker = self.worker;
        let command = rank_command(pinning, args);
        let label = format!("pod/{}", worker.pod);
        let mut session = self
            .cluster
            .exec_session(&worker.pod, worker.container.as_deref(), &command, self.open_timeout)
            .await
            .map_err(|e| LaunchError::new(format!("{what} in {label}: {e}")))?;
        let token = std::io::Cursor::new(format!("{}\n", self.token).into_bytes());
        tokio::time::timeout(self.open_timeout, session.send(token))
            .await
            .map_err(|_| LaunchError::new(format!("{what} in {label}: stdin did not take the token")))?
            .map_err(|e| LaunchError::new(format!("{what} in {label}: {e}")))?;
        let mut side = InPlaceSide::new(role, label, session);
        // Up to the start line: a rank that could not start says why in its last words.
        let started = tokio::time::timeout(self.open_timeout, side.read_until("icb-rails-started ")).await;
        if matches!(started, Ok(true)) {
            return Ok(side);
        }
        let why = side.last_words();
        side.stop(Duration::ZERO).await;
        Err(LaunchError::new(format!(
            "{what} in pod/{} did not start: {why}",
            worker.pod
        )))
    }
}

impl Launcher for KubeRailLauncher {
    type Side = InPlaceSide;

    fn locality(&self) -> Locality {
        Locality::of_same_host(self.prefill.0.node == self.decode.0.node)
    }

    fn mode(&self) -> String {
        "kubernetes (rails)".into()
    }

    async fn start_decode(&mut self) -> Result<InPlaceSide, LaunchError> {
        let idle = format!("{}s", self.side_timeout.as_secs().max(1));
        let args = [
            "serve",
            "--listen",
            "0.0.0.0:0",
            "--once",
            "--idle-timeout",
            &idle,
            "--side-events",
        ];
        self.exec("decode", args.map(String::from).to_vec()).await
    }

    async fn start_prefill(&mut self, server: &Listening, plan: &ChildPlan) -> Result<InPlaceSide, LaunchError> {
        let args = vec![
            "connect".into(),
            self.decode.0.server_address(server)?,
            "--plan".into(),
            plan.to_json(),
        ];
        self.exec("prefill", args).await
    }

    fn placement(&self, server: &Listening, _report: &PairReport) -> Placement {
        let workers = (&self.prefill.0, &self.decode.0);
        pods_placement(self, self.cluster.namespace(), workers, server)
    }

    async fn cleanup(&mut self) -> Result<String, LaunchError> {
        // The ranks stop when their exec's stdin ends (the pipeline stopped both sides); the
        // pods are the seam's to delete.
        Ok(format!("the ranks of row {}", self.row))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ranks_pinning_is_quoted_for_the_shell() {
        let pinning = PodPinning {
            env: vec![
                ("UCX_NET_DEVICES".into(), "mlx5_0:1".into()),
                ("X".into(), "a'b".into()),
            ],
            numa: Some(1),
        };
        let cmd = rank_command(&pinning, &["serve".into()]);
        assert_eq!(&cmd[..2], ["sh", "-c"]);
        assert!(cmd[2].starts_with("export UCX_NET_DEVICES='mlx5_0:1'\nexport X='a'\\''b'\nnuma='1'\n"));
        assert_eq!(&cmd[3..], ["sh", "ic-bench", "serve"]);
    }
}
