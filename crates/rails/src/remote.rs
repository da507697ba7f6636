//! The rails seam between two bare-metal hosts: `ic-bench serve --rails` on the decode host,
//! `ic-bench connect HOST:PORT --rails` on the prefill host, no orchestrator in between.
//!
//! The decode host ([`ServeRanks`], [`RailsHost`]) starts one serve rank per rail of its own rail
//! map, each pinned as the local seam pins its ranks ([`super::local::pinning`]), each serving
//! client after client on a free port, and answers the rails agent protocol ([`super::agent`]):
//! its [`NodeRailInfo`] with every rank's address, and snapshots of its NIC counters.
//!
//! The prefill host ([`RemoteRails`]) reads its own rails and counters from its sysfs and the
//! decode host's from the agent. Each row's launcher ([`RemoteRowLauncher`]) starts the local
//! prefill rank (`ic-bench connect <rank> --plan …`, pinned) and treats the decode rank as
//! already listening: a side that yields one `listening` line and never ends on its own; stopping
//! it does nothing remote (the rank serves the next row). Everything the serve host started is
//! its own to stop.

use super::agent::{AgentError, AgentErrorKind, AgentHost, AgentRails, Ask, RankAddress, ask};
use super::local::pinning;
use super::plan::NodeRailInfo;
use super::{RailRow, RailSeam};
use icb_core::model::{Endpoint, Locality, PairReport, Placement};
use icb_core::protocol::{ChildPlan, Listening, SideEvent, parse_side_line, side_line};
use icb_core::rails::nic_health::HealthSnapshot;
use icb_core::rails::{CounterSnapshot, RailEnd};
use icb_isolate::{Isolation, LocalPair, Pod, PodSpec};
use icb_pair::SideRole;
use icb_pair::launcher::{LaunchError, LaunchFailure, Launcher, Side};
use icb_pair::local::{LocalLauncher, LocalOptions, LocalSide, RankPinning, SidePinning};
use std::net::{IpAddr, SocketAddr};
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncBufReadExt, BufReader};

/// How long a question to the agent may take (counters: a few hundred sysfs reads there).
pub const ASK_DEADLINE: Duration = Duration::from_secs(15);

/// The serve ranks of the decode host, one per rail; killed (process trees) on [`stop`] or drop.
///
/// [`stop`]: ServeRanks::stop
pub struct ServeRanks {
    ranks: Vec<RankAddress>,
    pods: Vec<Pod>,
}

impl ServeRanks {
    /// Starts one `serve` per rail end, listening on `ip` (a free port each), and waits until
    /// every one announced its address, within `deadline`. On any failure every started rank is
    /// killed.
    pub async fn start(
        opts: &LocalOptions,
        ends: &[RailEnd],
        ip: IpAddr,
        deadline: Duration,
    ) -> Result<ServeRanks, LaunchError> {
        let mut started = ServeRanks {
            ranks: Vec::new(),
            pods: Vec::new(),
        };
        for end in ends {
            let pod = spawn_rank(opts, &pinning(end), ip)?;
            started.pods.push(pod);
            let pod = started.pods.last_mut().ok_or_else(|| LaunchError::new("no rank"))?;
            let listening =
                match tokio::time::timeout(deadline, await_listening(pod, end.rail, opts.forward_stderr)).await {
                    Ok(r) => r?,
                    Err(_) => {
                        return Err(LaunchError::of(
                            LaunchFailure::Deadline,
                            format!(
                                "the serve rank of rail {} did not listen within {} s",
                                end.rail,
                                deadline.as_secs()
                            ),
                        ));
                    }
                };
            tracing::info!(
                "rail {}: serve rank listening on {} (UCX_NET_DEVICES={})",
                end.rail,
                listening.address,
                end.ucx_net_devices
            );
            started.ranks.push(RankAddress {
                rail: end.rail,
                ucx_net_devices: end.ucx_net_devices.clone(),
                listening,
            });
        }
        Ok(started)
    }

    /// No ranks (what is left after [`ServeRanks::stop`] took them).
    pub fn empty() -> ServeRanks {
        ServeRanks {
            ranks: Vec::new(),
            pods: Vec::new(),
        }
    }

    pub fn ranks(&self) -> &[RankAddress] {
        &self.ranks
    }

    /// The first rank that is gone, with its exit status.
    pub fn exited(&mut self) -> Option<String> {
        self.pods
            .iter_mut()
            .zip(&self.ranks)
            .find_map(|(pod, rank)| match pod.try_wait() {
                Ok(Some(status)) => Some(format!("the serve rank of rail {} exited ({status})", rank.rail)),
                _ => None,
            })
    }

    /// Kills every rank's process tree and waits for it; says what was stopped.
    pub async fn stop(&mut self) -> String {
        let n = self.pods.len();
        for pod in &mut self.pods {
            if let Err(e) = pod.kill().await {
                tracing::warn!("stopping a serve rank: {e}");
            }
        }
        self.pods.clear();
        format!("{n} serve ranks")
    }
}

fn spawn_rank(opts: &LocalOptions, pin: &SidePinning, ip: IpAddr) -> Result<Pod, LaunchError> {
    let listen = SocketAddr::new(ip, 0).to_string();
    let mut spec = match &pin.cpus {
        Some(cpus) => PodSpec::plain("taskset").arg("-c").arg(cpus).arg(&opts.exe),
        None => PodSpec::plain(&opts.exe),
    }
    .args(["serve", "--listen", &listen, "--side-events"])
    .args(&opts.verbosity)
    .args(&opts.side_args)
    .envs(pin.env.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    if let Some(dir) = &opts.ucx_lib {
        spec = spec.arg("--ucx-lib").arg(dir);
    }
    spec.spawn().map_err(|e| LaunchError::new(e.to_string()))
}

/// Reads a rank's stdout until its `listening` line; keeps draining both its outputs after.
async fn await_listening(pod: &mut Pod, rail: usize, forward: bool) -> Result<Listening, LaunchError> {
    if let Some(err) = pod.take_stderr() {
        tokio::spawn(async move {
            let mut lines = BufReader::new(err).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if forward {
                    eprintln!("[rail {rail}] {line}");
                }
            }
        });
    }
    let out = pod
        .take_stdout()
        .ok_or_else(|| LaunchError::new("a serve rank has no stdout"))?;
    let mut lines = BufReader::new(out).lines();
    loop {
        match lines.next_line().await {
            Ok(Some(line)) => match parse_side_line(&line) {
                Ok(Some(SideEvent::Listening(l))) => {
                    tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
                    return Ok(l);
                }
                Ok(Some(SideEvent::Failed(f))) => {
                    return Err(LaunchError::of(
                        LaunchFailure::SideExited { code: None },
                        format!("the serve rank of rail {rail} failed: {}", f.message),
                    ));
                }
                _ => tracing::debug!("[rail {rail}] {line}"),
            },
            Ok(None) | Err(_) => {
                let status = pod.wait().await.map(|s| s.to_string()).unwrap_or_default();
                return Err(LaunchError::of(
                    LaunchFailure::SideExited { code: None },
                    format!("the serve rank of rail {rail} exited before listening ({status}); rerun with -v"),
                ));
            }
        }
    }
}

/// What the decode host's agent answers: its rails and ranks, its counters from `/sys`.
pub struct RailsHost {
    pub info: NodeRailInfo,
    pub ranks: Mutex<ServeRanks>,
}

impl AgentHost for RailsHost {
    fn rails(&self) -> Result<AgentRails, AgentError> {
        let mut ranks = self.ranks.lock().map_err(|_| AgentError {
            kind: AgentErrorKind::RankExited,
            message: "the ranks are unusable".into(),
        })?;
        if let Some(gone) = ranks.exited() {
            return Err(AgentError {
                kind: AgentErrorKind::RankExited,
                message: format!("{gone}: restart `ic-bench serve --rails`"),
            });
        }
        Ok(AgentRails {
            info: self.info.clone(),
            ranks: ranks.ranks().to_vec(),
        })
    }

    fn counters(&self) -> CounterSnapshot {
        icb_probe::counters::snapshot(Path::new("/sys"))
    }

    fn health(&self) -> HealthSnapshot {
        icb_probe::counters::health_snapshot_with_pause(Path::new("/sys"), &icb_probe::counters::ethtool_stats)
    }
}

/// The prefill host's seam: its own rails and counters from its sysfs, the decode host's from
/// the agent; a local prefill rank per row, the decode ranks already listening.
pub struct RemoteRails {
    agent: String,
    opts: LocalOptions,
    pair: Arc<LocalPair>,
    ranks: Vec<RankAddress>,
    locality: Locality,
    nodes: (String, String),
    /// The decode host's health counters, sent with its last byte counters (the same instant).
    decode_health: Option<HealthSnapshot>,
}

impl RemoteRails {
    /// Asks the agent at `agent` (HOST:PORT) for the decode host's rails; the ranks' unspecified
    /// addresses become the agent's. Returns the seam and the decode node for the planner.
    pub async fn connect(
        agent: &str,
        opts: LocalOptions,
        locality: Locality,
        prefill_node: String,
    ) -> Result<(RemoteRails, NodeRailInfo), LaunchError> {
        let ip = tokio::time::timeout(ASK_DEADLINE, tokio::net::lookup_host(agent))
            .await
            .ok()
            .and_then(Result::ok)
            .and_then(|mut a| a.next())
            .map(|a| a.ip())
            .ok_or_else(|| LaunchError::new(format!("{agent}: not a reachable HOST:PORT")))?;
        let reply = ask(agent, Ask::Rails, ASK_DEADLINE)
            .await
            .map_err(|e| LaunchError::new(e.to_string()))?;
        let rails = reply
            .rails
            .ok_or_else(|| LaunchError::new(format!("the rails agent at {agent} sent no rails")))?;
        let ranks = rails
            .ranks
            .into_iter()
            .map(|mut r| {
                r.listening.address = reachable(&r.listening.address, ip);
                r
            })
            .collect();
        let pair = LocalPair::create(Isolation::None, icb_isolate::DEFAULT_PREFIX)
            .map_err(|e| LaunchError::new(e.to_string()))?;
        let seam = RemoteRails {
            agent: agent.to_string(),
            opts,
            pair: Arc::new(pair),
            ranks,
            locality,
            nodes: (prefill_node, rails.info.node.clone()),
            decode_health: None,
        };
        Ok((seam, rails.info))
    }

    /// This host's rails (the prefill node): `tree` is a recorded rail-map root, else `/sys`.
    pub fn prefill_info(&self, tree: Option<&Path>) -> NodeRailInfo {
        super::info::node_info(self.nodes.0.clone(), tree, Path::new("/sys"))
    }
}

/// A rank's address as the prefill host reaches it: an unspecified IP becomes the agent's.
fn reachable(address: &str, agent_ip: IpAddr) -> String {
    match address.parse::<SocketAddr>() {
        Ok(a) if a.ip().is_unspecified() => SocketAddr::new(agent_ip, a.port()).to_string(),
        _ => address.to_string(),
    }
}

impl RailSeam for RemoteRails {
    type L = RemoteRowLauncher;

    fn launcher(&mut self, row: &RailRow) -> Result<RemoteRowLauncher, LaunchError> {
        let rank = self
            .ranks
            .iter()
            .find(|r| r.rail == row.decode.rail && r.ucx_net_devices == row.decode.ucx_net_devices)
            .ok_or_else(|| {
                LaunchError::new(format!(
                    "{} has no serve rank for rail {} ({}): give serve and connect the same --rails and --rail-devices",
                    self.nodes.1, row.decode.rail, row.decode.ucx_net_devices
                ))
            })?;
        let pin = RankPinning {
            row: row.index,
            prefill: pinning(&row.prefill),
            decode: SidePinning::default(),
        };
        Ok(RemoteRowLauncher {
            local: LocalLauncher::for_rank(self.opts.clone(), Arc::clone(&self.pair), pin),
            decode: rank.listening.clone(),
            rail: row.decode.rail,
            locality: self.locality,
            agent: self.agent.clone(),
            nodes: self.nodes.clone(),
        })
    }

    async fn counters(&mut self, side: SideRole) -> CounterSnapshot {
        let unreadable = |why: String| CounterSnapshot {
            counters: Vec::new(),
            unreadable: vec![icb_core::rails::Unreadable::all(why)],
        };
        match side {
            SideRole::Prefill => {
                match tokio::task::spawn_blocking(|| icb_probe::counters::snapshot(Path::new("/sys"))).await {
                    Ok(s) => s,
                    Err(e) => unreadable(format!("reading the counters failed: {e}")),
                }
            }
            SideRole::Decode => match ask(&self.agent, Ask::Counters, ASK_DEADLINE).await {
                Ok(r) => {
                    self.decode_health = Some(r.health.unwrap_or_else(|| {
                        HealthSnapshot::unread(format!("the rails agent at {} sent no health counters", self.agent))
                    }));
                    r.counters
                        .unwrap_or_else(|| unreadable(format!("the rails agent at {} sent no counters", self.agent)))
                }
                Err(e) => {
                    self.decode_health = Some(HealthSnapshot::unread(e.to_string()));
                    unreadable(e.to_string())
                }
            },
        }
    }

    /// The prefill host's from its sysfs; the decode host's as its agent sent them with the
    /// byte counters just read (the pipeline reads health right after counters).
    async fn health(&mut self, side: SideRole) -> HealthSnapshot {
        match side {
            SideRole::Prefill => tokio::task::spawn_blocking(|| {
                icb_probe::counters::health_snapshot_with_pause(Path::new("/sys"), &icb_probe::counters::ethtool_stats)
            })
            .await
            .unwrap_or_else(|e| HealthSnapshot::unread(format!("reading the health counters failed: {e}"))),
            SideRole::Decode => self
                .decode_health
                .take()
                .unwrap_or_else(|| HealthSnapshot::unread("the decode host's counters were not read just before")),
        }
    }
}

/// One row: the local prefill rank against the decode host's rank for the row's rail.
pub struct RemoteRowLauncher {
    local: LocalLauncher,
    decode: Listening,
    rail: usize,
    locality: Locality,
    agent: String,
    nodes: (String, String),
}

impl Launcher for RemoteRowLauncher {
    type Side = RowSide;

    fn locality(&self) -> Locality {
        self.locality
    }

    fn mode(&self) -> String {
        format!("bare metal (serve --rails at {})", self.agent)
    }

    async fn start_decode(&mut self) -> Result<RowSide, LaunchError> {
        Ok(RowSide::Decode(ListeningSide {
            line: Some(side_line(&SideEvent::Listening(self.decode.clone()))),
            rail: self.rail,
            node: self.nodes.1.clone(),
        }))
    }

    async fn start_prefill(&mut self, server: &Listening, plan: &ChildPlan) -> Result<RowSide, LaunchError> {
        self.local
            .start_prefill(server, plan)
            .await
            .map(|s| RowSide::Prefill(Box::new(s)))
    }

    fn placement(&self, server: &Listening, _report: &PairReport) -> Placement {
        let endpoint = |host: &str, address: Option<String>| Endpoint {
            host: host.to_string(),
            address,
            ..Default::default()
        };
        Placement {
            locality: self.locality,
            mode: self.mode(),
            prefill: endpoint(&self.nodes.0, None),
            decode: endpoint(&self.nodes.1, Some(server.address.clone())),
        }
    }

    async fn cleanup(&mut self) -> Result<String, LaunchError> {
        self.local.cleanup().await
    }
}

/// A decode rank started by `serve --rails`: already listening, ends only with that serve.
pub struct ListeningSide {
    line: Option<String>,
    rail: usize,
    node: String,
}

/// A row's side: the remote decode rank or the local prefill rank.
pub enum RowSide {
    Decode(ListeningSide),
    Prefill(Box<LocalSide>),
}

impl Side for RowSide {
    fn name(&self) -> String {
        match self {
            RowSide::Decode(d) => format!("the decode side (rail {} of serve --rails on {})", d.rail, d.node),
            RowSide::Prefill(p) => p.name(),
        }
    }

    async fn next_line(&mut self) -> Option<String> {
        match self {
            RowSide::Decode(d) => match d.line.take() {
                Some(line) => Some(line),
                // The rank outlives the row; the pipeline's deadlines bound every wait on it.
                None => std::future::pending().await,
            },
            RowSide::Prefill(p) => p.next_line().await,
        }
    }

    async fn exit_note(&mut self) -> Option<String> {
        match self {
            RowSide::Decode(_) => None,
            RowSide::Prefill(p) => p.exit_note().await,
        }
    }

    fn last_words(&self) -> String {
        match self {
            RowSide::Decode(d) => format!("(its log is on {}: serve --rails's stderr)", d.node),
            RowSide::Prefill(p) => p.last_words(),
        }
    }

    fn failure(&self) -> Option<LaunchFailure> {
        match self {
            RowSide::Decode(_) => None,
            RowSide::Prefill(p) => p.failure(),
        }
    }

    async fn stop(&mut self, grace: Duration) {
        if let RowSide::Prefill(p) = self {
            p.stop(grace).await;
        }
    }

    async fn interrupt(&mut self) {
        if let RowSide::Prefill(p) = self {
            p.interrupt().await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unspecified_rank_addresses_become_the_agents() {
        let ip: IpAddr = "10.1.2.3".parse().unwrap();
        assert_eq!(reachable("0.0.0.0:4000", ip), "10.1.2.3:4000");
        assert_eq!(reachable("[::]:4000", ip), "10.1.2.3:4000");
        assert_eq!(reachable("10.9.9.9:4000", ip), "10.9.9.9:4000");
        assert_eq!(reachable("junk", ip), "junk");
    }
}
