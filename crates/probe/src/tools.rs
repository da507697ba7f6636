//! Running the node's diagnostic tools, each under a deadline, all at once: a node that has none
//! of them finishes at once, and a hung `nvidia-smi` costs at most the timeout.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// The tools a node probe may run. The file name is the one read from `--tool-outputs DIR`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Tool {
    Ibstat,
    IbvDevinfo,
    NvidiaSmiTopo,
    UcxInfo,
    Lsmod,
    /// `python3 -c …` printing `sys.path` (finds site-packages without importing anything heavy).
    PythonPath,
}

impl Tool {
    pub const ALL: [Tool; 6] = [
        Tool::Ibstat,
        Tool::IbvDevinfo,
        Tool::NvidiaSmiTopo,
        Tool::UcxInfo,
        Tool::Lsmod,
        Tool::PythonPath,
    ];

    pub fn program(self) -> &'static str {
        match self {
            Tool::Ibstat => "ibstat",
            Tool::IbvDevinfo => "ibv_devinfo",
            Tool::NvidiaSmiTopo => "nvidia-smi",
            Tool::UcxInfo => "ucx_info",
            Tool::Lsmod => "lsmod",
            Tool::PythonPath => "python3",
        }
    }

    pub fn args(self) -> &'static [&'static str] {
        match self {
            Tool::Ibstat | Tool::Lsmod => &[],
            Tool::IbvDevinfo => &["-v"],
            Tool::NvidiaSmiTopo => &["topo", "-m"],
            Tool::UcxInfo => &["-d"],
            Tool::PythonPath => &["-c", PYTHON_PATH_CODE],
        }
    }

    /// The command line as shown to users and run in pods (arguments single-quoted when needed).
    pub fn command_line(self) -> String {
        std::iter::once(self.program())
            .chain(self.args().iter().copied())
            .map(crate::shell::quote)
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Recorded output file name under `--tool-outputs DIR`.
    pub fn file_name(self) -> &'static str {
        match self {
            Tool::Ibstat => "ibstat.txt",
            Tool::IbvDevinfo => "ibv_devinfo.txt",
            Tool::NvidiaSmiTopo => "topo.txt",
            Tool::UcxInfo => "ucx_info.txt",
            Tool::Lsmod => "lsmod.txt",
            Tool::PythonPath => "python_path.txt",
        }
    }

    pub fn from_program(name: &str) -> Option<Tool> {
        Tool::ALL.into_iter().find(|t| t.program() == name)
    }
}

/// Prints the interpreter's module search path, one entry a line; imports nothing.
pub const PYTHON_PATH_CODE: &str = "import sys; print(chr(10).join(p for p in sys.path if p))";

/// What running (or replaying) a tool gave.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum ToolRun {
    Ran {
        stdout: String,
        stderr: String,
        code: Option<i32>,
    },
    NotFound,
    TimedOut {
        after_s: u64,
    },
    Failed {
        error: String,
    },
    /// Replay mode and no recorded file for it.
    NotRecorded,
}

impl ToolRun {
    /// stdout and stderr together (tools print "No IB devices found" on stderr).
    pub fn text(&self) -> Option<String> {
        match self {
            ToolRun::Ran { stdout, stderr, .. } => Some(format!("{stdout}{stderr}")),
            _ => None,
        }
    }

    /// Why a tool that ran could not do its job, when its output says so: a program that cannot
    /// load its libraries ("error while loading shared libraries: libucp.so.0 …", exit 127)
    /// is unusable, not a node without what it would have listed.
    pub fn unloadable(&self, tool: Tool) -> Option<String> {
        let ToolRun::Ran { stderr, stdout, code } = self else {
            return None;
        };
        let loader = stderr
            .lines()
            .chain(stdout.lines())
            .find(|l| l.contains("error while loading shared libraries") || l.contains("symbol lookup error"));
        match (loader, code) {
            (Some(line), _) => Some(format!("{} cannot load: {}", tool.program(), line.trim())),
            (None, Some(127)) => Some(format!("{} cannot start (exit 127)", tool.program())),
            _ => None,
        }
    }

    /// Why there is no usable output, for a `skipped` detail.
    pub fn why_not(&self, tool: Tool) -> String {
        let name = tool.program();
        match self {
            ToolRun::Ran { code, .. } => format!(
                "{name} exited with {}",
                code.map_or("a signal".into(), |c| c.to_string())
            ),
            ToolRun::NotFound => format!("{name} not installed"),
            ToolRun::TimedOut { after_s } => format!("{name} did not finish within {after_s} s"),
            ToolRun::Failed { error } => format!("{name} could not run: {error}"),
            ToolRun::NotRecorded => format!("no recorded {} given", tool.file_name()),
        }
    }
}

/// Largest output kept from one tool; `ucx_info -d` on a big node is a few hundred KiB.
const MAX_OUTPUT: usize = 8 << 20;

/// Finds `program` on `$PATH` without spawning anything.
pub fn find_on_path(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join(program))
        .find(|p| is_executable(p))
}

fn is_executable(p: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    p.metadata()
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

/// Runs one tool with a deadline; the child is killed and reaped when it overruns.
pub fn run_tool(tool: Tool, timeout: Duration) -> ToolRun {
    match find_on_path(tool.program()) {
        Some(exe) => run_command(&exe, tool.args(), timeout),
        None => ToolRun::NotFound,
    }
}

/// A specific program to run for a tool instead of the one on `PATH`: e.g. the `ucx_info`
/// beside the libucp that ic-bench itself loads, with that library directory searched first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolAt {
    pub exe: PathBuf,
    /// Prepended to `LD_LIBRARY_PATH`, so the program loads the same libraries ic-bench does.
    pub library_dir: Option<PathBuf>,
}

impl ToolAt {
    /// The `ucx_info` shipped beside the UCX library directory `lib` (`bin/` beside its `lib/`,
    /// or one level up as in a wheel), run with `lib` searched first: the transports and memory
    /// types it lists are then those a run loading that UCX gets. `None` when it ships none.
    pub fn ucx_info_beside(lib: &Path) -> Option<ToolAt> {
        let candidates = [lib.join("../bin/ucx_info"), lib.join("../../bin/ucx_info")];
        let exe = candidates.into_iter().find(|p| p.is_file())?;
        Some(ToolAt {
            exe,
            library_dir: Some(lib.to_path_buf()),
        })
    }

    fn run(&self, tool: Tool, timeout: Duration) -> ToolRun {
        let library_path = self.library_dir.as_ref().map(|dir| {
            let mut paths = vec![dir.clone()];
            if let Some(old) = std::env::var_os("LD_LIBRARY_PATH") {
                paths.extend(std::env::split_paths(&old));
            }
            std::env::join_paths(paths).unwrap_or_else(|_| dir.clone().into_os_string())
        });
        run_command_with(&self.exe, tool.args(), timeout, library_path.as_deref())
    }
}

/// Runs `exe args` with a deadline (stdin closed, output capped, read while it runs).
pub fn run_command(exe: &Path, args: &[&str], timeout: Duration) -> ToolRun {
    run_command_with(exe, args, timeout, None)
}

fn run_command_with(exe: &Path, args: &[&str], timeout: Duration, library_path: Option<&std::ffi::OsStr>) -> ToolRun {
    let mut cmd = Command::new(exe);
    cmd.args(args);
    if let Some(paths) = library_path {
        cmd.env("LD_LIBRARY_PATH", paths);
    }
    match icb_proc::run_capped(&mut cmd, timeout, MAX_OUTPUT) {
        Ok(out) => ToolRun::Ran {
            stdout: out.stdout_text(),
            stderr: out.stderr_text(),
            code: out.code(),
        },
        Err(e) if e.is_not_found() => ToolRun::NotFound,
        Err(icb_proc::RunError::TimedOut { .. }) => ToolRun::TimedOut {
            after_s: timeout.as_secs(),
        },
        Err(e) => ToolRun::Failed { error: e.to_string() },
    }
}

/// Runs the tools concurrently; total time is the slowest one (bounded by `timeout`).
pub fn run_tools(tools: &[Tool], timeout: Duration) -> Vec<(Tool, ToolRun)> {
    run_tools_at(tools, timeout, &BTreeMap::new())
}

/// Like [`run_tools`], running the program `at` names for a tool instead of the one on `PATH`.
pub fn run_tools_at(tools: &[Tool], timeout: Duration, at: &BTreeMap<Tool, ToolAt>) -> Vec<(Tool, ToolRun)> {
    std::thread::scope(|s| {
        let handles: Vec<_> = tools
            .iter()
            .map(|&t| {
                let at = at.get(&t);
                (
                    t,
                    s.spawn(move || match at {
                        Some(at) => at.run(t, timeout),
                        None => run_tool(t, timeout),
                    }),
                )
            })
            .collect();
        handles
            .into_iter()
            .map(|(t, h)| {
                (
                    t,
                    h.join().unwrap_or_else(|_| ToolRun::Failed {
                        error: "runner thread panicked".into(),
                    }),
                )
            })
            .collect()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[test]
    fn the_ucx_info_beside_a_library_is_found_with_that_library_first() {
        let root = tempfile::tempdir().unwrap();
        let lib = root.path().join("ucx/lib");
        std::fs::create_dir_all(&lib).unwrap();
        assert_eq!(ToolAt::ucx_info_beside(&lib), None);
        std::fs::create_dir_all(root.path().join("ucx/bin")).unwrap();
        std::fs::write(root.path().join("ucx/bin/ucx_info"), "").unwrap();
        let at = ToolAt::ucx_info_beside(&lib).unwrap();
        assert_eq!(at.exe, lib.join("../bin/ucx_info"));
        assert_eq!(at.library_dir.as_deref(), Some(lib.as_path()));
    }

    #[test]
    fn a_tool_that_cannot_load_its_libraries_is_unloadable() {
        let run = ToolRun::Ran {
            stdout: String::new(),
            stderr: "ucx_info: error while loading shared libraries: libucp.so.0: cannot open shared object file: No such file or directory\n".into(),
            code: Some(127),
        };
        let why = run.unloadable(Tool::UcxInfo).expect("unloadable");
        assert!(why.starts_with("ucx_info cannot load: "), "{why}");
        assert!(why.contains("libucp.so.0"), "{why}");
        let fine = ToolRun::Ran {
            stdout: "# Memory domain: self\n".into(),
            stderr: String::new(),
            code: Some(0),
        };
        assert_eq!(fine.unloadable(Tool::UcxInfo), None);
    }

    #[test]
    fn a_tool_at_a_path_runs_with_its_library_dir_first() {
        let dir = tempfile::tempdir().expect("temp dir");
        let exe = dir.path().join("fake_ucx_info");
        std::fs::write(&exe, "#!/bin/sh\necho \"LD=$LD_LIBRARY_PATH\"\n").expect("write");
        std::fs::set_permissions(&exe, std::os::unix::fs::PermissionsExt::from_mode(0o755)).expect("chmod");
        let at = BTreeMap::from([(
            Tool::UcxInfo,
            ToolAt {
                exe: exe.clone(),
                library_dir: Some("/opt/ucx/lib".into()),
            },
        )]);
        let runs = run_tools_at(&[Tool::UcxInfo], Duration::from_secs(5), &at);
        let text = runs[0].1.text().expect("ran");
        assert!(text.starts_with("LD=/opt/ucx/lib"), "{text}");
    }

    #[test]
    fn missing_tools_are_not_found_quickly() {
        let t0 = Instant::now();
        let runs = run_tools(&Tool::ALL, Duration::from_secs(5));
        assert_eq!(runs.len(), Tool::ALL.len());
        for (tool, run) in runs {
            if find_on_path(tool.program()).is_none() {
                assert_eq!(run, ToolRun::NotFound);
            }
        }
        assert!(t0.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn a_hung_tool_is_killed_at_the_deadline() {
        let t0 = Instant::now();
        let run = run_command(Path::new("/bin/sleep"), &["30"], Duration::from_millis(200));
        assert_eq!(run, ToolRun::TimedOut { after_s: 0 });
        assert!(t0.elapsed() < Duration::from_secs(5));
        let run = run_command(
            Path::new("/bin/sh"),
            &["-c", "echo out; echo err >&2; exit 3"],
            Duration::from_secs(5),
        );
        assert_eq!(
            run,
            ToolRun::Ran {
                stdout: "out\n".into(),
                stderr: "err\n".into(),
                code: Some(3)
            }
        );
    }

    #[test]
    fn names_and_reasons() {
        assert_eq!(Tool::NvidiaSmiTopo.command_line(), "nvidia-smi topo -m");
        assert_eq!(Tool::from_program("ucx_info"), Some(Tool::UcxInfo));
        assert_eq!(ToolRun::NotFound.why_not(Tool::Ibstat), "ibstat not installed");
        assert!(ToolRun::NotRecorded.why_not(Tool::NvidiaSmiTopo).contains("topo.txt"));
    }
}
