//! Where NIXL's UCX writes its log, and with it the protocol tables the engine attributes each
//! case from. ic-bench points `UCX_LOG_FILE` at a private directory; where the user set it
//! themselves (common in worker pods and with `--in-place`), the engine reads the user's file
//! instead, expanding UCX's own filename template (`ucs_fill_filename_template`: `%p` pid, `%h`
//! host, `%u` user, `%e` executable, `%c` first CPU, `%t` the time the file was opened), so a
//! user's setting no longer blinds the attribution. Only a log UCX sends to stdout or stderr
//! stays unreadable, and the warning says so.

use icb_engine::EngineError;
use std::path::{Path, PathBuf};

/// Where UCX writes its log (and with it the protocol tables) for this process.
pub struct UcxLog {
    target: Target,
}

enum Target {
    /// ic-bench's own directory (`ucx.%p.log` inside it).
    Private(tempfile::TempDir),
    /// The user's `UCX_LOG_FILE`, as they wrote it.
    User(String),
}

/// Why the UCX log could not be read: the attribution then leaves the data paths unknown and
/// says why in a warning.
#[derive(Debug, thiserror::Error)]
pub enum LogUnreadable {
    #[error("cannot read {}: {source}", .path.display())]
    Read { path: PathBuf, source: std::io::Error },
    #[error("cannot list {}: {source}", .dir.display())]
    List { dir: PathBuf, source: std::io::Error },
    #[error("no file matches {}", .pattern.display())]
    NoMatch { pattern: PathBuf },
    #[error("UCX writes its log to {0}, which ic-bench cannot read back: point UCX_LOG_FILE at a file or unset it")]
    Stream(&'static str),
}

fn read_file(path: &Path) -> Result<String, LogUnreadable> {
    std::fs::read_to_string(path).map_err(|source| LogUnreadable::Read {
        path: path.to_path_buf(),
        source,
    })
}

/// The user's `UCX_LOG_FILE` resolved for this process: the file, a pattern for what only UCX
/// knew when it opened the file (`%t`, `%c`), or a stream ic-bench cannot read back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LogFile {
    Path(PathBuf),
    /// A directory and a file-name pattern whose `*` stand for `%t` / `%c`.
    Pattern {
        dir: PathBuf,
        name: String,
    },
    Stream(&'static str),
}

/// What UCX's template expansion needs from this process.
#[derive(Debug, Clone)]
pub struct ProcessNames {
    pub pid: u32,
    pub host: String,
    pub user: String,
    pub exe: String,
}

impl ProcessNames {
    pub fn of_this_process() -> ProcessNames {
        let host = nix::unistd::gethostname()
            .ok()
            .and_then(|h| h.into_string().ok())
            .unwrap_or_default();
        let user = nix::unistd::User::from_uid(nix::unistd::geteuid())
            .ok()
            .flatten()
            .map(|u| basename(&u.name))
            .unwrap_or_default();
        let exe = std::env::current_exe()
            .ok()
            .map(|p| basename(&p.to_string_lossy()))
            .unwrap_or_default();
        ProcessNames {
            pid: std::process::id(),
            host,
            user,
            exe,
        }
    }
}

fn basename(s: &str) -> String {
    s.rsplit('/').next().unwrap_or(s).to_string()
}

/// `UCX_LOG_FILE` as UCX reads it: `stdout`, `stderr`, or `[file:]TEMPLATE[:options]`.
pub fn resolve(value: &str, names: &ProcessNames) -> LogFile {
    let head = value.split(':').next().unwrap_or_default();
    match head {
        "stdout" => return LogFile::Stream("stdout"),
        "stderr" => return LogFile::Stream("stderr"),
        _ => {}
    }
    let template = value.strip_prefix("file:").unwrap_or(value);
    let template = template.split(':').next().unwrap_or_default();
    let mut out = String::new();
    let mut wild = false;
    let mut rest = template;
    while let Some(at) = rest.find('%') {
        out.push_str(&rest[..at]);
        let code = rest[at + 1..].chars().next();
        let expansion = match code {
            Some('p') => Some(names.pid.to_string()),
            Some('h') => Some(names.host.clone()),
            Some('u') => Some(names.user.clone()),
            Some('e') => Some(names.exe.clone()),
            Some('c') | Some('t') => {
                wild = true;
                Some("*".to_string())
            }
            _ => None,
        };
        match expansion {
            Some(e) => {
                out.push_str(&e);
                rest = &rest[at + 2..];
            }
            // UCX keeps an unknown `%x` as written.
            None => {
                out.push('%');
                rest = &rest[at + 1..];
            }
        }
    }
    out.push_str(rest);
    let path = PathBuf::from(out);
    if !wild {
        return LogFile::Path(path);
    }
    let dir = path.parent().map(Path::to_path_buf).unwrap_or_default();
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    LogFile::Pattern { dir, name }
}

/// Whether `name` matches `pattern`, whose `*` match any run of characters.
fn matches(pattern: &str, name: &str) -> bool {
    let parts: Vec<&str> = pattern.split('*').collect();
    let (first, last) = (parts[0], parts[parts.len() - 1]);
    if parts.len() == 1 {
        return name == pattern;
    }
    if !name.starts_with(first) || name.len() < first.len() + last.len() || !name.ends_with(last) {
        return false;
    }
    let mut middle = &name[first.len()..name.len() - last.len()];
    for part in &parts[1..parts.len() - 1] {
        match middle.find(part) {
            Some(i) => middle = &middle[i + part.len()..],
            None => return false,
        }
    }
    true
}

impl LogFile {
    /// The file's text: for a pattern, the newest matching file (UCX opened it when this
    /// process's UCX started); `Err` says why nothing could be read.
    pub fn read(&self) -> Result<String, LogUnreadable> {
        match self {
            LogFile::Path(p) => read_file(p),
            LogFile::Pattern { dir, name } => {
                let dir_shown = if dir.as_os_str().is_empty() {
                    Path::new(".")
                } else {
                    dir.as_path()
                };
                let entries = std::fs::read_dir(dir_shown).map_err(|source| LogUnreadable::List {
                    dir: dir_shown.to_path_buf(),
                    source,
                })?;
                let newest = entries
                    .filter_map(Result::ok)
                    .filter(|e| matches(name, &e.file_name().to_string_lossy()))
                    .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
                    .max_by_key(|(modified, _)| *modified);
                match newest {
                    Some((_, p)) => read_file(&p),
                    None => Err(LogUnreadable::NoMatch {
                        pattern: dir.join(name),
                    }),
                }
            }
            LogFile::Stream(s) => Err(LogUnreadable::Stream(s)),
        }
    }
}

/// UCX's log of a NIXL side lives in `$TMPDIR/icb-nixl-ucx-<pid>-XXXXXX/` unless the user set
/// `UCX_LOG_FILE`.
const LOG_DIR_PREFIX: &str = "icb-nixl-ucx-";

impl UcxLog {
    /// Points `UCX_LOG_FILE` at a private directory unless the user set it, and turns on
    /// `UCX_PROTO_INFO=y` and turns off `UCX_MEMTYPE_CACHE` unless set. Must run before NIXL
    /// (and its UCX) starts.
    pub fn prepare() -> Result<UcxLog, EngineError> {
        let mut vars: Vec<(String, String)> = Vec::new();
        let target = match std::env::var("UCX_LOG_FILE") {
            Ok(user) => Target::User(user),
            Err(_) => {
                // Directories of runs killed with SIGKILL (no guard survives it) go first.
                let tmp = std::env::temp_dir();
                icb_proc::stale::remove_dead_pid_dirs(&tmp, LOG_DIR_PREFIX);
                let d = tempfile::Builder::new()
                    .prefix(&icb_proc::stale::pid_prefix(LOG_DIR_PREFIX))
                    .tempdir_in(&tmp)
                    .map_err(|e| EngineError::UcxSetup(format!("cannot create a directory for UCX's log: {e}")))?;
                vars.push(("UCX_LOG_FILE".into(), format!("{}/ucx.%p.log", d.path().display())));
                Target::Private(d)
            }
        };
        // `y`: each table is printed when UCX first selects the protocol, so the tables a case
        // caused land in that case's window of the log (`crate::per_case`); `used` would print
        // them all at the end, attributable only to the run as a whole.
        if std::env::var_os("UCX_PROTO_INFO").is_none() {
            vars.push(("UCX_PROTO_INFO".into(), "y".into()));
        }
        // NIXL's UCX backend lets UCX detect the memory type of what it registers. With UCX's
        // memory-type cache on (its default), an address the cache never saw allocated counts as
        // host memory, and ic-bench's GPU buffers come from cuMemAlloc through a dlopen'ed driver
        // that UCX's allocation hooks do not see: on an H200 NIXL refused every VRAM
        // registration ("VRAM memory is detected as host by UCX", backend error). Without the
        // cache UCX asks the driver for each registration, once per buffer.
        if std::env::var_os("UCX_MEMTYPE_CACHE").is_none() {
            vars.push(("UCX_MEMTYPE_CACHE".into(), "n".into()));
        }
        nixl::set_env_before_start(&vars);
        Ok(UcxLog { target })
    }

    /// This process's UCX log text; `Err` says why it could not be read (a user's log sent to
    /// stdout, a file that is not there).
    pub fn read(&self) -> Result<String, LogUnreadable> {
        nixl::flush_c_stdio();
        match &self.target {
            Target::Private(dir) => {
                let name = format!("ucx.{}.log", std::process::id());
                Ok(std::fs::read_to_string(dir.path().join(name)).unwrap_or_default())
            }
            Target::User(value) => resolve(value, &ProcessNames::of_this_process()).read(),
        }
    }

    /// How long the log is now (bytes): the client marks it after every case, so that each
    /// case's protocol tables are the ones printed while it ran. 0 where it cannot be read.
    pub fn mark(&self) -> usize {
        self.read().map(|t| t.len()).unwrap_or(0)
    }

    /// The user's `UCX_LOG_FILE`, where they set one.
    pub fn user_setting(&self) -> Option<&str> {
        match &self.target {
            Target::Private(_) => None,
            Target::User(v) => Some(v),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names() -> ProcessNames {
        ProcessNames {
            pid: 4242,
            host: "gpu-7".into(),
            user: "svc".into(),
            exe: "ic-bench".into(),
        }
    }

    #[test]
    fn the_users_template_is_expanded_as_ucx_expands_it() {
        let n = names();
        assert_eq!(
            resolve("/var/log/ucx.%h.%p.log", &n),
            LogFile::Path("/var/log/ucx.gpu-7.4242.log".into())
        );
        assert_eq!(
            resolve("file:/tmp/%u-%e.log:append", &n),
            LogFile::Path("/tmp/svc-ic-bench.log".into())
        );
        // An unknown code stays as written; a trailing % too.
        assert_eq!(resolve("/tmp/a%zb%", &n), LogFile::Path("/tmp/a%zb%".into()));
        assert_eq!(
            resolve("/tmp/ucx.%t.%p.log", &n),
            LogFile::Pattern {
                dir: "/tmp".into(),
                name: "ucx.*.4242.log".into()
            }
        );
        assert_eq!(resolve("stdout", &n), LogFile::Stream("stdout"));
        assert_eq!(resolve("stderr:", &n), LogFile::Stream("stderr"));
    }

    #[test]
    fn a_pattern_reads_the_newest_matching_file_and_a_stream_says_why_not() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("ucx.2026-01-01-00-00-00.4242.log"), "old").unwrap();
        std::thread::sleep(std::time::Duration::from_millis(20));
        std::fs::write(dir.path().join("ucx.2026-01-01-00-00-09.4242.log"), "new").unwrap();
        std::fs::write(dir.path().join("ucx.2026-01-01-00-00-09.9999.log"), "other").unwrap();
        let template = format!("{}/ucx.%t.%p.log", dir.path().display());
        assert_eq!(resolve(&template, &names()).read().unwrap(), "new");
        let missing = format!("{}/none.%t.log", dir.path().display());
        let no_match = resolve(&missing, &names()).read().unwrap_err();
        assert!(matches!(no_match, LogUnreadable::NoMatch { .. }), "{no_match}");
        assert!(no_match.to_string().contains("no file matches"), "{no_match}");
        let stream = LogFile::Stream("stdout").read().unwrap_err();
        assert!(matches!(stream, LogUnreadable::Stream("stdout")), "{stream}");
        assert!(stream.to_string().contains("cannot read back"), "{stream}");
        assert!(matches("a*b*c", "a-x-b-y-c") && !matches("a*b*c", "a-x-c") && !matches("ab", "abc"));
    }
}
