//! Where a node probe reads from: the live machine, a replayed root (fixtures, `--sysfs-root`),
//! or a snapshot printed by the read-only script run in a pod ([`crate::remote`]).
//!
//! Every path is the node's own absolute path (`/sys/class/infiniband/…`); a source maps it.

use crate::tools::{Tool, ToolAt, ToolRun, run_tools_at};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

pub trait NodeSource: Sync {
    /// A file's text, or `None` when it is absent or unreadable (unpopulated GID slots read EINVAL).
    fn read(&self, path: &str) -> Option<String>;
    /// The names in a directory, sorted; `None` when it does not exist.
    fn list(&self, dir: &str) -> Option<Vec<String>>;
    fn exists(&self, path: &str) -> bool;
    /// Runs (or replays) the tools.
    fn tools(&self, tools: &[Tool], timeout: Duration) -> Vec<(Tool, ToolRun)>;
    /// A second reading of `paths` after `interval`, when the source is live; `None` for
    /// replays, whose counters cannot rise.
    fn resample(&self, paths: &[String], interval: Duration) -> Option<Vec<Option<String>>>;
    /// What is being probed (`local`, `pod/NAME`, a root directory).
    fn target(&self) -> String;
    /// Where `program` is on the node's `$PATH`.
    fn which(&self, program: &str) -> Option<String>;
    /// Where a node path is really read from, for messages: a replay must name its own root,
    /// not the `/sys` it stands in for.
    fn display_path(&self, path: &str) -> String {
        path.to_string()
    }
    /// `path` with every symlink in it resolved, as the node's own absolute path
    /// (`/sys/bus/pci/devices/0000:19:00.0` → `/sys/devices/pci0000:16/…/0000:19:00.0`); `None`
    /// when it does not exist, a link points nowhere, or the source cannot resolve links.
    fn resolve(&self, _path: &str) -> Option<String> {
        None
    }
    /// A binary file's bytes (PCI config space); `None` where absent, unreadable, or the source
    /// carries text only (the pod script's snapshot).
    fn read_bytes(&self, _path: &str) -> Option<Vec<u8>> {
        None
    }
}

/// Most links followed in one [`NodeSource::resolve`] (a loop of links ends there).
const MAX_LINK_HOPS: usize = 40;

/// Where a replayed root is searched for programs.
const REPLAY_PATH: [&str; 5] = [
    "/usr/local/bin",
    "/usr/bin",
    "/bin",
    "/opt/nvidia/nvda_nixl/bin",
    "/usr/local/nixl/bin",
];

/// The local machine, or a replay of one under other roots.
#[derive(Debug, Clone)]
pub struct LocalSource {
    pub sysfs_root: PathBuf,
    pub devfs_root: PathBuf,
    pub procfs_root: PathBuf,
    /// Every other absolute path (NIXL install dirs, `site-packages`) is read under this root.
    pub root: PathBuf,
    /// Recorded tool outputs; when set, no tool is run.
    pub tool_outputs: Option<PathBuf>,
    /// Programs to run instead of those on `PATH` (the `ucx_info` of the UCX ic-bench loads).
    pub tool_at: BTreeMap<Tool, ToolAt>,
}

impl Default for LocalSource {
    fn default() -> Self {
        LocalSource {
            sysfs_root: "/sys".into(),
            devfs_root: "/dev".into(),
            procfs_root: "/proc".into(),
            root: "/".into(),
            tool_outputs: None,
            tool_at: BTreeMap::new(),
        }
    }
}

impl LocalSource {
    /// A fixture directory holding `sys/`, `dev/`, `proc/` and optionally `tools/`.
    pub fn replay(root: &Path) -> Self {
        let tools = root.join("tools");
        LocalSource {
            sysfs_root: root.join("sys"),
            devfs_root: root.join("dev"),
            procfs_root: root.join("proc"),
            root: root.to_path_buf(),
            tool_outputs: Some(tools),
            tool_at: BTreeMap::new(),
        }
    }

    /// A partial replay (some of sysfs, devfs, procfs and the tool outputs replayed, others not)
    /// mixes two machines: what is still read from this one, for the report to say. `None` when
    /// nothing or everything is replayed.
    pub fn replay_note(&self) -> Option<String> {
        let parts = [
            ("/sys", "--sysfs-root", self.sysfs_root != Path::new("/sys")),
            ("/dev", "--devfs-root", self.devfs_root != Path::new("/dev")),
            ("/proc", "--procfs-root", self.procfs_root != Path::new("/proc")),
            ("diagnostic tools", "--tool-outputs", self.tool_outputs.is_some()),
        ];
        let live: Vec<&(&str, &str, bool)> = parts.iter().filter(|p| !p.2).collect();
        if live.is_empty() || live.len() == parts.len() {
            return None;
        }
        let what: Vec<&str> = live.iter().map(|p| p.0).collect();
        let flags: Vec<&str> = live.iter().map(|p| p.1).collect();
        Some(format!(
            "partial replay: {} read live from this machine, not the replayed node; pass {} to replay them too",
            what.join(", "),
            flags.join(" ")
        ))
    }

    fn is_live(&self) -> bool {
        self.sysfs_root == Path::new("/sys") && self.root == Path::new("/") && self.tool_outputs.is_none()
    }

    fn map(&self, path: &str) -> Option<PathBuf> {
        for (prefix, root) in [
            ("/sys", &self.sysfs_root),
            ("/dev", &self.devfs_root),
            ("/proc", &self.procfs_root),
        ] {
            if let Some(rest) = path.strip_prefix(prefix)
                && (rest.is_empty() || rest.starts_with('/'))
            {
                return Some(root.join(rest.trim_start_matches('/')));
            }
        }
        path.strip_prefix('/').map(|rest| self.root.join(rest))
    }
}

impl NodeSource for LocalSource {
    fn read(&self, path: &str) -> Option<String> {
        let bytes = std::fs::read(self.map(path)?).ok()?;
        Some(String::from_utf8_lossy(&bytes).into_owned())
    }

    fn read_bytes(&self, path: &str) -> Option<Vec<u8>> {
        std::fs::read(self.map(path)?).ok()
    }

    fn list(&self, dir: &str) -> Option<Vec<String>> {
        let mut names: Vec<String> = std::fs::read_dir(self.map(dir)?)
            .ok()?
            .filter_map(|e| e.ok().map(|e| e.file_name().to_string_lossy().into_owned()))
            .collect();
        names.sort_by(|a, b| natural_cmp(a, b));
        Some(names)
    }

    fn exists(&self, path: &str) -> bool {
        self.map(path).is_some_and(|p| p.symlink_metadata().is_ok())
    }

    fn tools(&self, tools: &[Tool], timeout: Duration) -> Vec<(Tool, ToolRun)> {
        match &self.tool_outputs {
            Some(dir) => tools
                .iter()
                .map(|&t| {
                    let run = match std::fs::read(dir.join(t.file_name())) {
                        Ok(b) => ToolRun::Ran {
                            stdout: String::from_utf8_lossy(&b).into_owned(),
                            stderr: String::new(),
                            code: Some(0),
                        },
                        Err(_) => ToolRun::NotRecorded,
                    };
                    (t, run)
                })
                .collect(),
            // lsmod only restates /proc/modules, which is read directly.
            None => run_tools_at(
                &tools.iter().copied().filter(|t| *t != Tool::Lsmod).collect::<Vec<_>>(),
                timeout,
                &self.tool_at,
            ),
        }
    }

    fn resample(&self, paths: &[String], interval: Duration) -> Option<Vec<Option<String>>> {
        if !self.is_live() {
            return None;
        }
        std::thread::sleep(interval);
        Some(paths.iter().map(|p| self.read(p)).collect())
    }

    fn target(&self) -> String {
        if self.is_live() {
            "local".into()
        } else {
            format!("replay:{}", self.sysfs_root.display())
        }
    }

    fn which(&self, program: &str) -> Option<String> {
        if self.is_live() {
            return crate::tools::find_on_path(program).map(|p| p.display().to_string());
        }
        REPLAY_PATH
            .iter()
            .map(|d| format!("{d}/{program}"))
            .find(|p| self.exists(p))
    }

    fn display_path(&self, path: &str) -> String {
        self.map(path)
            .map_or_else(|| path.to_string(), |p| p.display().to_string())
    }

    /// Walks the node path one name at a time, reading each link under the mapped roots, so a
    /// replayed tree resolves to node paths (an absolute link target is the node's, never this
    /// machine's) and a link out of the tree reads as missing.
    fn resolve(&self, path: &str) -> Option<String> {
        let mut todo: std::collections::VecDeque<String> = path.split('/').map(str::to_string).collect();
        let mut done: Vec<String> = Vec::new();
        let mut hops = 0;
        while let Some(name) = todo.pop_front() {
            match name.as_str() {
                "" | "." => continue,
                ".." => {
                    done.pop();
                    continue;
                }
                _ => done.push(name),
            }
            let real = self.map(&format!("/{}", done.join("/")))?;
            let meta = real.symlink_metadata().ok()?;
            // The top-level names are the mapped roots themselves, never links of the node.
            if done.len() < 2 || !meta.file_type().is_symlink() {
                continue;
            }
            hops += 1;
            if hops > MAX_LINK_HOPS {
                return None;
            }
            let target = std::fs::read_link(&real).ok()?;
            let target = target.to_str()?;
            done.pop();
            if target.starts_with('/') {
                done.clear();
            }
            for t in target.split('/').rev() {
                todo.push_front(t.to_string());
            }
        }
        Some(format!("/{}", done.join("/")))
    }
}

/// A node seen through the text the remote script printed ([`crate::remote::parse_snapshot`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Snapshot {
    pub target: String,
    pub files: BTreeMap<String, String>,
    pub dirs: BTreeMap<String, Vec<String>>,
    pub present: BTreeSet<String>,
    pub tools: BTreeMap<Tool, ToolRun>,
    /// Counter files read a second time after the script's pause.
    pub second_sample: BTreeMap<String, String>,
    /// Environment variables of the pod (transport prefixes only).
    pub env: BTreeMap<String, String>,
    /// `command -v` results.
    pub which: BTreeMap<String, String>,
    /// Node paths the script resolved (`cd -P`), to their real node paths.
    pub links: BTreeMap<String, String>,
}

impl NodeSource for Snapshot {
    fn read(&self, path: &str) -> Option<String> {
        self.files.get(path).cloned()
    }

    fn list(&self, dir: &str) -> Option<Vec<String>> {
        self.dirs.get(dir.trim_end_matches('/')).cloned()
    }

    fn exists(&self, path: &str) -> bool {
        if self.files.contains_key(path) || self.dirs.contains_key(path) || self.present.contains(path) {
            return true;
        }
        match path.rsplit_once('/') {
            Some((parent, name)) => self.dirs.get(parent).is_some_and(|d| d.iter().any(|n| n == name)),
            None => false,
        }
    }

    fn tools(&self, tools: &[Tool], _timeout: Duration) -> Vec<(Tool, ToolRun)> {
        tools
            .iter()
            .map(|&t| (t, self.tools.get(&t).cloned().unwrap_or(ToolRun::NotRecorded)))
            .collect()
    }

    fn resample(&self, paths: &[String], _interval: Duration) -> Option<Vec<Option<String>>> {
        if self.second_sample.is_empty() {
            return None;
        }
        Some(paths.iter().map(|p| self.second_sample.get(p).cloned()).collect())
    }

    fn target(&self) -> String {
        self.target.clone()
    }

    fn which(&self, program: &str) -> Option<String> {
        self.which.get(program).cloned()
    }

    fn resolve(&self, path: &str) -> Option<String> {
        self.links.get(path.trim_end_matches('/')).cloned()
    }
}

/// `mlx5_2` before `mlx5_10`; GID index `3` before `10`.
pub fn natural_cmp(a: &str, b: &str) -> std::cmp::Ordering {
    // Borrowed keys: a sort calls this O(n log n) times. Sorting a snapshot's paths was a third
    // of what the `snapshot` fuzz target spent per input, half of it allocating these keys.
    fn key(s: &str) -> (&str, u64) {
        let digits_at = s
            .char_indices()
            .rev()
            .find(|(_, c)| !c.is_ascii_digit())
            .map_or(0, |(i, c)| i + c.len_utf8());
        let (head, tail) = s.split_at(digits_at);
        match tail.parse::<u64>() {
            Ok(n) => (head, n),
            Err(_) => (s, 0),
        }
    }
    key(a).cmp(&key(b)).then_with(|| a.cmp(b))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn natural_order() {
        assert_eq!(natural_cmp("é1", "é"), std::cmp::Ordering::Greater);
        let mut v = vec!["mlx5_10", "mlx5_2", "mlx5_1", "mlx5_bond_0", "3", "10", "1"];
        v.sort_by(|a, b| natural_cmp(a, b));
        assert_eq!(v, vec!["1", "3", "10", "mlx5_1", "mlx5_2", "mlx5_10", "mlx5_bond_0"]);
    }

    #[test]
    fn roots_map_node_paths() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("sys/class/infiniband/mlx5_0")).unwrap();
        std::fs::create_dir_all(dir.path().join("proc")).unwrap();
        std::fs::write(dir.path().join("proc/modules"), "x 1 0 - Live 0x0\n").unwrap();
        let s = LocalSource::replay(dir.path());
        assert_eq!(s.list("/sys/class/infiniband"), Some(vec!["mlx5_0".to_string()]));
        assert_eq!(
            s.display_path("/sys/class/infiniband"),
            dir.path().join("sys/class/infiniband").display().to_string()
        );
        assert_eq!(
            LocalSource::default().display_path("/sys/class/infiniband"),
            "/sys/class/infiniband"
        );
        assert!(s.read("/proc/modules").is_some());
        assert!(!s.exists("/dev/gdrdrv"));
        assert_eq!(s.read("/etc/passwd"), None);
        assert_eq!(s.resample(&["/proc/modules".into()], Duration::from_secs(5)), None);
        let runs = s.tools(&[Tool::Ibstat], Duration::from_secs(1));
        assert_eq!(runs[0].1, ToolRun::NotRecorded);
    }

    #[test]
    fn links_resolve_to_node_paths_inside_the_replay() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("sys/devices/pci0000:16/0000:16:02.0/0000:17:00.0");
        std::fs::create_dir_all(&real).unwrap();
        let bus = dir.path().join("sys/bus/pci/devices");
        std::fs::create_dir_all(&bus).unwrap();
        let link = |target: &str, name: &str| std::os::unix::fs::symlink(target, bus.join(name)).unwrap();
        link("../../../devices/pci0000:16/0000:16:02.0/0000:17:00.0", "0000:17:00.0");
        // An absolute target is the node's /sys, not this machine's.
        link("/sys/devices/pci0000:16/0000:16:02.0", "0000:16:02.0");
        link("../../../devices/pci0000:99/0000:99:00.0", "0000:99:00.0");
        link("0000:aa:00.0", "0000:aa:00.0");
        let s = LocalSource::replay(dir.path());
        assert_eq!(
            s.resolve("/sys/bus/pci/devices/0000:17:00.0").as_deref(),
            Some("/sys/devices/pci0000:16/0000:16:02.0/0000:17:00.0")
        );
        assert_eq!(
            s.resolve("/sys/bus/pci/devices/0000:16:02.0/0000:17:00.0").as_deref(),
            Some("/sys/devices/pci0000:16/0000:16:02.0/0000:17:00.0")
        );
        assert_eq!(s.resolve("/sys/bus/pci/devices/0000:99:00.0"), None, "points nowhere");
        assert_eq!(s.resolve("/sys/bus/pci/devices/0000:aa:00.0"), None, "a loop");
        assert_eq!(s.resolve("/sys/bus/pci/devices/missing"), None);
        assert_eq!(Snapshot::default().resolve("/sys/bus/pci/devices/0000:17:00.0"), None);
    }
}

#[cfg(test)]
mod replay_note_tests {
    use super::*;

    #[test]
    fn a_partial_replay_says_which_roots_are_live() {
        assert_eq!(LocalSource::default().replay_note(), None);
        assert_eq!(LocalSource::replay(Path::new("/fx")).replay_note(), None);
        let s = LocalSource {
            sysfs_root: "/fx/sys".into(),
            ..LocalSource::default()
        };
        let note = s.replay_note().unwrap();
        assert!(note.contains("/dev, /proc, diagnostic tools read live"), "{note}");
        assert!(note.contains("--devfs-root --procfs-root --tool-outputs"), "{note}");
        assert!(!note.contains("/sys,"), "{note}");
    }
}
