//! Finding processes through `/proc`: by network namespace (to empty a namespace before deleting
//! it) and by the run tag every pod carries in its environment (to find a crashed run's pods).

use crate::error::{IsolateError, Result};
use crate::names::RUN_TAG_ENV;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::time::{Duration, Instant};

/// Where `ip netns add` pins named network namespaces.
pub(crate) const NETNS_DIR: &str = "/var/run/netns";

fn all_pids() -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok()).collect()
}

/// Alive and not a zombie (a zombie holds no namespaces and waits only for its parent to reap it).
pub fn pid_alive(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        // The state letter follows the parenthesised command name, which may itself contain ')'.
        Ok(stat) => stat
            .rsplit_once(')')
            .is_some_and(|(_, rest)| !rest.trim_start().starts_with(['Z', 'X'])),
        Err(_) => false,
    }
}

/// Process group of a live process.
pub(crate) fn pgrp_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // After "pid (comm)": state, ppid, pgrp.
    let (_, rest) = stat.rsplit_once(')')?;
    rest.split_whitespace().nth(2)?.parse().ok()
}

/// Inode of a named network namespace, `None` when it does not exist.
pub(crate) fn netns_inode(name: &str) -> Option<u64> {
    std::fs::metadata(Path::new(NETNS_DIR).join(name)).ok().map(|m| m.ino())
}

/// True when `ip netns list` would show `name`.
pub fn netns_exists(name: &str) -> bool {
    Path::new(NETNS_DIR).join(name).exists()
}

/// Names of all named network namespaces.
pub(crate) fn netns_names() -> Vec<String> {
    let Ok(dir) = std::fs::read_dir(NETNS_DIR) else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().into_string().ok()).collect()
}

/// Live processes whose network namespace is one of `inodes`.
pub(crate) fn pids_in_netns(inodes: &[u64]) -> Vec<u32> {
    if inodes.is_empty() {
        return Vec::new();
    }
    all_pids()
        .into_iter()
        .filter(|pid| {
            std::fs::metadata(format!("/proc/{pid}/ns/net")).is_ok_and(|m| inodes.contains(&m.ino())) && pid_alive(*pid)
        })
        .collect()
}

/// The run tag in a process's environment, if it carries one.
fn run_tag_of(pid: u32) -> Option<String> {
    let environ = std::fs::read(format!("/proc/{pid}/environ")).ok()?;
    let key = format!("{RUN_TAG_ENV}=");
    environ
        .split(|b| *b == 0)
        .find_map(|var| var.strip_prefix(key.as_bytes()))
        .map(|v| String::from_utf8_lossy(v).into_owned())
}

/// Live processes started by this crate (and their descendants, which inherit the environment)
/// whose run tag satisfies `matches`.
pub(crate) fn tagged_pids(matches: impl Fn(&str) -> bool) -> Vec<(u32, String)> {
    let me = std::process::id();
    all_pids()
        .into_iter()
        .filter(|pid| *pid != me)
        .filter_map(|pid| run_tag_of(pid).filter(|t| matches(t)).map(|t| (pid, t)))
        .filter(|(pid, _)| pid_alive(*pid))
        .collect()
}

/// Live processes of one run (`tag` as printed by [`crate::RunTag`]), pods and their descendants.
pub fn live_processes(tag: &str) -> Vec<u32> {
    tagged_pids(|t| t == tag).into_iter().map(|(pid, _)| pid).collect()
}

/// SIGKILLs `pids` (never ourselves or init) and waits until `still_there` finds none alive.
pub(crate) fn kill_until_gone(what: &str, mut still_there: impl FnMut() -> Vec<u32>) -> Result<()> {
    const DEADLINE: Duration = Duration::from_secs(5);
    let me = std::process::id();
    let started = Instant::now();
    // A process in the middle of exec can be missing from one scan (its /proc entries read
    // empty for a moment), so "gone" takes two empty scans in a row.
    let mut empty_scans = 0;
    loop {
        let pids: Vec<u32> = still_there().into_iter().filter(|p| *p != me && *p > 1).collect();
        if pids.is_empty() {
            empty_scans += 1;
            if empty_scans == 2 {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(5));
            continue;
        }
        empty_scans = 0;
        if started.elapsed() > DEADLINE {
            return Err(IsolateError::Survivors {
                what: what.to_string(),
                pids,
                waited_ms: DEADLINE.as_millis() as u64,
            });
        }
        for pid in &pids {
            // ESRCH just means it exited between the scan and the signal.
            let _ = kill(Pid::from_raw(*pid as i32), Signal::SIGKILL);
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn liveness_of_self_and_of_a_reaped_child() {
        assert!(pid_alive(std::process::id()));
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        assert!(!pid_alive(pid));
    }

    #[test]
    fn tags_are_read_from_the_environment() {
        let tag = "icbtest-1-deadbeef";
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .env(RUN_TAG_ENV, tag)
            .spawn()
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        // exec replaces /proc/PID/environ only once the child has exec'd; poll briefly.
        while live_processes(tag).is_empty() && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(live_processes(tag), vec![child.id()]);
        child.kill().unwrap();
        child.wait().unwrap();
        assert!(live_processes(tag).is_empty());
    }
}
