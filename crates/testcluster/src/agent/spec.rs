//! A container's environment and command line, built the way the kubelet builds them: `env`
//! with `valueFrom.fieldRef`, `$(VAR)` expansion in command and args, the image's entrypoint.

use super::*;
use crate::api::secrets::SecretRefError;

/// `$(VAR)` references in command, args and env values, as Kubernetes expands them.
pub(super) fn expand(text: &str, env: &BTreeMap<String, String>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        if let Some(stripped) = tail.strip_prefix("$$") {
            out.push('$');
            rest = stripped;
        } else if let Some(inner) = tail.strip_prefix("$(")
            && let Some(end) = inner.find(')')
            && let Some(value) = env.get(&inner[..end])
        {
            out.push_str(value);
            rest = &inner[end + 1..];
        } else {
            out.push('$');
            rest = &tail[1..];
        }
    }
    out.push_str(rest);
    out
}

/// The downward API fields a `fieldRef` may name.
pub(super) fn field_ref(pod: &Pod, path: &str, pod_ip: &str) -> String {
    let m = &pod.metadata;
    let spec = pod.spec.clone().unwrap_or_default();
    if let Some(label) = path
        .strip_prefix("metadata.labels['")
        .and_then(|r| r.strip_suffix("']"))
    {
        return m
            .labels
            .as_ref()
            .and_then(|l| l.get(label))
            .cloned()
            .unwrap_or_default();
    }
    if let Some(a) = path
        .strip_prefix("metadata.annotations['")
        .and_then(|r| r.strip_suffix("']"))
    {
        return m
            .annotations
            .as_ref()
            .and_then(|l| l.get(a))
            .cloned()
            .unwrap_or_default();
    }
    match path {
        "metadata.name" => m.name.clone().unwrap_or_default(),
        "metadata.namespace" => m.namespace.clone().unwrap_or_default(),
        "metadata.uid" => m.uid.clone().unwrap_or_default(),
        "spec.nodeName" => spec.node_name.unwrap_or_default(),
        "spec.serviceAccountName" => spec.service_account_name.unwrap_or_default(),
        "status.podIP" | "status.hostIP" => pod_ip.to_string(),
        "status.podIPs" | "status.hostIPs" => pod_ip.to_string(),
        _ => String::new(),
    }
}

/// The container's environment: a clean base, the image's, the inherited host variables, then the
/// pod's own (later wins, `$(VAR)` expanded against what came before), then what the node's
/// runtime forces (a fault such as `NodeConfig::tcp_only`).
pub(super) fn container_env(
    image: Option<&ImageConfig>,
    bin_dir: Option<&Path>,
    pod: &Pod,
    c: &Container,
    pod_ip: &str,
    runtime_env: &BTreeMap<String, String>,
    secret: &dyn Fn(&str, &str) -> Result<String, SecretRefError>,
) -> Result<BTreeMap<String, String>, SecretRefError> {
    let mut env = BTreeMap::new();
    let mut path = String::new();
    if let Some(dir) = bin_dir {
        path.push_str(&dir.to_string_lossy());
        path.push(':');
    }
    path.push_str("/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin");
    env.insert("PATH".to_string(), path);
    env.insert("HOME".to_string(), "/root".to_string());
    env.insert("HOSTNAME".to_string(), pod.metadata.name.clone().unwrap_or_default());
    if let Some(img) = image {
        for (k, v) in std::env::vars() {
            if img.inherit_env_prefixes.iter().any(|p| k.starts_with(p.as_str())) {
                env.insert(k, v);
            }
        }
        env.extend(img.env.clone());
    }
    for var in c.env.iter().flatten() {
        let value = match (&var.value, &var.value_from) {
            (Some(v), _) => expand(v, &env),
            (None, Some(from)) => match (&from.field_ref, &from.secret_key_ref) {
                (Some(f), _) => field_ref(pod, &f.field_path, pod_ip),
                (None, Some(k)) => match secret(&k.name, &k.key) {
                    Ok(v) => v,
                    Err(_) if k.optional == Some(true) => continue,
                    Err(e) => return Err(e),
                },
                (None, None) => String::new(),
            },
            (None, None) => String::new(),
        };
        env.insert(var.name.clone(), value);
    }
    env.extend(runtime_env.clone());
    Ok(env)
}

/// Where a container's file writes go, emulated without a mount namespace per pod: every
/// `emptyDir` it mounts (but `/dev/shm`, which stays the node's) is a directory under the pod's
/// work dir, and the env values naming a mount path (`TMPDIR=/tmp`) are pointed into it. With
/// `readOnlyRootFilesystem`, `TMPDIR` and `HOME` outside an emptyDir point below a regular file,
/// so that every write there fails (ENOTDIR) as it would on a read-only root (EROFS).
pub(super) fn filesystem_env(pod: &Pod, c: &Container, pod_dir: &Path, env: &mut BTreeMap<String, String>) {
    let volumes = pod.spec.as_ref().and_then(|s| s.volumes.as_ref());
    let mut mapped: Vec<(String, PathBuf)> = Vec::new();
    let mut host_paths: Vec<(String, PathBuf)> = Vec::new();
    for m in c.volume_mounts.iter().flatten() {
        let volume = volumes.into_iter().flatten().find(|v| v.name == m.name);
        if let Some(host) = volume.and_then(|v| v.host_path.as_ref()) {
            if let Some(path) = node_host_path(&host.path, env) {
                host_paths.push((m.mount_path.trim_end_matches('/').to_string(), path));
            }
            continue;
        }
        let empty_dir = volume.is_some_and(|v| v.empty_dir.is_some());
        if !empty_dir || m.mount_path == icb_core::fabric::shm::DEV_SHM {
            continue;
        }
        let dir = pod_dir.join("volumes").join(&m.name);
        let _ = std::fs::create_dir_all(&dir);
        // World-writable, as the kubelet creates an emptyDir: a non-root container writes there.
        let _ = std::fs::set_permissions(&dir, std::os::unix::fs::PermissionsExt::from_mode(0o777));
        mapped.push((m.mount_path.trim_end_matches('/').to_string(), dir));
    }
    let map = |value: &str| -> Option<String> {
        mapped.iter().chain(&host_paths).find_map(|(at, dir)| {
            let rest = value.strip_prefix(at.as_str())?;
            (rest.is_empty() || rest.starts_with('/')).then(|| format!("{}{rest}", dir.display()))
        })
    };
    // Only the pod's own variables: the agent's (PATH to the mapped program) may lie under the
    // host's /tmp, which is not the container's.
    for var in c.env.iter().flatten() {
        if let Some(value) = env.get_mut(&var.name)
            && let Some(v) = map(value)
        {
            *value = v;
        }
    }
    let read_only = c
        .security_context
        .as_ref()
        .and_then(|s| s.read_only_root_filesystem)
        .unwrap_or(false);
    if !read_only {
        return;
    }
    let blocker = pod_dir.join("read-only-root");
    let _ = std::fs::write(&blocker, b"the emulated read-only root filesystem\n");
    let defaults = [("TMPDIR", "/tmp"), ("HOME", "/root")];
    for (name, default) in defaults {
        let value = env.get(name).cloned().unwrap_or_else(|| default.to_string());
        let inside = mapped.iter().any(|(_, dir)| Path::new(&value).starts_with(dir));
        if !inside {
            env.insert(name.to_string(), format!("{}{value}", blocker.display()));
        }
    }
}

/// Where a hostPath volume's `path` is on this emulated node, for the env values that name its
/// mount path (`ICB_SYS=/host/sys` of a probe pod): `/sys` and below on a node with emulated
/// rails is its recorded tree (its NICs' sysfs; a real node's probe pod reads its NICs there).
/// Other host paths are not emulated (`None`: the values stay as the pod wrote them).
fn node_host_path(path: &str, env: &BTreeMap<String, String>) -> Option<PathBuf> {
    let tree = PathBuf::from(env.get(crate::RAIL_TREE_ENV)?);
    let rest = path.strip_prefix("/sys")?;
    let sys = tree.join("sys");
    match rest.strip_prefix('/') {
        _ if rest.is_empty() => Some(sys),
        Some(below) => Some(sys.join(below)),
        None => None, // `/sysfoo`: another path.
    }
}

pub(super) fn file_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// command/args as the image's entrypoint would run them, `command[0]` mapped to the program.
pub(super) fn container_command(
    image: Option<&ImageConfig>,
    c: &Container,
    env: &BTreeMap<String, String>,
) -> Option<Vec<String>> {
    let command: Vec<String> = c.command.iter().flatten().map(|s| expand(s, env)).collect();
    let args: Vec<String> = c.args.iter().flatten().map(|s| expand(s, env)).collect();
    let mut argv = match (image, command.is_empty()) {
        (Some(img), true) => vec![img.program.to_string_lossy().into_owned()],
        (None, true) => return None,
        (Some(img), false) => {
            let program = img.program.to_string_lossy().into_owned();
            let mut command = command;
            if file_name(&command[0]) == file_name(&program) {
                command[0] = program;
            }
            command
        }
        (None, false) => command,
    };
    argv.extend(args);
    Some(argv)
}

/// A directory holding `<program file name>` → program, put first on the container's PATH so
/// `sh -c 'ic-bench …'` finds the mapped binary.
pub(super) fn bin_dir(work_dir: &Path, program: &Path) -> Option<PathBuf> {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    program.hash(&mut h);
    let dir = work_dir.join("bin").join(format!("{:016x}", h.finish()));
    let link = dir.join(program.file_name()?);
    if !link.exists() {
        std::fs::create_dir_all(&dir).ok()?;
        let _ = std::os::unix::fs::symlink(program, &link);
    }
    Some(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expands_like_kubernetes() {
        let env: BTreeMap<String, String> = [("A".to_string(), "1".to_string())].into();
        assert_eq!(expand("x$(A)y", &env), "x1y");
        assert_eq!(expand("$(B)", &env), "$(B)");
        assert_eq!(expand("$$(A)", &env), "$(A)");
        assert_eq!(expand("$", &env), "$");
    }

    #[test]
    fn a_host_sys_mount_on_a_node_with_rails_is_its_recorded_tree() {
        let dir = tempfile::tempdir().unwrap();
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "probe"},
            "spec": {"containers": [], "volumes": [
                {"name": "host-sys", "hostPath": {"path": "/sys"}},
                {"name": "host-dev", "hostPath": {"path": "/dev"}}]}
        }))
        .unwrap();
        let c: Container = serde_json::from_value(serde_json::json!({"name": "c",
            "env": [{"name": "ICB_SYS", "value": "/host/sys"}, {"name": "ICB_DEV", "value": "/host/dev"}],
            "volumeMounts": [{"name": "host-sys", "mountPath": "/host/sys"},
                             {"name": "host-dev", "mountPath": "/host/dev"}]}))
        .unwrap();
        let base = |tree: Option<&str>| -> BTreeMap<String, String> {
            let mut env: BTreeMap<String, String> = [
                ("ICB_SYS".to_string(), "/host/sys".to_string()),
                ("ICB_DEV".to_string(), "/host/dev".to_string()),
            ]
            .into();
            if let Some(t) = tree {
                env.insert(crate::RAIL_TREE_ENV.to_string(), t.to_string());
            }
            env
        };
        let mut env = base(Some("/tmp/run-rails/gpu-1"));
        filesystem_env(&pod, &c, dir.path(), &mut env);
        assert_eq!(env["ICB_SYS"], "/tmp/run-rails/gpu-1/sys");
        assert_eq!(env["ICB_DEV"], "/host/dev", "only /sys is emulated");
        let mut env = base(None);
        filesystem_env(&pod, &c, dir.path(), &mut env);
        assert_eq!(env["ICB_SYS"], "/host/sys", "a node without rails is left alone");
    }

    #[test]
    fn writes_go_to_empty_dirs_and_fail_on_a_read_only_root() {
        let dir = tempfile::tempdir().unwrap();
        let pod: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p"},
            "spec": {"containers": [], "volumes": [
                {"name": "scratch", "emptyDir": {}}, {"name": "dshm", "emptyDir": {"medium": "Memory"}}]}
        }))
        .unwrap();
        let container = |read_only: bool, mounts: serde_json::Value| -> Container {
            serde_json::from_value(serde_json::json!({"name": "c", "volumeMounts": mounts,
                "securityContext": {"readOnlyRootFilesystem": read_only}}))
            .unwrap()
        };
        let mounts = serde_json::json!([{"name": "scratch", "mountPath": "/tmp"},
                                        {"name": "dshm", "mountPath": "/dev/shm"}]);
        let mut env: BTreeMap<String, String> = [
            ("TMPDIR".to_string(), "/tmp".to_string()),
            ("PATH".to_string(), "/tmp/agent-bin:/bin".to_string()),
        ]
        .into();
        let mut c = container(true, mounts);
        c.env = Some(vec![k8s_openapi::api::core::v1::EnvVar {
            name: "TMPDIR".into(),
            value: Some("/tmp".into()),
            ..Default::default()
        }]);
        filesystem_env(&pod, &c, dir.path(), &mut env);
        assert_eq!(
            env["PATH"], "/tmp/agent-bin:/bin",
            "only the pod's own variables are mapped"
        );
        let tmp = PathBuf::from(&env["TMPDIR"]);
        assert_eq!(tmp, dir.path().join("volumes/scratch"));
        std::fs::write(tmp.join("x"), b"ok").expect("an emptyDir is writable");
        assert!(!dir.path().join("volumes/dshm").exists(), "/dev/shm stays the node's");
        let home = PathBuf::from(&env["HOME"]);
        assert!(
            std::fs::create_dir_all(home.join(".cache")).is_err(),
            "HOME is on the read-only root"
        );

        let mut env = BTreeMap::new();
        filesystem_env(&pod, &container(true, serde_json::json!([])), dir.path(), &mut env);
        let tmp = PathBuf::from(&env["TMPDIR"]);
        assert!(tempfile::tempdir_in(&tmp).is_err(), "no emptyDir: /tmp is read-only");

        let mut env = BTreeMap::new();
        filesystem_env(&pod, &container(false, serde_json::json!([])), dir.path(), &mut env);
        assert!(env.is_empty(), "a writable root changes nothing");
    }

    #[test]
    fn command_maps_to_the_program() {
        let img = ImageConfig::new("/build/ic-bench");
        let env = BTreeMap::new();
        let c = |command: &[&str], args: &[&str]| Container {
            name: "c".into(),
            command: (!command.is_empty()).then(|| command.iter().map(|s| s.to_string()).collect()),
            args: (!args.is_empty()).then(|| args.iter().map(|s| s.to_string()).collect()),
            ..Default::default()
        };
        assert_eq!(
            container_command(Some(&img), &c(&[], &["serve"]), &env).unwrap(),
            ["/build/ic-bench", "serve"]
        );
        assert_eq!(
            container_command(Some(&img), &c(&["/usr/local/bin/ic-bench", "connect"], &["x"]), &env).unwrap(),
            ["/build/ic-bench", "connect", "x"]
        );
        assert_eq!(
            container_command(Some(&img), &c(&["sh", "-c", "true"], &[]), &env).unwrap(),
            ["sh", "-c", "true"]
        );
        assert!(container_command(None, &c(&[], &[]), &env).is_none());
    }
}
