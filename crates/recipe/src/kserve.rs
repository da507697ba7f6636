//! What KServe's controller runs for an `LLMInferenceService`: the spec is the merge of the
//! well-known configs KServe picks for the service's shape, then the user's `spec.baseRefs`
//! (`LLMInferenceServiceConfig` objects, in order), then the service's own `spec`, each a strategic
//! merge over the one before (kserve/kserve `pkg/controller/v1alpha2/llmisvc/config_merge.go`:
//! well-known refs by shape, "Append explicit base refs to override well know configs", then
//! `MergeSpecs(…, llmSvc.Spec)`).
//!
//! The well-known configs ship in kserve/kserve `config/llmisvcconfig/`; when the inputs hold one
//! (same name) it is used, otherwise the transport-relevant part of the shipped one is built in
//! here: the `main` container's capabilities, its memory-backed `/dev/shm` (`dshm`, 1Gi in the
//! single-node P/D templates, 8Gi in the data-parallel ones), and the entrypoint that, with
//! `KSERVE_INFER_ROCE=true`, exports `NCCL_IB_HCA`, `UCX_NET_DEVICES`, `NVSHMEM_HCA_LIST` and the
//! GID index from the node's sysfs (`${VAR:-…}`: a value set in the recipe wins).

use crate::load::{self, Document};
use crate::model::{EnvValue, EnvVar, RoleEnv};
use crate::patch::{Merged, strategic_merge};
use crate::yaml::{Kind, Node};

/// The kind holding reusable LLMInferenceService spec fragments.
pub const CONFIG_KIND: &str = "LLMInferenceServiceConfig";
/// KServe names its shipped configs with this prefix (`LLM_INFERENCE_SERVICE_CONFIG_PREFIX`).
const PREFIX: &str = "kserve-";

/// Variables the well-known entrypoint derives from sysfs when `KSERVE_INFER_ROCE=true`.
const DERIVED: &[&str] = &["NCCL_IB_HCA", "UCX_NET_DEVICES", "NVSHMEM_HCA_LIST"];
const DERIVED_GID: &[&str] = &["NCCL_IB_GID_INDEX", "UCX_IB_GID_INDEX", "NVSHMEM_IB_GID_INDEX"];

/// The entrypoint of the shipped P/D configs, reduced to what the checks read.
const ENTRYPOINT: &str = "# KServe well-known entrypoint: if KSERVE_INFER_ROCE=true, export NCCL_IB_HCA, UCX_NET_DEVICES, NVSHMEM_HCA_LIST and *_IB_GID_INDEX from /sys/class/infiniband (active RoCE v2 mlx5 ports)\nexec vllm serve /mnt/models \"$@\"";

/// The service spec as the controller merges it, and what went into it.
pub(crate) struct Effective {
    pub merged: Merged,
    /// `KServe well-known kserve-config-llm-decode-template (built in)`, `baseRef x (file:line)`.
    pub layers: Vec<String>,
    pub notes: Vec<String>,
}

/// A pod spec of the shipped configs at `indent`: the `main` container and its `dshm`.
fn pod_yaml(indent: usize, caps_add: &str, shm: &str) -> String {
    let pad = " ".repeat(indent);
    [
        "containers:".to_string(),
        "  - name: main".to_string(),
        format!("    command: [/bin/bash, -c, {ENTRYPOINT:?}, \"--\"]"),
        format!("    securityContext: {{capabilities: {{{caps_add}drop: [ALL]}}}}"),
        "    volumeMounts: [{name: dshm, mountPath: /dev/shm}]".to_string(),
        format!("volumes: [{{name: dshm, emptyDir: {{medium: Memory, sizeLimit: {shm}}}}}]"),
    ]
    .iter()
    .map(|l| format!("{pad}{l}\n"))
    .collect()
}

/// The shipped well-known config `suffix` (name without prefix), transport-relevant part only.
fn built_in(suffix: &str) -> Option<String> {
    let dp_caps = "add: [IPC_LOCK, SYS_RAWIO, NET_RAW], ";
    let text = match suffix {
        "config-llm-decode-template" => format!("spec:\n  template:\n{}", pod_yaml(4, "", "1Gi")),
        "config-llm-prefill-template" => format!("spec:\n  prefill:\n    template:\n{}", pod_yaml(6, "", "1Gi")),
        "config-llm-decode-worker-data-parallel" | "config-llm-worker-data-parallel" => {
            let pod = pod_yaml(4, dp_caps, "8Gi");
            format!("spec:\n  template:\n{pod}  worker:\n{pod}")
        }
        "config-llm-prefill-worker-data-parallel" => {
            let pod = pod_yaml(6, dp_caps, "8Gi");
            format!("spec:\n  prefill:\n    template:\n{pod}    worker:\n{pod}")
        }
        _ => return None,
    };
    Some(text)
}

/// The well-known configs KServe picks for this shape (user spec + baseRefs), in merge order.
fn well_known(user: &Node) -> Vec<&'static str> {
    let workers = |n: Option<&Node>| n.is_some_and(|n| n.get("worker").is_some());
    let pipeline = |n: Option<&Node>| {
        n.and_then(|n| n.path(&["parallelism", "pipeline"]))
            .and_then(Node::as_str)
            .and_then(|s| s.trim().parse::<u32>().ok())
            .is_some_and(|p| p > 1)
    };
    let prefill = user.get("prefill");
    let pick = |multi: bool, pp: bool, single: &'static str, dp: &'static str, ppn: &'static str| match (multi, pp) {
        (false, _) => single,
        (true, false) => dp,
        (true, true) => ppn,
    };
    let mut out = Vec::new();
    if prefill.is_some() {
        out.push(pick(
            workers(prefill),
            pipeline(prefill),
            "config-llm-prefill-template",
            "config-llm-prefill-worker-data-parallel",
            "config-llm-prefill-worker-pipeline-parallel",
        ));
        out.push(pick(
            workers(Some(user)),
            pipeline(Some(user)),
            "config-llm-decode-template",
            "config-llm-decode-worker-data-parallel",
            "config-llm-decode-worker-pipeline-parallel",
        ));
    } else if workers(Some(user)) {
        out.push(pick(
            true,
            pipeline(Some(user)),
            "",
            "config-llm-worker-data-parallel",
            "config-llm-worker-pipeline-parallel",
        ));
    }
    out
}

fn config_named<'a>(configs: &[&'a Merged], name: &str) -> Option<&'a Merged> {
    configs
        .iter()
        .rev()
        .find(|c| c.doc.kind() == Some(CONFIG_KIND) && c.doc.name() == Some(name))
        .copied()
}

/// The service merged over its well-known configs and baseRefs.
pub(crate) fn effective(m: &Merged, configs: &[&Merged]) -> Effective {
    let own = m
        .doc
        .root
        .get("spec")
        .cloned()
        .unwrap_or_else(|| Node::new(m.doc.root.line, Kind::Map(Vec::new())));
    let mut out = Effective {
        merged: m.clone(),
        layers: Vec::new(),
        notes: Vec::new(),
    };
    let mut user = Node::new(own.line, Kind::Map(Vec::new()));
    let mut user_layers = Vec::new();
    for r in own.get("baseRefs").map(Node::as_seq).unwrap_or_default() {
        let Some(name) = r.str_at("name") else { continue };
        match config_named(configs, name) {
            Some(c) => {
                if let Some(spec) = c.doc.root.get("spec") {
                    strategic_merge(&mut user, spec);
                }
                user_layers.push(format!("baseRef {name} ({})", c.doc.location()));
                push_source(&mut out.merged, &c.doc.source);
            }
            None => out.notes.push(format!(
                "{}:{}: baseRef `{name}` (an LLMInferenceServiceConfig) is not among the inputs: its settings are unknown; pass the file that defines it",
                m.doc.source, r.line
            )),
        }
    }
    strategic_merge(&mut user, &own);
    let mut spec = Node::new(own.line, Kind::Map(Vec::new()));
    for suffix in well_known(&user) {
        let name = format!("{PREFIX}{suffix}");
        if let Some(c) = config_named(configs, &name) {
            if let Some(s) = c.doc.root.get("spec") {
                strategic_merge(&mut spec, s);
            }
            out.layers
                .push(format!("KServe well-known {name} ({})", c.doc.location()));
            push_source(&mut out.merged, &c.doc.source);
        } else if let Some(s) = built_in(suffix).and_then(|t| parse(&name, &t)) {
            strategic_merge(&mut spec, &s);
            out.layers.push(format!(
                "KServe well-known {name} (built in: kserve/kserve config/llmisvcconfig/{suffix}.yaml)"
            ));
        }
    }
    strategic_merge(&mut spec, &user);
    out.layers.extend(user_layers);
    set_spec(&mut out.merged.doc, spec);
    out
}

fn parse(name: &str, text: &str) -> Option<Node> {
    let docs: Vec<Document> = load::parse_bytes(&format!("<{name}>"), text.as_bytes()).ok()?;
    docs.into_iter().next()?.root.get("spec").cloned()
}

fn push_source(m: &mut Merged, source: &str) {
    if !m.sources.iter().any(|s| s == source) {
        m.sources.push(source.to_string());
    }
}

fn set_spec(doc: &mut Document, spec: Node) {
    if let Kind::Map(entries) = &mut doc.root.kind {
        match entries.iter_mut().find(|(k, _)| k == "spec") {
            Some((_, v)) => *v = spec,
            None => entries.push(("spec".into(), spec)),
        }
    }
}

/// `KSERVE_INFER_ROCE=true` with the well-known entrypoint still in place: the HCA lists and GID
/// indices are derived in the pod at start, unless the recipe sets them.
pub(crate) fn derive_roce(role: &mut RoleEnv, entrypoint: Option<&Node>) {
    let runs_it = entrypoint.is_some_and(|c| {
        c.as_seq()
            .iter()
            .any(|a| a.as_str().is_some_and(|s| s.contains("KSERVE_INFER_ROCE")))
    });
    if !runs_it || role.literal("KSERVE_INFER_ROCE").map(str::trim) != Some("true") {
        return;
    }
    let origin = "KServe entrypoint (KSERVE_INFER_ROCE=true)".to_string();
    for name in DERIVED {
        if role.var(name).is_none() {
            role.set_var(EnvVar {
                name: (*name).to_string(),
                value: EnvValue::Derived {
                    by: origin.clone(),
                    what: "active RoCE v2 mlx5 HCAs (port 1) from /sys/class/infiniband".into(),
                },
                origin: origin.clone(),
                from_secret: false,
            });
        }
    }
    let preset = role.literal("NCCL_IB_GID_INDEX").map(str::to_string);
    for name in DERIVED_GID {
        if role.var(name).is_some() {
            continue;
        }
        let value = match &preset {
            Some(v) => EnvValue::Literal { value: v.clone() },
            None => EnvValue::Derived {
                by: origin.clone(),
                what: "the most common IPv4-mapped RoCE v2 GID index of those HCAs".into(),
            },
        };
        role.set_var(EnvVar {
            name: (*name).to_string(),
            value,
            origin: origin.clone(),
            from_secret: false,
        });
    }
    role.layers.push(origin);
}
