//! What kind of failure kept a pair's two sides from running, decided by the launcher on the
//! platform's own fields (a pod's status, an API error's type), never on a message. The pair
//! pipeline (`icb-pair`) carries it in its launch errors; the sweep and the gate decide on it.

/// What kind of launch failure, decided by the launcher on the platform's own fields (a pod's
/// status, an API error's type), never on the message.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum LaunchFailure {
    /// A side cannot be placed (its pod's `PodScheduled` is `False`, reason `Unschedulable`):
    /// no room on `node`, not a fabric failure.
    Unschedulable { pod: String, node: Option<String> },
    /// A side's image cannot be pulled.
    ImagePull,
    /// A side's process ended (exit code when known) before doing its part.
    SideExited { code: Option<i32> },
    /// A side's process was killed from outside (a signal's exit code 137/143, `OOMKilled`, an
    /// evicted pod): a kubelet, a person or a preemption ended it, neither the side itself nor
    /// the fabric, so the pair says nothing about either node.
    SideKilled,
    /// A wait reached the run's deadline.
    Deadline,
    /// The platform's API failed (unreachable, timing out, 429/5xx beyond its retries): no side's
    /// fault, and nothing more can run there.
    Cluster,
    /// Anything else (the message says what).
    #[default]
    Other,
}
