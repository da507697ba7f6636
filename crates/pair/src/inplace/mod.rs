//! The in-place launcher: both sides run inside the workers' own containers. This ic-bench binary
//! is streamed into a fresh temporary directory of each container through the exec API (what
//! `kubectl cp` does, with `cat` instead of tar), then `serve` runs in the decode container and
//! `connect --plan` in the prefill one, each with the container's own environment and UCX (the
//! runtime loader's search; the report's `server`/`client` say which library each side loaded).
//!
//! Safety inside a serving worker: nothing runs before [`InPlaceLauncher::describe`] was shown;
//! each side is bounded (`serve --once --idle-timeout`, the pipeline's deadline); the only
//! process ever signalled is the one the wrapper started, by the pid it recorded, and only while
//! `/proc/PID/exe` is still the copied binary; each side's whole life (copy, check, run) is one exec
//! whose wrapper treats the end of its stdin (the client stopped, was interrupted or died, at any
//! point) as "stop and remove the copy". [`Launcher::cleanup`] removes
//! the run's directories again in every container it touched, whatever happened.

use crate::launcher::{LaunchError, Launcher, Side, summarize};
use icb_core::model::{Endpoint, Locality, PairReport, Placement};
use icb_core::protocol::{ChildPlan, Listening, SideErrorKind, SideEvent, parse_side_line};
use icb_kube::exec::ExecSession;
use icb_kube::pair::join_host_port;
use icb_kube::target::{self, Target};
use icb_kube::{Cluster, KubeError};
use std::collections::VecDeque;
use std::path::PathBuf;
use std::time::Duration;

pub mod fit;
mod side;
pub mod strip;
mod worker;

pub use side::InPlaceSide;
pub use worker::Worker;
pub use worker::pods_placement;
use worker::*;

/// Exit codes of [`SIDE_SCRIPT`] before the side started, each with its own message.
const EXIT_NO_TEMP_DIR: i32 = 97;
const EXIT_COPY_INCOMPLETE: i32 = 98;
const EXIT_CANNOT_START: i32 = 99;

/// One side's whole life in one exec, so that a client that vanishes at any point (its stdin
/// ends) leaves nothing: `$1` the binary's size, `$2` the directory prefix (unique per run), then
/// the arguments. Reads exactly the binary from stdin into a fresh directory, checks it starts
/// (`--version`, which also says which UCX it finds), starts it and records its pid; a watcher
/// holds stdin: when it ends (the client stopped or died) it stops that pid — only while it still
/// runs the copied binary — and removes the copy. Every exit path removes the directory.
/// The run's token follows the binary on stdin as one line; it goes into a file only the
/// container's user can read (never on a command line) and both sides get `--token-file`.
const SIDE_SCRIPT: &str = r#"size=$1; prefix=$2; shift 2
d=$(mktemp -d "${TMPDIR:-/tmp}/$prefix.XXXXXX") || { echo "cannot create a temporary directory in ${TMPDIR:-/tmp}" >&2; exit 97; }
trap 'rm -rf "$d"' EXIT
echo "icb-inplace-dir $d"
head -c "$size" > "$d/ic-bench"
n=$(wc -c < "$d/ic-bench" | tr -d ' ')
if [ "$n" != "$size" ]; then echo "only $n of $size bytes arrived" >&2; exit 98; fi
IFS= read -r t || { echo "the run's token did not arrive" >&2; exit 98; }
( umask 077 && printf '%s\n' "$t" > "$d/token" ) || exit 97
unset t
chmod 700 "$d/ic-bench"
if ! v=$("$d/ic-bench" --version 2>&1); then printf '%s\n' "$v" >&2; exit 99; fi
printf '%s\n' "$v" | sed 's/^/icb-inplace-version /'
exec 3<&0
"$d/ic-bench" "$@" --token-file "$d/token" </dev/null &
p=$!
echo "icb-inplace-started $p"
( cat <&3 >/dev/null 2>&1
  case "$(readlink "/proc/$p/exe" 2>/dev/null)" in "$d/ic-bench"*) kill "$p" 2>/dev/null;; esac
  rm -rf "$d" ) >/dev/null 2>&1 &
exec 3<&-
wait "$p"
"#;

/// The per-run directory prefix: `ic-bench-inplace-<run id>`.
fn dir_prefix(run_id: &str) -> String {
    format!("ic-bench-inplace-{run_id}")
}

/// What an in-place run is asked to do (decided by the CLI).
#[derive(Debug, Clone)]
pub struct InPlacePlan {
    pub prefill: Target,
    pub decode: Target,
    /// The container to run in (`-c`); `None`: the pod's only or default container.
    pub container: Option<String>,
    /// The file copied in: this binary, or a portable build for the workers' images.
    pub binary: PathBuf,
    /// Ports the decode side may listen on (inclusive); tried in a random order.
    pub ports: (u16, u16),
    /// How long each side may run: `serve --idle-timeout`, and the prefill side's budget.
    pub side_timeout: Duration,
    /// Copying and checking the binary, per container.
    pub copy_timeout: Duration,
    /// Removing the copies at the end.
    pub cleanup_timeout: Duration,
    /// Names this run's directories (`ic-bench-inplace-<run id>.XXXXXX`).
    pub run_id: String,
    /// The engine selection both sides get (`--engine nixl`, `--nixl-lib`, `--ucx-profile`).
    pub side_args: Vec<String>,
}

pub struct InPlaceLauncher {
    cluster: Cluster,
    plan: InPlacePlan,
    binary_size: u64,
    prefill: Worker,
    decode: Worker,
    /// Workers where an exec may have created something: cleaned up at the end.
    touched: Vec<Worker>,
    /// What each side's `--version` said (which UCX it would load), for the user.
    versions: Vec<(String, String)>,
    /// This run's token, handed to both sides on stdin (`SIDE_SCRIPT`); never printed.
    token: String,
}

impl InPlaceLauncher {
    /// Resolves both targets to one running pod each (reads the cluster; changes nothing).
    pub async fn prepare(cluster: Cluster, plan: InPlacePlan) -> Result<InPlaceLauncher, LaunchError> {
        let binary_size = std::fs::metadata(&plan.binary)
            .map_err(|e| {
                LaunchError::new(format!(
                    "cannot read the binary to copy, {}: {e}",
                    plan.binary.display()
                ))
            })?
            .len();
        let prefill = resolve_worker(&cluster, &plan.prefill, &plan.container, "--prefill").await?;
        let decode = resolve_worker(&cluster, &plan.decode, &plan.container, "--decode").await?;
        Ok(InPlaceLauncher {
            cluster,
            plan,
            binary_size,
            prefill,
            decode,
            touched: Vec::new(),
            versions: Vec::new(),
            token: icb_kube::secret::new_token(),
        })
    }

    pub fn workers(&self) -> (&Worker, &Worker) {
        (&self.prefill, &self.decode)
    }

    /// What the run will do where, said before anything starts.
    pub fn describe(&self) -> Vec<String> {
        let mib = self.binary_size as f64 / (1024.0 * 1024.0);
        let secs = self.plan.side_timeout.as_secs();
        let (lo, hi) = self.plan.ports;
        let mut lines: Vec<String> = [&self.prefill, &self.decode]
            .iter()
            .filter_map(|w| w.note.clone())
            .collect();
        lines.extend([
            format!(
                "in-place: copying {} ({mib:.1} MiB) into a new ${{TMPDIR:-/tmp}}/{}.* directory of {} on node {} and of {} on node {}",
                self.plan.binary.display(),
                dir_prefix(&self.plan.run_id),
                self.decode.label(),
                self.decode.node,
                self.prefill.label(),
                self.prefill.node
            ),
            format!(
                "in-place: decode side in {}: ic-bench serve --once --idle-timeout {}s on a port in {lo}-{hi}",
                self.decode.label(),
                self.idle_timeout().as_secs()
            ),
            format!(
                "in-place: prefill side in {}: ic-bench connect --plan … (at most {secs}s of transfers)",
                self.prefill.label()
            ),
            "in-place: only the processes started here are ever stopped; the copies are removed at the end".into(),
        ]);
        lines
    }

    /// How long the decode side waits for its one client: the prefill copy, then its run.
    fn idle_timeout(&self) -> Duration {
        self.plan.copy_timeout + self.plan.side_timeout
    }

    /// What each container's copy said about itself (`ic-bench --version`: build and UCX).
    pub fn versions(&self) -> &[(String, String)] {
        &self.versions
    }

    fn what_failed(&self, worker: &Worker, e: &KubeError) -> String {
        let ns = self.cluster.namespace();
        if e.status_code() == Some(403) {
            return format!(
                "exec into {} is forbidden (HTTP 403): in-place mode needs RBAC verb create on pods/exec in namespace {ns} (see manifests/inplace-exec-role.yaml)",
                worker.label()
            );
        }
        let text = e.to_string();
        if text.contains("executable file not found") || text.contains("no such file or directory") {
            return format!(
                "{} has no shell (sh): in-place mode needs sh, cat and mktemp in the image; test with bench pods modelled on it instead (pair without --in-place)",
                worker.label()
            );
        }
        format!("{}: {text}", worker.label())
    }

    fn touch(&mut self, worker: &Worker) {
        if !self
            .touched
            .iter()
            .any(|w| w.pod == worker.pod && w.container == worker.container)
        {
            self.touched.push(worker.clone());
        }
    }

    /// Copies the binary into `worker`, checks it starts there and starts it with `args`.
    async fn launch(
        &mut self,
        worker: &Worker,
        args: Vec<String>,
        role: &'static str,
    ) -> Result<InPlaceSide, LaunchError> {
        // A cheap first look: a shell, exec permission, and the architecture, before 100+ MiB move.
        let probe = vec!["sh".into(), "-c".into(), "uname -m".into()];
        let out = self
            .cluster
            .exec(&worker.pod, worker.container.as_deref(), &probe, self.plan.copy_timeout)
            .await
            .map_err(|e| LaunchError::new(self.what_failed(worker, &e)))?;
        let arch = out.stdout_lossy().trim().to_string();
        if let Some(built) = elf_arch(&self.plan.binary)
            && !arch.is_empty()
            && !same_arch(built, &arch)
        {
            return Err(LaunchError::new(format!(
                "{} is {arch} but {} is built for {built}: pass --in-place-binary with a {arch} build (scripts/release)",
                worker.label(),
                self.plan.binary.display()
            )));
        }
        self.touch(worker);
        let file = tokio::fs::File::open(&self.plan.binary)
            .await
            .map_err(|e| LaunchError::new(format!("cannot read {}: {e}", self.plan.binary.display())))?;
        let mut command = vec![
            "sh".into(),
            "-c".into(),
            SIDE_SCRIPT.into(),
            "sh".into(),
            self.binary_size.to_string(),
            dir_prefix(&self.plan.run_id),
        ];
        command.extend(args);
        let session = self
            .cluster
            .exec_session(
                &worker.pod,
                worker.container.as_deref(),
                &command,
                self.plan.copy_timeout,
            )
            .await
            .map_err(|e| LaunchError::new(self.what_failed(worker, &e)))?;
        let mut side = InPlaceSide {
            role,
            label: worker.label(),
            session,
            replay: VecDeque::new(),
        };
        let copy_timeout = self.plan.copy_timeout;
        let halfway = |why: &str| {
            LaunchError::new(format!(
                "copying ic-bench into {} failed halfway ({why}); the partial copy is removed",
                worker.label()
            ))
        };
        // The binary, then the run's token as one line (`SIDE_SCRIPT`).
        let token = std::io::Cursor::new(format!("{}\n", self.token).into_bytes());
        let input = tokio::io::AsyncReadExt::chain(file, token);
        match tokio::time::timeout(copy_timeout, side.session.send(input)).await {
            Ok(Ok(_)) => {}
            Ok(Err(why)) => {
                // The script's own word, when it got to say one, is the better reason.
                let words = if side.said_nothing() {
                    why.to_string()
                } else {
                    side.last_words()
                };
                side.stop(Duration::ZERO).await;
                return Err(halfway(&words));
            }
            Err(_) => {
                side.stop(Duration::ZERO).await;
                return Err(halfway(&format!("not done within {}s", copy_timeout.as_secs())));
            }
        }
        // Up to the start line: the version lines (which UCX it finds), or why it did not start.
        let mut version = Vec::new();
        let started = tokio::time::timeout(copy_timeout, async {
            while let Some(line) = side.session.next_line().await {
                if let Some(v) = line.strip_prefix("icb-inplace-version ") {
                    version.push(v.to_string());
                } else if line.starts_with("icb-inplace-started ") {
                    return true;
                }
            }
            false
        })
        .await;
        match started {
            Ok(true) => {
                self.versions.push((worker.label(), version.join("; ")));
                Ok(side)
            }
            Ok(false) => {
                let code = side.session.exit_code(Duration::from_secs(5)).await;
                let why = side.last_words();
                side.stop(Duration::ZERO).await;
                Err(LaunchError::new(match code {
                    Ok(EXIT_NO_TEMP_DIR) => format!("{}: {why}", worker.label()),
                    Ok(EXIT_COPY_INCOMPLETE) => return Err(halfway(&why)),
                    Ok(EXIT_CANNOT_START) => format!(
                        "the copied ic-bench cannot start in {} ({arch}): {}",
                        worker.label(),
                        cannot_start_hint(&why)
                    ),
                    Ok(code) => format!(
                        "the {role} side in {} failed to start (exit {code}): {why}",
                        worker.label()
                    ),
                    Err(e) => return Err(halfway(&e.to_string())),
                }))
            }
            Err(_) => {
                side.stop(Duration::ZERO).await;
                Err(LaunchError::new(format!(
                    "the copy in {} did not start within {}s",
                    worker.label(),
                    copy_timeout.as_secs()
                )))
            }
        }
    }

    /// Ports of the range in a random order (at most a few: a busy range is said, not searched).
    fn port_order(&self) -> Vec<u16> {
        let (lo, hi) = self.plan.ports;
        let span = u32::from(hi - lo) + 1;
        let start = (uuid_seed() % span) as u16;
        (0..span.min(4))
            .map(|i| lo + ((start as u32 + i) % span) as u16)
            .collect()
    }
}

fn uuid_seed() -> u32 {
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    nanos ^ std::process::id()
}

impl Launcher for InPlaceLauncher {
    type Side = InPlaceSide;

    fn locality(&self) -> Locality {
        Locality::of_same_host(self.prefill.node == self.decode.node)
    }

    fn mode(&self) -> String {
        "kubernetes (in-place)".into()
    }

    async fn start_decode(&mut self) -> Result<InPlaceSide, LaunchError> {
        let worker = self.decode.clone();
        // It waits while the prefill side's copy travels, then serves one client.
        let secs = format!("{}s", self.idle_timeout().as_secs().max(1));
        let mut busy = Vec::new();
        for port in self.port_order() {
            // Stopping a side removes its copy, so every attempt copies afresh.
            let mut args = vec![
                "serve".into(),
                "--listen".into(),
                format!("0.0.0.0:{port}"),
                "--once".into(),
                "--idle-timeout".into(),
                secs.clone(),
                "--side-events".into(),
            ];
            args.extend(self.plan.side_args.iter().cloned());
            let mut side = self.launch(&worker, args, "decode").await?;
            // Read up to the listening line here: a port the worker already uses is retried.
            let first = tokio::time::timeout(self.plan.side_timeout, side.first_event()).await;
            match first {
                Ok(Ok(())) => return Ok(side),
                Ok(Err((_, Some(SideErrorKind::AddressInUse)))) => {
                    busy.push(port.to_string());
                    side.stop(Duration::ZERO).await;
                }
                // Any other typed failure: the pipeline reads it from the lines kept for it
                // (the side has ended) and reports it by type.
                Ok(Err((_, Some(_)))) => return Ok(side),
                // A copy that predates typed failures (--in-place-binary) only says it in words.
                Ok(Err((why, None))) if why.contains("in use") => {
                    busy.push(port.to_string());
                    side.stop(Duration::ZERO).await;
                }
                Ok(Err((why, None))) => {
                    side.stop(Duration::ZERO).await;
                    return Err(LaunchError::new(format!(
                        "the decode side in {} exited before listening: {why}",
                        worker.label()
                    )));
                }
                Err(_) => return Ok(side), // the pipeline's own deadline reports it
            }
        }
        Err(LaunchError::new(format!(
            "ports {} are in use in {}: choose another range with --port-range",
            busy.join(", "),
            worker.label()
        )))
    }

    async fn start_prefill(&mut self, server: &Listening, plan: &ChildPlan) -> Result<InPlaceSide, LaunchError> {
        let address = self.decode.server_address(server)?;
        let worker = self.prefill.clone();
        let mut args = vec!["connect".into(), address, "--plan".into(), plan.to_json()];
        args.extend(self.plan.side_args.iter().cloned());
        self.launch(&worker, args, "prefill").await
    }

    fn placement(&self, server: &Listening, _report: &PairReport) -> Placement {
        let workers = (&self.prefill, &self.decode);
        pods_placement(self, self.cluster.namespace(), workers, server)
    }

    async fn cleanup(&mut self) -> Result<String, LaunchError> {
        let prefix = dir_prefix(&self.plan.run_id);
        // The glob names only this run's directories; `ls` first so the answer says what was there.
        let script = format!(
            r#"n=0; for d in "${{TMPDIR:-/tmp}}"/{prefix}.*; do [ -e "$d" ] || continue; rm -rf "$d" && n=$((n+1)); done; echo "$n""#
        );
        let command = vec!["sh".into(), "-c".into(), script];
        let mut removed = Vec::new();
        let mut failed = Vec::new();
        for worker in std::mem::take(&mut self.touched) {
            match self
                .cluster
                .exec(
                    &worker.pod,
                    worker.container.as_deref(),
                    &command,
                    self.plan.cleanup_timeout,
                )
                .await
            {
                Ok(out) if out.exit_code == 0 => {
                    let n = out.stdout_lossy().trim().parse::<u32>().unwrap_or(0);
                    removed.push(format!("{} ({n} leftover directories)", worker.label()));
                }
                Ok(out) => failed.push(format!("{}: {}", worker.label(), summarize(out.stderr_lossy().lines()))),
                Err(e) => failed.push(self.what_failed(&worker, &e)),
            }
        }
        if !failed.is_empty() {
            return Err(LaunchError::new(format!(
                "could not remove the copies of run {} in {} — remove ${{TMPDIR:-/tmp}}/{prefix}.* there by hand",
                self.plan.run_id,
                failed.join("; ")
            )));
        }
        Ok(if removed.is_empty() {
            String::new()
        } else {
            format!("removed this run's ic-bench copies from {}", removed.join(", "))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn architectures_and_start_failures_are_named() {
        assert!(same_arch("x86_64", "x86_64") && same_arch("aarch64", "arm64"));
        assert!(!same_arch("x86_64", "aarch64"));
        let glibc = cannot_start_hint("/tmp/x/ic-bench: /lib64/libc.so.6: version `GLIBC_2.34' not found");
        assert!(
            glibc.contains("glibc ≥ 2.28") && glibc.contains("--in-place-binary"),
            "{glibc}"
        );
        let arch = cannot_start_hint("sh: 1: /tmp/x/ic-bench: Exec format error");
        assert!(arch.contains("wrong architecture"), "{arch}");
        assert_eq!(cannot_start_hint("other"), "other");
    }

    #[test]
    fn this_binary_has_a_known_architecture() {
        let me = std::env::current_exe().unwrap();
        let arch = elf_arch(&me).expect("an ELF test binary");
        assert_eq!(arch, std::env::consts::ARCH);
        let dir = tempfile_path();
        std::fs::write(&dir, b"#!/bin/sh\n").unwrap();
        assert_eq!(elf_arch(&dir), None);
        let _ = std::fs::remove_file(dir);
    }

    fn tempfile_path() -> PathBuf {
        std::env::temp_dir().join(format!("icb-inplace-elf-{}", std::process::id()))
    }

    #[test]
    fn the_run_prefix_names_only_this_run() {
        assert_eq!(dir_prefix("ab12"), "ic-bench-inplace-ab12");
    }
}
