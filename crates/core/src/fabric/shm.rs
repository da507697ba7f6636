//! `/dev/shm` in a pod: UCX's shared-memory transports and NCCL need it large; Kubernetes gives
//! 64 MiB unless an emptyDir with `medium: Memory` is mounted there.

/// Where shared memory is mounted.
pub const DEV_SHM: &str = "/dev/shm";

/// The emptyDir medium that makes a RAM-backed (tmpfs) volume. The kubelet compares it
/// case-sensitively and refuses any other spelling (`unknown storage medium`), so `memory`
/// is not a memory medium.
pub const MEMORY_MEDIUM: &str = "Memory";

/// An emptyDir `medium` is the RAM-backed one.
pub fn is_memory_medium(medium: Option<&str>) -> bool {
    medium == Some(MEMORY_MEDIUM)
}

/// A volume mount path is `/dev/shm` (a trailing `/` is allowed).
pub fn is_dev_shm_mount(mount_path: &str) -> bool {
    mount_path.trim_end_matches('/') == DEV_SHM
}
