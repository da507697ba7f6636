//! Linux capabilities as a pod spec writes them (`IPC_LOCK`, `CAP_IPC_LOCK`, `ipc_lock`, `ALL`).

/// Pinning memory for an RDMA NIC needs it (or `privileged`).
pub const IPC_LOCK: &str = "IPC_LOCK";

/// `capabilities.add` grants `cap` (given without `CAP_`, upper case): container runtimes accept
/// either spelling in any case, and `ALL` grants every capability.
pub fn grants_capability<S: AsRef<str>>(added: &[S], cap: &str) -> bool {
    added.iter().any(|c| {
        let c = c.as_ref().trim().to_ascii_uppercase();
        c == "ALL" || c.strip_prefix("CAP_").unwrap_or(&c) == cap
    })
}
