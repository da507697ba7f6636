//! Which worker container a side runs in, and whether this binary can run there (its
//! architecture; why a copied binary would not start).

use super::*;

/// One worker container.
#[derive(Debug, Clone)]
pub struct Worker {
    pub pod: String,
    pub node: String,
    pub ip: Option<String>,
    pub container: Option<String>,
    /// How the pod was picked among several, for the user.
    pub note: Option<String>,
}

impl Worker {
    pub(super) fn label(&self) -> String {
        match &self.container {
            Some(c) => format!("pod/{} (container {c})", self.pod),
            None => format!("pod/{}", self.pod),
        }
    }

    /// The pod IP, which a worker has once it runs.
    pub fn pod_ip(&self) -> Result<&str, LaunchError> {
        self.ip
            .as_deref()
            .ok_or_else(|| LaunchError::new(format!("{} has no pod IP yet: wait until it is Running", self.label())))
    }

    /// Where a `connect` in another pod reaches the server this worker listens with.
    pub fn server_address(&self, server: &Listening) -> Result<String, LaunchError> {
        let port = server
            .socket_addr()
            .map_err(|e| LaunchError::new(e.to_string()))?
            .port();
        Ok(join_host_port(self.pod_ip()?, port))
    }
}

/// Where a pair's two sides ran when each ran in a pod (in-place, and rails' and KV ranks' node
/// pods): the decode side at its server's address, the prefill side at its pod IP.
pub fn pods_placement(
    launcher: &impl crate::launcher::Launcher,
    namespace: &str,
    (prefill, decode): (&Worker, &Worker),
    server: &Listening,
) -> Placement {
    let endpoint = |w: &Worker, address: Option<String>| Endpoint {
        host: w.node.clone(),
        pod: Some(w.pod.clone()),
        namespace: Some(namespace.to_string()),
        address: address.or_else(|| w.ip.clone()),
        modelled_on: None,
    };
    // A report is written even when the server's address is gone: the pod IP is still known.
    let decode_address = decode.server_address(server).ok();
    Placement {
        locality: launcher.locality(),
        mode: launcher.mode(),
        prefill: endpoint(prefill, None),
        decode: endpoint(decode, decode_address),
    }
}

pub(super) async fn resolve_worker(
    cluster: &Cluster,
    target: &Target,
    container: &Option<String>,
    flag: &str,
) -> Result<Worker, LaunchError> {
    if let Target::Node(n) = target {
        return Err(LaunchError::new(format!(
            "{flag} node/{n}: --in-place runs inside an existing worker: give pod/NAME, deployment/NAME or a label selector"
        )));
    }
    let resolved = target::resolve(cluster, target)
        .await
        .map_err(|e| LaunchError::new(format!("{flag}: {e}")))?;
    let pod = resolved
        .reference
        .ok_or_else(|| LaunchError::new(format!("{flag} {target}: no pod to run in")))?;
    let name = pod.metadata.name.clone().unwrap_or_default();
    let status = pod.status.clone().unwrap_or_default();
    if status.phase.as_deref() != Some("Running") {
        return Err(LaunchError::new(format!(
            "{flag} pod/{name} is not Running (phase {}): in-place mode runs inside a running worker",
            status.phase.as_deref().unwrap_or("unknown")
        )));
    }
    if let Some(c) = container {
        let names: Vec<String> = pod
            .spec
            .as_ref()
            .map(|s| s.containers.iter().map(|c| c.name.clone()).collect())
            .unwrap_or_default();
        if !names.contains(c) {
            return Err(LaunchError::new(format!(
                "pod/{name} has no container {c} (it has: {}): fix -c",
                names.join(", ")
            )));
        }
    }
    Ok(Worker {
        pod: name,
        node: resolved.node,
        ip: status.pod_ip.filter(|ip| !ip.is_empty()),
        container: container.clone(),
        note: resolved.note,
    })
}

/// The ELF machine of `path`: `x86_64`, `aarch64`, or `None` when unknown.
pub(super) fn elf_arch(path: &std::path::Path) -> Option<&'static str> {
    use std::io::Read as _;
    let mut head = [0u8; 20];
    std::fs::File::open(path).ok()?.read_exact(&mut head).ok()?;
    if &head[..4] != b"\x7fELF" || head[5] != 1 {
        return None;
    }
    match u16::from_le_bytes([head[18], head[19]]) {
        62 => Some("x86_64"),
        183 => Some("aarch64"),
        _ => None,
    }
}

/// `uname -m` spellings of one architecture.
pub(super) fn same_arch(elf: &str, uname: &str) -> bool {
    match elf {
        "x86_64" => matches!(uname, "x86_64" | "amd64"),
        "aarch64" => matches!(uname, "aarch64" | "arm64" | "armv8l"),
        _ => true,
    }
}

/// The reason a copied binary did not start, with the fix.
pub(super) fn cannot_start_hint(output: &str) -> String {
    if output.contains("GLIBC_") || output.contains("GLIBCXX_") {
        format!(
            "{output} — the image's glibc is older than this build needs: copy the portable build (scripts/release, glibc ≥ 2.28) with --in-place-binary"
        )
    } else if output.contains("Exec format error") || output.contains("cannot execute binary file") {
        format!("{output} — wrong architecture: pass --in-place-binary with a build for this container")
    } else {
        output.to_string()
    }
}
