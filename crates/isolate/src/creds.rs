//! Who a pod's process runs as, applied as a kubelet and container runtime apply a container's
//! securityContext: user, group and supplementary groups (`setresgid`/`setgroups`/`setresuid`),
//! the capability bounding and inheritable sets, and `no_new_privs`. One more `setpriv` at the
//! innermost end of the chain (after `unshare --mount-proc`, which needs root), so no `unsafe`.
//!
//! `setpriv` re-arms the parent death signal after changing the user: the kernel clears it on
//! any credential change, and the pod must still die with its owner (see the `chain` module).

use crate::error::Result;
use crate::tools::locate;
use std::ffi::OsString;

/// A container's credentials. `Default` changes nothing (root, every capability).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Credentials {
    /// `runAsUser`; `None`: the image's user (root here).
    pub uid: Option<u32>,
    /// `runAsGroup` (with a `uid` and no group: group 0, as a runtime with a root image does).
    pub gid: Option<u32>,
    /// `fsGroup` and `supplementalGroups`: the supplementary groups (else none, with a `uid`).
    pub groups: Vec<u32>,
    /// `capabilities.drop` contains `ALL`: the bounding set starts empty.
    pub drop_all: bool,
    /// `capabilities.drop` other than `ALL`, as Kubernetes spells them (`NET_RAW`, `CAP_NET_RAW`).
    pub drop: Vec<String>,
    /// `capabilities.add`.
    pub add: Vec<String>,
    /// `allowPrivilegeEscalation: false`.
    pub no_new_privs: bool,
}

/// `NET_RAW` or `CAP_NET_RAW` as setpriv spells it (`net_raw`).
fn cap_name(k8s: &str) -> String {
    let upper = k8s.trim().to_ascii_uppercase();
    upper.strip_prefix("CAP_").unwrap_or(&upper).to_ascii_lowercase()
}

impl Credentials {
    /// True when applying them changes nothing.
    pub fn is_noop(&self) -> bool {
        *self == Credentials::default()
    }

    /// The capability bounding set change, as setpriv's list (`-all,+ipc_lock`), if any.
    fn bounding(&self) -> Option<String> {
        let mut items: Vec<String> = Vec::new();
        if self.drop_all {
            items.push("-all".into());
            items.extend(self.add.iter().map(|c| format!("+{}", cap_name(c))));
        } else {
            items.extend(self.drop.iter().map(|c| format!("-{}", cap_name(c))));
        }
        (!items.is_empty()).then(|| items.join(","))
    }

    /// The `setpriv` options that apply them (no program, no trailing `--`; empty when there is
    /// nothing to apply). Also for an entry program that must set up its root filesystem as root
    /// before it drops to them, as a container runtime does (see the testcluster's
    /// `ICB_TESTCLUSTER_ENTRY_CREDENTIALS`).
    pub fn setpriv_options(&self) -> Vec<String> {
        if self.is_noop() {
            return Vec::new();
        }
        let mut opts: Vec<String> = Vec::new();
        if let Some(uid) = self.uid {
            opts.push(format!("--reuid={uid}"));
            opts.push(format!("--regid={}", self.gid.unwrap_or(0)));
        } else if let Some(gid) = self.gid {
            opts.push(format!("--regid={gid}"));
        }
        if self.uid.is_some() || self.gid.is_some() || !self.groups.is_empty() {
            match self.groups.is_empty() {
                true => opts.push("--clear-groups".into()),
                false => {
                    let list: Vec<String> = self.groups.iter().map(u32::to_string).collect();
                    opts.push(format!("--groups={}", list.join(",")));
                }
            }
        }
        if let Some(b) = self.bounding() {
            opts.push(format!("--bounding-set={b}"));
            // Nothing inherited across execve but what was added.
            let mut inh = String::from("-all");
            for c in self.add.iter().filter(|_| self.drop_all) {
                inh.push_str(&format!(",+{}", cap_name(c)));
            }
            opts.push(format!("--inh-caps={inh}"));
        }
        if self.no_new_privs {
            opts.push("--no-new-privs".into());
        }
        opts.extend(["--pdeathsig".into(), "KILL".into()]);
        opts
    }

    /// The `setpriv … --` wrapper that applies them (empty when there is nothing to apply).
    /// A non-root user loses every capability at `setresuid` (no keep-caps); a root user keeps
    /// only the bounding set at `execve`; neither can regain any under `no_new_privs`.
    pub(crate) fn wrapper(&self) -> Result<Vec<OsString>> {
        if self.is_noop() {
            return Ok(Vec::new());
        }
        let mut argv: Vec<OsString> = vec![locate("setpriv", "util-linux")?.into_os_string()];
        argv.extend(self.setpriv_options().into_iter().map(OsString::from));
        argv.push("--".into());
        Ok(argv)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn line(c: &Credentials) -> String {
        c.wrapper()
            .unwrap()
            .iter()
            .map(|a| {
                let a = a.to_string_lossy();
                a.rsplit('/').next().unwrap_or(&a).to_string()
            })
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn the_options_alone_are_the_wrapper_without_program_and_separator() {
        let restricted = Credentials {
            uid: Some(65532),
            gid: Some(65532),
            drop_all: true,
            no_new_privs: true,
            ..Default::default()
        };
        assert_eq!(
            restricted.setpriv_options().join(" "),
            "--reuid=65532 --regid=65532 --clear-groups --bounding-set=-all --inh-caps=-all \
             --no-new-privs --pdeathsig KILL"
        );
        assert!(Credentials::default().setpriv_options().is_empty());
    }

    #[test]
    fn a_restricted_container_runs_unprivileged() {
        let restricted = Credentials {
            uid: Some(65532),
            gid: Some(65532),
            groups: vec![65532],
            drop_all: true,
            no_new_privs: true,
            ..Default::default()
        };
        assert_eq!(
            line(&restricted),
            "setpriv --reuid=65532 --regid=65532 --groups=65532 --bounding-set=-all --inh-caps=-all \
             --no-new-privs --pdeathsig KILL --"
        );
    }

    #[test]
    fn root_keeps_only_what_it_adds_and_default_changes_nothing() {
        let rdma = Credentials {
            drop_all: true,
            add: vec!["IPC_LOCK".into(), "CAP_SYS_PTRACE".into()],
            ..Default::default()
        };
        assert_eq!(
            line(&rdma),
            "setpriv --bounding-set=-all,+ipc_lock,+sys_ptrace --inh-caps=-all,+ipc_lock,+sys_ptrace \
             --pdeathsig KILL --"
        );
        let some = Credentials {
            drop: vec!["NET_RAW".into()],
            uid: Some(1000),
            ..Default::default()
        };
        assert_eq!(
            line(&some),
            "setpriv --reuid=1000 --regid=0 --clear-groups --bounding-set=-net_raw --inh-caps=-all \
             --pdeathsig KILL --"
        );
        assert!(Credentials::default().is_noop());
        assert!(Credentials::default().wrapper().unwrap().is_empty());
    }
}
