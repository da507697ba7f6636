//! Temporary directories named after the process that made them (`<prefix><pid>-XXXXXX`). A
//! process killed with SIGKILL never runs the guard that would remove its own directory, so the
//! next run of the same kind removes those whose process is gone, and they do not pile up in the
//! temporary directory.

use std::path::Path;

/// The name prefix for a directory of this process: `prefix` followed by its pid and a dash.
pub fn pid_prefix(prefix: &str) -> String {
    format!("{prefix}{}-", std::process::id())
}

/// Removes the directories under `tmp` named `<prefix><pid>-…` whose process is gone. A name
/// that does not carry a pid is left alone, and so is one whose pid is alive (even if the pid was
/// reused: keeping a stale directory is harmless, removing a live one is not). Best effort: a
/// directory that cannot be read or removed is left as it is.
pub fn remove_dead_pid_dirs(tmp: &Path, prefix: &str) {
    let Ok(entries) = std::fs::read_dir(tmp) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(prefix))
            .and_then(|rest| rest.split_once('-'))
            .and_then(|(pid, _)| pid.parse::<u32>().ok())
        else {
            continue;
        };
        if !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn directories_of_dead_processes_are_removed_and_the_rest_kept() {
        let tmp = std::env::temp_dir().join(format!("icb-proc-stale-test-{}", std::process::id()));
        std::fs::create_dir_all(&tmp).unwrap();
        let dead = tmp.join("icb-x-4000000000-abc");
        let live = tmp.join(format!("{}def", pid_prefix("icb-x-")));
        let no_pid = tmp.join("icb-x-abc");
        let no_dash = tmp.join("icb-x-4000000001");
        let other = tmp.join("icb-y-4000000000-abc");
        for d in [&dead, &live, &no_pid, &no_dash, &other] {
            std::fs::create_dir(d).unwrap();
            std::fs::write(d.join("f"), b"x").unwrap();
        }
        remove_dead_pid_dirs(&tmp, "icb-x-");
        let kept = [&live, &no_pid, &no_dash, &other].map(|d| d.exists());
        let dead_gone = !dead.exists();
        std::fs::remove_dir_all(&tmp).unwrap();
        assert!(dead_gone);
        assert_eq!(kept, [true; 4]);
    }
}
