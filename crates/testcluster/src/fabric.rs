//! The emulated nodes' network: each node is a network namespace with `eth0` (10.99.0.N/24)
//! cabled by a veth to one bridge that lives in a separate "fabric" namespace, so nothing touches
//! the host's own network and parallel clusters (each with a random id in every name) never meet.
//!
//! Each node also gets an init process (`sleep infinity` as PID 1 of the node's own PID, IPC and
//! mount namespaces) whose namespaces hostIPC/hostPID pods join.

use std::net::Ipv4Addr;
use std::process::Stdio;
use std::time::Duration;

use tokio::process::{Child, Command};

use crate::error::Error;
use crate::process::{self, signal_group};

/// Every name this crate gives a namespace starts with this, then the owning process id.
pub const NETNS_PREFIX: &str = "icbtc-";

pub struct NodeNet {
    pub name: String,
    pub netns: String,
    pub ip: Ipv4Addr,
    /// The veth end on the bridge (cut it to cut the node off).
    pub port: String,
    pub init_pid: u32,
    init: Child,
}

pub struct Fabric {
    pub fabric_ns: String,
    pub nodes: Vec<NodeNet>,
}

async fn ip(args: &[&str]) -> Result<(), Error> {
    let out = Command::new("ip")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .await
        .map_err(|e| {
            Error::Namespace(format!(
                "cannot run `ip {}`: {e} (is iproute2 installed?)",
                args.join(" ")
            ))
        })?;
    if !out.status.success() {
        return Err(Error::Namespace(format!(
            "`ip {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&out.stderr).trim()
        )));
    }
    Ok(())
}

/// Deletes namespaces left by test processes that died without cleaning up (their pid is gone).
pub fn collect_stale() {
    let Ok(out) = std::process::Command::new("ip").args(["netns", "list"]).output() else {
        return;
    };
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let name = line.split_whitespace().next().unwrap_or_default();
        let Some(rest) = name.strip_prefix(NETNS_PREFIX) else {
            continue;
        };
        let Some(pid) = rest.split('-').next().and_then(|p| p.parse::<u32>().ok()) else {
            continue;
        };
        if !std::path::Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::process::Command::new("ip").args(["netns", "del", name]).output();
        }
    }
}

impl Fabric {
    /// Builds the namespaces; on any failure removes what it made.
    pub async fn create(id: &str, node_names: &[String]) -> Result<Fabric, Error> {
        collect_stale();
        let fabric_ns = format!("{NETNS_PREFIX}{id}-fab");
        let mut fabric = Fabric {
            fabric_ns: fabric_ns.clone(),
            nodes: Vec::new(),
        };
        match fabric.build(id, node_names).await {
            Ok(()) => Ok(fabric),
            Err(e) => {
                fabric.destroy();
                Err(e)
            }
        }
    }

    async fn build(&mut self, id: &str, node_names: &[String]) -> Result<(), Error> {
        if node_names.len() > 250 {
            return Err(Error::Config("at most 250 nodes fit the emulated fabric's /24".into()));
        }
        let fab = self.fabric_ns.clone();
        ip(&["netns", "add", &fab]).await?;
        ip(&["-n", &fab, "link", "set", "lo", "up"]).await?;
        ip(&["-n", &fab, "link", "add", "br0", "type", "bridge"]).await?;
        ip(&["-n", &fab, "link", "set", "br0", "up"]).await?;
        for (i, name) in node_names.iter().enumerate() {
            let netns = format!("{NETNS_PREFIX}{id}-n{i}");
            let port = format!("p{i}");
            let ip_addr = Ipv4Addr::new(10, 99, 0, (i + 1) as u8);
            ip(&["netns", "add", &netns]).await?;
            ip(&[
                "-n", &fab, "link", "add", &port, "type", "veth", "peer", "name", "eth0", "netns", &netns,
            ])
            .await?;
            ip(&["-n", &fab, "link", "set", &port, "master", "br0", "up"]).await?;
            ip(&["-n", &netns, "link", "set", "lo", "up"]).await?;
            ip(&["-n", &netns, "addr", "add", &format!("{ip_addr}/24"), "dev", "eth0"]).await?;
            ip(&["-n", &netns, "link", "set", "eth0", "up"]).await?;
            let mut init = Command::new("setpriv");
            init.args(["--pdeathsig", "KILL", "--", "nsenter"])
                .arg(format!("--net=/run/netns/{netns}"))
                .args([
                    "--",
                    "unshare",
                    "--ipc",
                    "--pid",
                    "--fork",
                    "--kill-child",
                    "--mount-proc",
                    "--",
                ])
                .args(["sleep", "infinity"])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .process_group(0)
                .kill_on_drop(true);
            let init = init.spawn().map_err(|e| {
                Error::Namespace(format!(
                    "cannot start node {name}'s init (setpriv/nsenter/unshare): {e}"
                ))
            })?;
            let launcher = init.id().unwrap_or(0);
            let init_pid = process::wait_for_child(launcher, Duration::from_secs(5)).await;
            let mut node = NodeNet {
                name: name.clone(),
                netns,
                ip: ip_addr,
                port,
                init_pid: 0,
                init,
            };
            match init_pid {
                Some(pid) if process::wait_for_comm(pid, "sleep", Duration::from_secs(5)).await => node.init_pid = pid,
                _ => {
                    self.nodes.push(node);
                    return Err(Error::Namespace(format!(
                        "node {name}'s init did not start (unshare failed?)"
                    )));
                }
            }
            self.nodes.push(node);
        }
        for node in &self.nodes {
            wait_until_running(&node.netns, "eth0")?;
            wait_until_running(&self.fabric_ns, &node.port)?;
        }
        Ok(())
    }

    pub fn node(&self, name: &str) -> Option<&NodeNet> {
        self.nodes.iter().find(|n| n.name == name)
    }

    /// Takes the node's bridge port down (`up = false`) or back up.
    pub fn set_link(&self, node: &str, up: bool) -> Result<(), Error> {
        let n = self
            .node(node)
            .ok_or_else(|| Error::Config(format!("no node named {node:?}")))?;
        let args = [
            "-n",
            &self.fabric_ns,
            "link",
            "set",
            &n.port,
            if up { "up" } else { "down" },
        ];
        let out = std::process::Command::new("ip").args(args).output()?;
        if !out.status.success() {
            return Err(Error::Namespace(format!(
                "`ip {}` failed: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        if up {
            wait_until_running(&n.netns, "eth0")?;
            wait_until_running(&self.fabric_ns, &n.port)?;
        }
        Ok(())
    }

    /// Kills the node inits and deletes every namespace (synchronous: also runs from Drop).
    pub fn destroy(&mut self) {
        for node in &mut self.nodes {
            if let Some(pid) = node.init.id() {
                signal_group(pid as i32, nix::sys::signal::Signal::SIGKILL);
            }
            let _ = node.init.start_kill();
            let _ = std::process::Command::new("ip")
                .args(["netns", "del", &node.netns])
                .output();
        }
        self.nodes.clear();
        let _ = std::process::Command::new("ip")
            .args(["netns", "del", &self.fabric_ns])
            .output();
    }
}

impl Drop for Fabric {
    fn drop(&mut self) {
        self.destroy();
    }
}

/// Waits until one end of a node's veth (`eth0` in the node, its port on the bridge) is operationally up. The kernel reports a veth's carrier with up
/// to a second's delay; UCX started before that skips the device and finds no route to the peer,
/// so nodes are handed out (and restored after a cut) only once their link runs.
fn wait_until_running(netns: &str, dev: &str) -> Result<(), Error> {
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let out = std::process::Command::new("ip")
            .args(["-n", netns, "-o", "link", "show", "dev", dev])
            .output()?;
        let state = String::from_utf8_lossy(&out.stdout);
        if state.contains("state UP") {
            return Ok(());
        }
        if std::time::Instant::now() > deadline {
            return Err(Error::Namespace(format!(
                "{dev} in {netns} not operationally up after 5 s: {}",
                state.trim()
            )));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}
