//! A rank's CPUs: it pins itself (`sched_setaffinity`, through nix) to the set its plan names
//! before it allocates anything, so its threads (UCX's, NIXL's, the coordinator's reader) start
//! there and its buffer's pages are first touched on that NUMA node; then it reports the set it
//! really runs on.

use super::RankError;
use icb_core::protocol::kv_rank::RankPlan;
use nix::sched::{CpuSet, sched_setaffinity};
use nix::unistd::Pid;

/// Pins this process's calling thread (and every thread it starts later) to the plan's CPUs, if
/// it names any. Call it first thing, before any thread is spawned.
pub fn place(plan: &RankPlan) -> Result<(), RankError> {
    let Some(cpus) = plan.cpus.as_ref().map(|c| &c.cpus).filter(|c| !c.is_empty()) else {
        return Ok(());
    };
    let refused = |reason: String| RankError::Placement { rank: plan.id, reason };
    let mut set = CpuSet::new();
    for &c in cpus {
        set.set(c as usize)
            .map_err(|e| refused(format!("CPU {c} is beyond what this kernel interface takes: {e}")))?;
    }
    sched_setaffinity(Pid::from_raw(0), &set).map_err(|e| {
        refused(format!(
            "cannot run on CPUs {}: {e} (not allowed here? check the cpuset of the container)",
            icb_probe::numa::format_cpulist(cpus)
        ))
    })
}

/// The CPUs this thread may run on, ascending (empty if the kernel does not say).
pub use icb_probe::numa::allowed_cpus as current;

#[cfg(test)]
mod tests {
    use super::*;
    use icb_core::protocol::kv_rank::{CpuPlacement, RankId, RankSide};

    /// What the kernel lists for this thread is what `sched_getaffinity` gives it.
    #[test]
    fn the_current_cpus_are_the_threads_affinity() {
        let set = nix::sched::sched_getaffinity(Pid::from_raw(0)).expect("this thread's affinity");
        let cpus: Vec<u32> = (0..CpuSet::count())
            .filter(|&i| set.is_set(i).unwrap_or(false))
            .filter_map(|i| u32::try_from(i).ok())
            .collect();
        assert_eq!(current(), cpus);
    }

    fn plan(cpus: Vec<u32>) -> RankPlan {
        RankPlan {
            id: RankId {
                side: RankSide::Decode,
                rank: 0,
            },
            engine: icb_core::EngineKind::Ucx,
            read: true,
            initiator: true,
            memory: icb_core::MemoryType::Host,
            peer_memory: icb_core::MemoryType::Host,
            buffer_bytes: 0,
            seed: 0,
            peers: Vec::new(),
            coordinator: String::new(),
            message_timeout_s: 1.0,
            authenticate: false,
            cpus: Some(CpuPlacement {
                cpus,
                numa_node: None,
                reason: String::new(),
            }),
            ucx_config: Vec::new(),
            cuda_alloc: Default::default(),
        }
    }

    /// On a thread of its own (pinning is per thread): pinned to one allowed CPU, the thread
    /// runs there and says so; a CPU it may not use is one line naming it.
    #[test]
    fn a_rank_pins_itself_to_its_cpus_and_reports_them() {
        std::thread::spawn(|| {
            let allowed = current();
            assert!(!allowed.is_empty());
            let last = *allowed.last().unwrap();
            place(&plan(vec![last])).unwrap();
            assert_eq!(current(), [last]);
            place(&plan(Vec::new())).unwrap();
            assert_eq!(current(), [last], "an empty set leaves the affinity alone");
            let e = place(&plan(vec![CpuSet::count() as u32 + 1])).unwrap_err();
            assert!(matches!(e, RankError::Placement { .. }), "{e}");
            let line = e.to_string();
            assert!(line.contains("decode rank 0") && line.contains("CPU"), "{line}");
        })
        .join()
        .unwrap();
    }
}
