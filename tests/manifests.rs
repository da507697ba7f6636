//! The manifests in `manifests/` parse strictly into the Kubernetes types, and the Role grants
//! exactly what `ic-bench pair` calls: checked against the requests a real pair run made on the
//! emulated cluster.

use crate::pair_kube_support as support;

use icb_kube::k8s_openapi;
use k8s_openapi::api::batch::v1::{CronJob, Job};
use k8s_openapi::api::core::v1::{Namespace, PersistentVolumeClaim, ServiceAccount};
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use serde_json::Value;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn manifests_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests")
}

/// Deserializes into the type and back: any field the type does not know is dropped on the way
/// and shows up as a difference (k8s-openapi itself ignores unknown fields).
macro_rules! strict {
    ($ty:ty, $doc:expr, $file:expr) => {{
        let doc: &Value = $doc;
        let typed: $ty = serde_json::from_value(doc.clone()).unwrap_or_else(|e| panic!("{}: {e}", $file));
        let back = serde_json::to_value(&typed).unwrap();
        assert_eq!(
            &strip_nulls(back),
            doc,
            "{}: a field is unknown to the Kubernetes type (typo?)",
            $file
        );
        typed
    }};
}

fn strip_nulls(mut v: Value) -> Value {
    fn walk(v: &mut Value) {
        match v {
            Value::Object(m) => {
                m.retain(|_, x| !x.is_null());
                m.values_mut().for_each(walk);
            }
            Value::Array(a) => a.iter_mut().for_each(walk),
            _ => {}
        }
    }
    walk(&mut v);
    v
}

struct Parsed {
    roles: Vec<Role>,
    bindings: Vec<RoleBinding>,
    service_accounts: Vec<ServiceAccount>,
    namespaces: Vec<Namespace>,
    jobs: Vec<Job>,
    cluster_roles: Vec<ClusterRole>,
    cluster_bindings: Vec<ClusterRoleBinding>,
    cron_jobs: Vec<CronJob>,
    claims: Vec<PersistentVolumeClaim>,
}

fn parse_all() -> Parsed {
    let mut p = Parsed {
        roles: vec![],
        bindings: vec![],
        service_accounts: vec![],
        namespaces: vec![],
        jobs: vec![],
        cluster_roles: vec![],
        cluster_bindings: vec![],
        cron_jobs: vec![],
        claims: vec![],
    };
    let mut files: Vec<PathBuf> = std::fs::read_dir(manifests_dir())
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml" || e == "yml"))
        // kustomization.yaml is not an object; `kustomization_lists_the_manifests` checks it.
        .filter(|p| p.file_name().is_some_and(|n| n != "kustomization.yaml"))
        .collect();
    files.sort();
    assert!(files.len() >= 4, "manifests missing: {files:?}");
    for path in files {
        let file = path.file_name().unwrap().to_string_lossy().to_string();
        let text = std::fs::read_to_string(&path).unwrap();
        let docs = icb_kube::yaml::documents(&text).unwrap_or_else(|e| panic!("{file}: {e}"));
        assert!(!docs.is_empty(), "{file} is empty");
        for doc in docs {
            let kind = doc["kind"]
                .as_str()
                .unwrap_or_else(|| panic!("{file}: a document without kind"));
            match kind {
                "Role" => p.roles.push(strict!(Role, &doc, &file)),
                "RoleBinding" => p.bindings.push(strict!(RoleBinding, &doc, &file)),
                "ServiceAccount" => p.service_accounts.push(strict!(ServiceAccount, &doc, &file)),
                "Namespace" => p.namespaces.push(strict!(Namespace, &doc, &file)),
                "Job" => p.jobs.push(strict!(Job, &doc, &file)),
                "ClusterRole" => p.cluster_roles.push(strict!(ClusterRole, &doc, &file)),
                "ClusterRoleBinding" => p.cluster_bindings.push(strict!(ClusterRoleBinding, &doc, &file)),
                "CronJob" => p.cron_jobs.push(strict!(CronJob, &doc, &file)),
                "PersistentVolumeClaim" => p.claims.push(strict!(PersistentVolumeClaim, &doc, &file)),
                other => panic!("{file}: unexpected kind {other}"),
            }
        }
    }
    p
}

#[test]
fn manifests_parse_strictly_and_fit_together() {
    let p = parse_all();
    assert_eq!(
        (
            p.roles.len(),
            p.bindings.len(),
            p.service_accounts.len(),
            p.namespaces.len(),
            p.jobs.len()
        ),
        // rbac.yaml's pair Role, the optional in-place exec Role and the optional fabric matrix
        // Role, each with its binding.
        (3, 3, 1, 1, 1)
    );
    let ns = p.namespaces[0].metadata.name.clone().unwrap();
    let sa = &p.service_accounts[0];
    let role = pair_role(&p);
    let binding = p
        .bindings
        .iter()
        .find(|b| b.role_ref.name == "ic-bench-pair")
        .expect("a binding of the pair Role");
    let inplace = p
        .roles
        .iter()
        .find(|r| r.metadata.name.as_deref() == Some("ic-bench-inplace-exec"))
        .expect("manifests/inplace-exec-role.yaml");
    assert!(
        granted(inplace).contains(&("".into(), "pods/exec".into(), "create".into())),
        "the in-place Role must grant create on pods/exec"
    );
    for m in [&sa.metadata, &role.metadata, &binding.metadata, &p.jobs[0].metadata] {
        assert_eq!(
            m.namespace.as_deref(),
            Some(ns.as_str()),
            "{:?} is not in namespace {ns}",
            m.name
        );
    }
    assert_eq!(binding.role_ref.kind, "Role");
    assert_eq!(Some(&binding.role_ref.name), role.metadata.name.as_ref());
    let subject = &binding.subjects.as_ref().unwrap()[0];
    assert_eq!(
        (subject.kind.as_str(), Some(&subject.name)),
        ("ServiceAccount", sa.metadata.name.as_ref())
    );
    let job = p.jobs[0].spec.as_ref().unwrap();
    let pod = job.template.spec.as_ref().unwrap();
    assert_eq!(pod.service_account_name, sa.metadata.name);
    assert_eq!(pod.restart_policy.as_deref(), Some("Never"));
    assert_eq!(job.backoff_limit, Some(0), "a gate must not retry a failed verdict");
    let cmd = pod.containers[0].command.as_ref().unwrap();
    assert_eq!(&cmd[..2], ["ic-bench", "gate"]);
    assert!(cmd.iter().any(|a| a == "--prefill") && cmd.iter().any(|a| a == "--decode"));
    assert!(cmd.iter().any(|a| a == "--budget"));

    // The nightly sweep: never two at once, results on the claim, the service account's rights.
    assert_eq!(p.cron_jobs.len(), 1);
    let cron = &p.cron_jobs[0].spec;
    assert_eq!(cron.concurrency_policy.as_deref(), Some("Forbid"));
    let pod = cron.job_template.spec.as_ref().unwrap().template.spec.as_ref().unwrap();
    assert_eq!(pod.service_account_name, sa.metadata.name);
    let script = pod.containers[0].command.as_ref().unwrap().join(" ");
    assert!(
        script.contains("ic-bench sweep") && script.contains("--results /results/"),
        "{script}"
    );
    let claim = pod.volumes.as_ref().unwrap()[0]
        .persistent_volume_claim
        .as_ref()
        .unwrap();
    assert_eq!(Some(&claim.claim_name), p.claims[0].metadata.name.as_ref());

    // Node access: read for sweeps and device defaults; patch only in the opt-in labelling role.
    let verbs = |name: &str| -> BTreeSet<String> {
        let role = p
            .cluster_roles
            .iter()
            .find(|r| r.metadata.name.as_deref() == Some(name))
            .unwrap();
        role.rules.iter().flatten().flat_map(|r| r.verbs.clone()).collect()
    };
    assert_eq!(verbs("ic-bench-nodes-read"), ["get", "list"].map(String::from).into());
    // Exactly what `sweep --label-nodes` sends (tests/sweep_labels.rs checks the requests).
    assert_eq!(verbs("ic-bench-label-nodes"), ["patch"].map(String::from).into());
    // Exactly what `sweep --node-conditions` sends: the status subresource, never the node
    // itself (tests/sweep_conditions.rs checks the requests).
    let resources = |name: &str| -> BTreeSet<String> {
        let role = p
            .cluster_roles
            .iter()
            .find(|r| r.metadata.name.as_deref() == Some(name));
        role.unwrap()
            .rules
            .iter()
            .flatten()
            .flat_map(|r| r.resources.clone().unwrap_or_default())
            .collect()
    };
    assert_eq!(verbs("ic-bench-node-conditions"), ["patch"].map(String::from).into());
    assert_eq!(
        resources("ic-bench-node-conditions"),
        ["nodes/status"].map(String::from).into()
    );
    // Exactly what `sweep --matrix-configmap` sends (tests/sweep_matrix.rs checks the requests):
    // get, create, update on configmaps; no list (it would read every ConfigMap), no delete.
    let matrix = p
        .roles
        .iter()
        .find(|r| r.metadata.name.as_deref() == Some("ic-bench-fabric-matrix"))
        .expect("manifests/role-fabric-matrix.yaml");
    assert_eq!(
        granted(matrix),
        ["create", "get", "update"]
            .map(|v| (String::new(), "configmaps".to_string(), v.to_string()))
            .into()
    );
    assert_eq!(matrix.metadata.namespace.as_deref(), Some(ns.as_str()));
    for b in &p.cluster_bindings {
        assert_eq!(b.role_ref.kind, "ClusterRole");
        assert!(
            p.cluster_roles
                .iter()
                .any(|r| r.metadata.name.as_ref() == Some(&b.role_ref.name))
        );
        assert_eq!(b.subjects.as_ref().unwrap()[0].name, sa.metadata.name.clone().unwrap());
    }
    for r in p
        .roles
        .iter()
        .map(|r| &r.rules)
        .chain(p.cluster_roles.iter().map(|r| &r.rules))
    {
        assert!(
            !r.iter()
                .flatten()
                .any(|rule| rule.resources.iter().flatten().any(|x| x.contains("taint"))),
            "never taints"
        );
    }
}

#[test]
fn kustomization_lists_the_manifests() {
    let text = std::fs::read_to_string(manifests_dir().join("kustomization.yaml")).unwrap();
    let docs = icb_kube::yaml::documents(&text).unwrap();
    assert_eq!(docs[0]["kind"], "Kustomization");
    let listed: BTreeSet<String> = docs[0]["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap().to_string())
        .collect();
    for f in &listed {
        assert!(
            manifests_dir().join(f).is_file(),
            "kustomization lists a missing file {f}"
        );
    }
    for f in [
        "namespace.yaml",
        "serviceaccount.yaml",
        "rbac.yaml",
        "job-gate.yaml",
        "cronjob-sweep.yaml",
    ] {
        assert!(listed.contains(f), "{f} not in kustomization.yaml");
    }
    assert!(
        !listed.contains("clusterrole-label-nodes.yaml"),
        "labelling nodes is opt-in"
    );
    assert!(
        !listed.contains("clusterrole-node-conditions.yaml"),
        "node conditions are opt-in"
    );
    assert!(
        !listed.contains("role-fabric-matrix.yaml"),
        "the matrix ConfigMap is opt-in"
    );
}

fn pair_role(p: &Parsed) -> &Role {
    p.roles
        .iter()
        .find(|r| r.metadata.name.as_deref() == Some("ic-bench-pair"))
        .expect("rbac.yaml's ic-bench-pair Role")
}

#[test]
fn a_typo_in_a_manifest_is_caught() {
    let doc: Value = serde_json::json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "x"}, "automountServiceAccountTokn": true});
    let r = std::panic::catch_unwind(|| strict!(ServiceAccount, &doc, "typo.yaml"));
    assert!(r.is_err());
}

/// (apiGroup, resource[/subresource], verb) the Role grants.
fn granted(role: &Role) -> BTreeSet<(String, String, String)> {
    let mut out = BTreeSet::new();
    for rule in role.rules.iter().flatten() {
        for g in rule.api_groups.iter().flatten() {
            for r in rule.resources.iter().flatten() {
                for v in &rule.verbs {
                    out.insert((g.clone(), r.clone(), v.clone()));
                }
            }
        }
    }
    out
}

/// The RBAC permission a request needs (namespaced resources: what ic-bench calls in its
/// namespace; a named group's paths have one segment more than the core group's).
fn needed(method: &str, path: &str, watch: bool) -> (String, String, String) {
    let all: Vec<&str> = path.trim_matches('/').split('/').collect();
    // api/v1/namespaces/NS/pods[/NAME[/SUB]], apis/GROUP/v1/namespaces/NS/RESOURCE[/NAME]
    let (group, parts) = match all.first() {
        Some(&"apis") if all.len() > 1 => (all[1].to_string(), [&all[..1], &all[2..]].concat()),
        _ => (String::new(), all.clone()),
    };
    assert!(
        parts.len() >= 5 && parts[2] == "namespaces",
        "unexpected request path {path}"
    );
    let resource = match parts.get(6) {
        Some(sub) => format!("{}/{sub}", parts[4]),
        None => parts[4].to_string(),
    };
    let named = parts.len() >= 6;
    let verb = match (method, named, watch) {
        ("GET", _, true) => "watch",
        ("GET", true, false) => "get",
        ("GET", false, false) => "list",
        ("POST", _, _) => "create",
        ("DELETE", true, _) => "delete",
        ("DELETE", false, _) => "deletecollection",
        ("PUT", _, _) => "update",
        ("PATCH", _, _) => "patch",
        _ => panic!("unexpected method {method} {path}"),
    };
    (group, resource, verb.to_string())
}

/// A workload pod to point `pod/`, `deployment/` and `-l` targets at (owned by ReplicaSet
/// `web-5d9c` as a Deployment `web` would make it).
fn reference_pod() -> Value {
    serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web-5d9c-x1", "labels": {"app": "web", "pod-template-hash": "5d9c"},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-5d9c", "uid": "u1", "controller": true}]},
        "spec": {"nodeName": "gpu-2", "containers": [{"name": "main", "image": "serving:1", "command": ["sleep", "600"]}]}
    })
}

#[test]
fn role_covers_exactly_what_pair_and_gc_call() {
    // API calls, not transports: pods as plain processes, no root needed. Two nodes offer
    // their GPUs through DRA only (claim templates, slices and device classes).
    let config = icb_testcluster::ClusterConfig::two_gpu_nodes()
        .node(icb_testcluster::NodeConfig::dra_gpu("dra-1", 1))
        .node(icb_testcluster::NodeConfig::dra_gpu("dra-2", 1))
        .program(support::BIN)
        .isolation(icb_testcluster::Isolation::Host);
    let cluster = icb_testcluster::TestCluster::start_blocking(config).expect("the emulated cluster starts");
    support::create_reference_pod(&cluster, reference_pod());
    let mut requests = Vec::new();
    for (prefill, decode) in [
        ("node/gpu-1", "node/gpu-1"),
        ("pod/web-5d9c-x1", "deployment/web"),
        ("app=web", "node/gpu-2"),
        ("node/dra-1", "node/dra-2"),
    ] {
        let mut args = vec!["--prefill", prefill, "--decode", decode, "-o", "json"];
        args.extend_from_slice(support::FAST);
        let run = support::run_pair(&cluster, &args, std::time::Duration::from_secs(120));
        assert!(run.code == 0 || run.code == 1, "{prefill} {decode}: {run:#?}");
        requests.extend(run.requests);
    }
    cluster.clear_requests();
    let gc = std::process::Command::new(support::BIN)
        .args(["gc", "--kubeconfig"])
        .arg(cluster.kubeconfig_path())
        .output()
        .unwrap();
    assert!(gc.status.success(), "{gc:?}");
    requests.extend(cluster.requests());

    // Node reads (device defaults of node targets) and DRA slice and class reads are
    // cluster-scoped: the nodes-read ClusterRole, which grants them read-only.
    let cluster_scoped = |path: &str| {
        path.starts_with("/api/v1/nodes")
            || path.starts_with("/apis/resource.k8s.io/v1/resourceslices")
            || path.starts_with("/apis/resource.k8s.io/v1/deviceclasses")
    };
    let (node_reads, requests): (Vec<_>, Vec<_>) = requests.into_iter().partition(|r| cluster_scoped(&r.path));
    assert!(!node_reads.is_empty(), "node targets read their node's resources");
    assert!(node_reads.iter().all(|r| r.method == "GET"), "only reads of nodes");
    let p = parse_all();
    let nodes_read = p
        .cluster_roles
        .iter()
        .find(|r| r.metadata.name.as_deref() == Some("ic-bench-nodes-read"))
        .expect("the nodes-read ClusterRole");
    let mut read_grants: BTreeSet<(String, String, String)> = BTreeSet::new();
    for rule in nodes_read.rules.iter().flatten() {
        for g in rule.api_groups.iter().flatten() {
            for r in rule.resources.iter().flatten() {
                for v in &rule.verbs {
                    read_grants.insert((g.clone(), r.clone(), v.clone()));
                }
            }
        }
    }
    for r in &node_reads {
        let all: Vec<&str> = r.path.trim_matches('/').split('/').collect();
        let (group, resource, named) = match all[0] {
            "apis" => (all[1].to_string(), all[3].to_string(), all.len() > 4),
            _ => (String::new(), all[2].to_string(), all.len() > 3),
        };
        let verb = if named { "get" } else { "list" };
        assert!(
            read_grants.contains(&(group.clone(), resource.clone(), verb.to_string())),
            "ic-bench-nodes-read lacks {verb} on {group}/{resource}: {}",
            r.line()
        );
    }
    assert!(
        node_reads.iter().any(|r| r.path.contains("/resourceslices")),
        "DRA node targets read their node's slices"
    );
    let used: BTreeSet<_> = requests
        .iter()
        .map(|r| needed(&r.method, &r.path, r.is_watch()))
        .collect();
    let grants = granted(pair_role(&p));
    let missing: Vec<_> = used.difference(&grants).collect();
    assert!(
        missing.is_empty(),
        "the Role lacks {missing:?}; requests: {:#?}",
        requests.iter().map(|r| r.line()).collect::<Vec<_>>()
    );
    let unused: Vec<_> = grants.difference(&used).collect();
    assert!(
        unused.is_empty(),
        "the Role grants {unused:?}, which neither pair nor gc ever calls"
    );
}

/// The nightly sweep's script, run by `sh` with `/results` moved to a temp dir and `ic-bench`
/// replaced by a stub that records its arguments: what does a night run, given what the last
/// night left?
fn nightly_run(existing: Option<&str>) -> (String, Vec<String>) {
    let p = parse_all();
    let pod = p.cron_jobs[0]
        .spec
        .job_template
        .spec
        .as_ref()
        .unwrap()
        .template
        .spec
        .as_ref()
        .unwrap();
    let cmd = pod.containers[0].command.as_ref().unwrap();
    assert_eq!(&cmd[..2], ["sh", "-c"]);
    let dir = tempfile::tempdir().unwrap();
    let results = dir.path().join("results");
    std::fs::create_dir(&results).unwrap();
    let bin = dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    let stub = bin.join("ic-bench");
    std::fs::write(
        &stub,
        format!("#!/bin/sh\necho \"$@\" > {}/args\n", dir.path().display()),
    )
    .unwrap();
    std::fs::set_permissions(&stub, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    if let Some(text) = existing {
        std::fs::write(results.join("sweep-current.json"), text).unwrap();
    }
    let script = cmd[2].replace("/results", results.to_str().unwrap());
    let path = format!("{}:{}", bin.display(), std::env::var("PATH").unwrap_or_default());
    let out = std::process::Command::new("sh")
        .args(["-c", &script])
        .env("PATH", path)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    let args = std::fs::read_to_string(dir.path().join("args"))
        .unwrap()
        .replace(results.to_str().unwrap(), "/results");
    let mut files: Vec<String> = std::fs::read_dir(&results)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    (args.trim().to_string(), files)
}

#[test]
fn the_nightly_sweep_resumes_a_killed_night_and_archives_a_finished_one() {
    let file = |complete: bool| {
        format!(
            "{{\n  \"schema\": \"ic-bench.sweep/v1\",\n  \"sweep_id\": \"swab12cd\",\n  \"complete\": {complete},\n  \"pairs\": []\n}}\n"
        )
    };
    // First night: nothing there, a new sweep at the stable path.
    let (args, _) = nightly_run(None);
    assert!(args.starts_with("sweep -l "), "{args}");
    assert!(args.contains("--results /results/sweep-current.json"), "{args}");
    assert!(
        args.ends_with("--history /results/history.db --baseline last:7"),
        "every night recorded: {args}"
    );
    // The night before was killed: its incomplete file is continued, not restarted.
    let (args, files) = nightly_run(Some(&file(false)));
    assert!(args.starts_with("sweep --resume /results/sweep-current.json"), "{args}");
    assert!(!args.contains("--results"), "{args}");
    assert!(
        args.ends_with("--history /results/history.db --baseline last:7"),
        "{args}"
    );
    assert_eq!(files, ["sweep-current.json"]);
    // The night before finished: archived under its sweep id, a new sweep starts.
    let (args, files) = nightly_run(Some(&file(true)));
    assert!(args.contains("--results /results/sweep-current.json"), "{args}");
    assert_eq!(files, ["sweep-swab12cd.json"]);
}

/// The preflight examples (docs/kubernetes.md): the llm-d one parses strictly into the Kubernetes
/// types, the decode sidecar is a native sidecar on the port the Service and the prefill's
/// address name, both sides take the token from one Secret, and the prefill's command is one this
/// build accepts (run against an address nobody serves: "not known", exit 2, not a usage error).
/// The Dynamo one carries the same two containers in its workers' extraPodSpec.
#[test]
fn the_preflight_examples_fit_together_and_their_command_runs() {
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::{Container, Service};
    let dir = manifests_dir().join("examples");
    let text = std::fs::read_to_string(dir.join("preflight-llm-d.yaml")).unwrap();
    let docs = icb_kube::yaml::documents(&text).unwrap();
    let service: Service = strict!(Service, &docs[0], "preflight-llm-d.yaml");
    let decode: Deployment = strict!(Deployment, &docs[1], "preflight-llm-d.yaml");
    let prefill: Deployment = strict!(Deployment, &docs[2], "preflight-llm-d.yaml");
    let init = |d: &Deployment| -> Container {
        d.spec.template.spec.as_ref().unwrap().init_containers.as_ref().unwrap()[0].clone()
    };
    let (sidecar, check) = (init(&decode), init(&prefill));
    assert_eq!(sidecar.restart_policy.as_deref(), Some("Always"), "a native sidecar");
    assert_eq!(
        check.restart_policy, None,
        "a plain init container: the engine waits for it"
    );
    let port = service.spec.as_ref().unwrap().ports.as_ref().unwrap()[0].port;
    let sidecar_cmd = sidecar.command.unwrap().join(" ");
    assert!(
        sidecar_cmd.ends_with(&format!("--listen 0.0.0.0:{port}")),
        "{sidecar_cmd}"
    );
    let service_name = service.metadata.name.unwrap();
    let cmd = check.command.unwrap();
    assert_eq!(&cmd[..4], ["ic-bench", "connect", "--within", "10s"]);
    let address = format!("{service_name}:{port}");
    assert!(cmd.contains(&address), "{cmd:?}");
    for c in [&sidecar.env, &check.env] {
        let token = &c.as_ref().unwrap()[0];
        assert_eq!(token.name, "IC_BENCH_TOKEN");
        let from = token.value_from.as_ref().unwrap().secret_key_ref.as_ref().unwrap();
        assert_eq!((from.name.as_str(), from.key.as_str()), ("ic-bench-preflight", "token"));
    }
    // This build accepts the command: against an address nobody serves it is "not known".
    let nobody = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        format!("127.0.0.1:{}", l.local_addr().unwrap().port())
    };
    let args: Vec<String> = cmd[1..]
        .iter()
        .map(|a| if *a == address { nobody.clone() } else { a.clone() })
        .map(|a| if a == "10s" { "2s".to_string() } else { a })
        .collect();
    let out = std::process::Command::new(support::BIN)
        .args(&args)
        .env("IC_BENCH_TOKEN", "example-token-0123456789")
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("cannot reach ic-bench serve"), "{err}");

    let dynamo = std::fs::read_to_string(dir.join("preflight-dynamo.yaml")).unwrap();
    let dgd = &icb_kube::yaml::documents(&dynamo).unwrap()[0];
    assert_eq!(dgd["kind"], "DynamoGraphDeployment");
    let inits = |service: &str| dgd["spec"]["services"][service]["extraPodSpec"]["initContainers"][0].clone();
    assert_eq!(inits("VllmDecodeWorker")["restartPolicy"], "Always");
    assert_eq!(
        inits("VllmDecodeWorker")["command"].as_array().unwrap().last().unwrap(),
        &format!("0.0.0.0:{port}")
    );
    let prefill_init = inits("VllmPrefillWorker");
    let dynamo_cmd: Vec<&str> = prefill_init["command"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    assert_eq!(dynamo_cmd.len(), cmd.len(), "the same check: {dynamo_cmd:?}");
    assert_eq!(&dynamo_cmd[..4], ["ic-bench", "connect", "--within", "10s"]);
}
