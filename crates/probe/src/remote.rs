//! The read-only shell script run inside a pod (`probe node --pod`, `--node`, `probe nixl --pod`)
//! and the parser of what it prints. The script only reads files, lists directories and runs
//! the diagnostic tools; it writes nothing (no temp files: tool stderr is folded into stdout).
//! Everything is parsed here, locally, by the same code that reads a local node.

use crate::envspec::is_transport_var;
use crate::facts::ERROR_COUNTERS;
use crate::nixl::{NIXL_LIBDIRS, NIXL_PREFIXES};
use crate::source::Snapshot;
use crate::tools::{Tool, ToolRun};

const MARK: &str = "@@ICB ";

/// Shell helpers: `f1` a one-line file (a shell builtin read: no fork per GID entry), `fm` a
/// file, `ld` a directory listing (hidden names included), `tl` a tool under `timeout`.
const PRELUDE: &str = r#"S=${ICB_SYS:-/sys}; D=${ICB_DEV:-/dev}; P=${ICB_PROC:-/proc}
TT=${ICB_TOOL_TIMEOUT:-10}; TO=""; command -v timeout >/dev/null 2>&1 && TO="timeout $TT"
printf '@@ICB TIMEOUT %s\n' "$TT"
f1() { if IFS= read -r v < "$2" 2>/dev/null; then printf '@@ICB %s %s\n%s\n\n@@ICB END\n' "$1" "$3" "$v"; fi; }
fm() { if [ -r "$1" ]; then printf '@@ICB FILE %s\n' "$2"; cat "$1" 2>/dev/null; printf '\n@@ICB END\n'; fi; }
ld() { if [ -d "$1" ]; then printf '@@ICB LIST %s\n' "$2"; for e in "$1"/* "$1"/.[!.]*; do if [ -e "$e" ] || [ -L "$e" ]; then printf '%s\n' "${e##*/}"; fi; done; printf '@@ICB END\n'; fi; }
tl() { n=$1; shift; if command -v "$1" >/dev/null 2>&1; then printf '@@ICB TOOL %s\n' "$n"; $TO "$@" 2>&1 </dev/null; rc=$?; printf '\n@@ICB RC %s\n' "$rc"; else printf '@@ICB MISSING %s\n' "$n"; fi; }
wh() { w=$(command -v "$1" 2>/dev/null) && printf '@@ICB WHICH %s %s\n' "$1" "$w"; }
"#;

/// What the rail map needs ([`crate::rails`]): the NVIDIA PCI devices (vendor, class, NUMA node,
/// resolved path), each RDMA device's resolved `device` link, NUMA node and netdevs, and whether
/// those netdevs are bonded. `rl` prints a directory's real path as a node path (`cd -P`, POSIX:
/// no `readlink -f`), one subshell per GPU, NIC and bond master.
const RAIL_MAP_PART: &str = r#"Sr=$(cd -P "$S" 2>/dev/null && pwd -P)
rl() { [ -n "$Sr" ] || return 0; r=$(cd -P "$1" 2>/dev/null && pwd -P) || return 0; case "$r" in "$Sr"/*) printf '@@ICB LINK %s /sys%s\n' "$2" "${r#"$Sr"}";; esac; }
pk() { for f in current_link_width current_link_speed max_link_width max_link_speed; do f1 FILE "$1/$f" "$2/$f"; done; rl "$1/iommu_group" "$2/iommu_group"
 [ -n "$Sr" ] || return 0; p=$(cd -P "$1/.." 2>/dev/null && pwd -P) || return 0; case "$p" in "$Sr"/*) for f in max_link_width max_link_speed; do f1 FILE "$p/$f" "/sys${p#"$Sr"}/$f"; done;; esac; }
ld "$S/bus/pci/devices" /sys/bus/pci/devices
for d in "$S"/bus/pci/devices/*; do b=/sys/bus/pci/devices/${d##*/}
 if IFS= read -r v < "$d/vendor" 2>/dev/null && [ "$v" = 0x10de ]; then
  for f in vendor class numa_node; do f1 FILE "$d/$f" "$b/$f"; done; rl "$d" "$b"; pk "$d" "$b"
 elif [ "$v" = 0x15b3 ]; then for f in vendor device numa_node; do f1 FILE "$d/$f" "$b/$f"; done; rl "$d" "$b"
 fi
done
for dev in "$S"/class/infiniband/*; do [ -d "$dev" ] || continue; b=/sys/class/infiniband/${dev##*/}/device
 rl "$dev/device" "$b"; f1 FILE "$dev/device/numa_node" "$b/numa_node"; ld "$dev/device/net" "$b/net"
 f1 FILE "$dev/fw_ver" "/sys/class/infiniband/${dev##*/}/fw_ver"; pk "$dev/device" "$b"
 for nd in "$dev"/device/net/*; do [ -d "$nd" ] || continue; m=${nd##*/}; c=/sys/class/net/$m; f1 FILE "$nd/mtu" "$c/mtu"
  for x in bonding bonding_slave; do [ -e "$S/class/net/$m/$x" ] && printf '@@ICB EXISTS %s\n' "$c/$x"; done
  if [ -e "$S/class/net/$m/master" ]; then rl "$S/class/net/$m/master" "$c/master"
   r=$(cd -P "$S/class/net/$m/master" 2>/dev/null && pwd -P) && [ -e "$S/class/net/${r##*/}/bonding" ] && printf '@@ICB EXISTS %s\n' "/sys/class/net/${r##*/}/bonding"
  fi
 done
done
"#;

fn counters_list() -> String {
    ERROR_COUNTERS.join(" ")
}

/// Sets the per-tool deadline, then the helpers; `ev` prints the pod's transport variables, with
/// the pattern spelled by the fabric vocabulary (the parser filters with the same predicate).
fn prelude(tool_timeout_s: u64) -> String {
    format!(
        "ICB_TOOL_TIMEOUT={}\n{PRELUDE}ev() {{ env | while IFS= read -r l; do case \"$l\" in {}) printf '@@ICB ENV %s\\n' \"$l\";; esac; done; }}\n",
        tool_timeout_s.max(1),
        icb_core::fabric::env::pod_transport_env_shell_pattern()
    )
}

/// The script behind `probe node --pod/--node`. `counter_pause_s` = 0 reads counters once.
pub fn node_script(counter_pause_s: u32, tool_timeout_s: u64) -> String {
    let mut s = prelude(tool_timeout_s);
    s.push_str(&format!(
        r#"ld "$S/class/infiniband" /sys/class/infiniband
for dev in "$S"/class/infiniband/*; do [ -d "$dev" ] || continue; n=${{dev##*/}}
 ld "$dev/ports" "/sys/class/infiniband/$n/ports"
 for port in "$dev"/ports/*; do [ -d "$port" ] || continue; b="/sys/class/infiniband/$n/ports/${{port##*/}}"
  for f in state phys_state rate link_layer {c}; do f1 FILE "$port/$f" "$b/$f"; done
  ld "$port/gid_attrs/types" "$b/gid_attrs/types"
  for t in "$port"/gid_attrs/types/*; do i=${{t##*/}}
   if IFS= read -r v < "$t" 2>/dev/null; then f1 FILE "$t" "$b/gid_attrs/types/$i"; f1 FILE "$port/gids/$i" "$b/gids/$i"; f1 FILE "$port/gid_attrs/ndevs/$i" "$b/gid_attrs/ndevs/$i"; fi
  done
 done
done
{rails}ld "$D/infiniband" /dev/infiniband
[ -e "$D/gdrdrv" ] && printf '@@ICB EXISTS /dev/gdrdrv\n'
ld "$S/kernel/mm/memory_peers" /sys/kernel/mm/memory_peers
ld "$S/class/net" /sys/class/net
fm "$P/modules" /proc/modules
fm "$P/driver/nvidia/version" /proc/driver/nvidia/version
fm "$P/sys/kernel/osrelease" /proc/sys/kernel/osrelease
fm /proc/self/limits /proc/self/limits
fm /proc/self/status /proc/self/status
tl ibstat ibstat
tl ibv_devinfo ibv_devinfo -v
tl nvidia-smi nvidia-smi topo -m
tl ucx_info ucx_info -d
ev
"#,
        c = counters_list(),
        rails = RAIL_MAP_PART
    ));
    if counter_pause_s > 0 {
        s.push_str(&format!(
            r#"sleep {counter_pause_s}
for port in "$S"/class/infiniband/*/ports/*; do [ -d "$port" ] || continue; r=${{port#"$S"}}
 for f in {c}; do f1 SAMPLE2 "$port/$f" "/sys$r/$f"; done
done
"#,
            c = counters_list()
        ));
    }
    s.push_str("printf '@@ICB DONE\\n'\n");
    s
}

/// The script behind `probe nixl --pod`.
pub fn nixl_script(tool_timeout_s: u64) -> String {
    let mut s = prelude(tool_timeout_s);
    s.push_str("ld \"$S/class/infiniband\" /sys/class/infiniband\n");
    for p in NIXL_PREFIXES {
        for l in NIXL_LIBDIRS {
            s.push_str(&format!("ld {p}/{l} {p}/{l}\nld {p}/{l}/plugins {p}/{l}/plugins\n"));
        }
    }
    s.push_str(
        r#"[ -n "$NIXL_PLUGIN_DIR" ] && ld "$NIXL_PLUGIN_DIR" "$NIXL_PLUGIN_DIR"
printf '@@ICB TOOL python3\n'
if command -v python3 >/dev/null 2>&1; then
 pp=$($TO python3 -c "import sys; print(chr(10).join(p for p in sys.path if p))" 2>/dev/null); rc=$?
 printf '%s\n\n@@ICB RC %s\n' "$pp" "$rc"
 printf '%s\n' "$pp" | while IFS= read -r d; do case "$d" in /*) ld "$d" "$d"; for x in "$d"/.nixl*.libs; do [ -d "$x" ] && ld "$x" "$x" && ld "$x/plugins" "$x/plugins"; done;; esac; done
else printf '\n@@ICB RC 127\n'; fi
wh nixlbench
ev
printf '@@ICB DONE\n'
"#,
    );
    s
}

/// Errors in what came back from the pod.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SnapshotError {
    #[error(
        "the probe script's output ended early (no DONE marker): the exec session was cut or the shell is not POSIX sh"
    )]
    Truncated,
    #[error("the probe script exited with {code}: {stderr}; the container needs a POSIX sh")]
    Script { code: i32, stderr: String },
}

/// What a script run through the exec API gave: its snapshot, or why there is none (a script
/// that failed before printing is reported by its exit code and first stderr line).
pub fn snapshot_from_exec(target: &str, stdout: &str, exit_code: i32, stderr: &str) -> Result<Snapshot, SnapshotError> {
    match parse_snapshot(target, stdout) {
        Ok(s) => Ok(s),
        Err(_) if exit_code != 0 => Err(SnapshotError::Script {
            code: exit_code,
            stderr: stderr.lines().next().unwrap_or("").to_string(),
        }),
        Err(e) => Err(e),
    }
}

/// Parses the script's output into a [`Snapshot`]. Never panics; unknown lines are ignored.
pub fn parse_snapshot(target: &str, text: &str) -> Result<Snapshot, SnapshotError> {
    let mut snap = Snapshot {
        target: target.to_string(),
        ..Default::default()
    };
    let mut lines = text.lines();
    let mut done = false;
    let mut tool_timeout_s = 10;
    while let Some(line) = lines.next() {
        let Some(rest) = line.strip_prefix(MARK) else { continue };
        let (kind, arg) = rest.split_once(' ').unwrap_or((rest, ""));
        match kind {
            "FILE" | "SAMPLE2" => {
                let body = block(&mut lines, |l| l == "@@ICB END");
                if kind == "FILE" {
                    snap.files.insert(arg.to_string(), body);
                } else {
                    snap.second_sample.insert(arg.to_string(), body);
                }
            }
            "LIST" => {
                let mut names: Vec<String> = Vec::new();
                for l in lines.by_ref() {
                    if l == "@@ICB END" {
                        break;
                    }
                    if !l.is_empty() && l != "*" && l != ".[!.]*" {
                        names.push(l.to_string());
                    }
                }
                names.sort_by(|a, b| crate::source::natural_cmp(a, b));
                snap.dirs.insert(arg.trim_end_matches('/').to_string(), names);
            }
            "TOOL" => {
                let mut rc_line = String::new();
                let body = block_with(&mut lines, |l| {
                    if let Some(rc) = l.strip_prefix("@@ICB RC ") {
                        rc_line = rc.to_string();
                        true
                    } else {
                        false
                    }
                });
                if let Some(tool) = Tool::from_program(arg) {
                    let run = match rc_line.trim().parse::<i32>() {
                        Ok(124) => ToolRun::TimedOut {
                            after_s: tool_timeout_s,
                        },
                        Ok(127) => ToolRun::NotFound,
                        Ok(code) => ToolRun::Ran {
                            stdout: body,
                            stderr: String::new(),
                            code: Some(code),
                        },
                        Err(_) => ToolRun::Failed {
                            error: "no exit status (output cut)".into(),
                        },
                    };
                    snap.tools.insert(tool, run);
                }
            }
            "MISSING" => {
                if let Some(tool) = Tool::from_program(arg) {
                    snap.tools.insert(tool, ToolRun::NotFound);
                }
            }
            "EXISTS" => {
                snap.present.insert(arg.to_string());
            }
            "LINK" => {
                if let Some((path, real)) = arg.split_once(' ') {
                    snap.links
                        .insert(path.trim_end_matches('/').to_string(), real.to_string());
                }
            }
            "WHICH" => {
                if let Some((prog, path)) = arg.split_once(' ') {
                    snap.which.insert(prog.to_string(), path.to_string());
                }
            }
            "ENV" => {
                if let Some((k, v)) = arg.split_once('=')
                    && is_transport_var(k)
                {
                    snap.env.insert(k.to_string(), v.to_string());
                }
            }
            "TIMEOUT" => tool_timeout_s = arg.trim().parse().unwrap_or(tool_timeout_s),
            "DONE" => done = true,
            _ => {}
        }
    }
    if done { Ok(snap) } else { Err(SnapshotError::Truncated) }
}

fn block<'a>(lines: &mut impl Iterator<Item = &'a str>, end: impl FnMut(&str) -> bool) -> String {
    block_with(lines, end)
}

/// Lines up to the end marker; the script adds one newline before the marker, removed here.
fn block_with<'a>(lines: &mut impl Iterator<Item = &'a str>, mut end: impl FnMut(&str) -> bool) -> String {
    let mut body: Vec<&str> = Vec::new();
    for l in lines.by_ref() {
        if end(l) {
            break;
        }
        body.push(l);
    }
    body.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::source::NodeSource;

    #[test]
    fn round_trip_of_blocks() {
        let text = "noise\n@@ICB TIMEOUT 7\n@@ICB LIST /sys/class/infiniband\nmlx5_1\nmlx5_0\n@@ICB END\n@@ICB FILE /sys/class/infiniband/mlx5_0/ports/1/state\n4: ACTIVE\n\n@@ICB END\n@@ICB FILE /proc/x\nno newline\n@@ICB END\n@@ICB TOOL ibstat\nCA 'mlx5_0'\n\n@@ICB RC 0\n@@ICB MISSING ucx_info\n@@ICB TOOL nvidia-smi\n\n@@ICB RC 124\n@@ICB EXISTS /dev/gdrdrv\n@@ICB WHICH nixlbench /usr/local/bin/nixlbench\n@@ICB ENV UCX_TLS=rc,cuda_copy\n@@ICB ENV AWS_SECRET=x\n@@ICB DONE\n";
        let s = parse_snapshot("pod/w", text).unwrap();
        assert_eq!(
            s.list("/sys/class/infiniband"),
            Some(vec!["mlx5_0".into(), "mlx5_1".into()])
        );
        assert_eq!(
            s.read("/sys/class/infiniband/mlx5_0/ports/1/state").as_deref(),
            Some("4: ACTIVE\n")
        );
        assert_eq!(s.read("/proc/x").as_deref(), Some("no newline"));
        assert!(s.exists("/dev/gdrdrv") && s.exists("/sys/class/infiniband/mlx5_1"));
        assert_eq!(
            s.tools.get(&Tool::Ibstat),
            Some(&ToolRun::Ran {
                stdout: "CA 'mlx5_0'\n".into(),
                stderr: String::new(),
                code: Some(0)
            })
        );
        assert_eq!(s.tools.get(&Tool::UcxInfo), Some(&ToolRun::NotFound));
        assert_eq!(
            s.tools.get(&Tool::NvidiaSmiTopo),
            Some(&ToolRun::TimedOut { after_s: 7 })
        );
        assert_eq!(s.which("nixlbench").as_deref(), Some("/usr/local/bin/nixlbench"));
        assert_eq!(s.env.get("UCX_TLS").map(String::as_str), Some("rc,cuda_copy"));
        assert!(!s.env.contains_key("AWS_SECRET"));
    }

    #[test]
    fn truncated_output_is_an_error() {
        assert_eq!(
            parse_snapshot("pod/w", "@@ICB FILE /x\nabc"),
            Err(SnapshotError::Truncated)
        );
    }
}
