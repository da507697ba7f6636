//! icb-recipe reads deployment recipes — DynamoGraphDeployment (v1alpha1 and v1beta1),
//! Deployment/StatefulSet/Job/Pod, LeaderWorkerSet, provider overlay profiles and kustomize
//! patches — and says, before any traffic flows, whether their disaggregated-serving transport
//! settings can be trusted. It is the engine behind `ic-bench probe env PATH...`.
//!
//! The pipeline is `load_inputs` (files, directories, stdin → YAML documents) → `resolve`
//! (effective env, devices, security context, /dev/shm, engine args per role, across every
//! layer; see [`resolve`] for the precedence) → `check` (the probe rules, values not presence,
//! secrets masked) → `ProbeReport`. `transport_env` hands the node probe the effective
//! `UCX_NET_DEVICES` / `NCCL_IB_HCA` / `UCX_TLS` to cross-check against a node.
#![forbid(unsafe_code)]

mod engine;
mod error;
mod load;
mod mask;
mod model;
mod patch;
mod podspec;
mod resolve;
pub mod rules;
mod yaml;

pub use error::RecipeError;
pub use load::{Document, Input, MAX_INPUT_BYTES, load_inputs, parse_bytes};
pub use mask::{display_value, is_secret_name, looks_like_token};
pub use model::{EngineArgs, EnvFrom, EnvValue, EnvVar, Placement, Resources, Role, RoleEnv};
pub use podspec::{is_rdma_resource, parse_quantity};
pub use resolve::{Resolution, resolve};
pub use rules::check;
pub use yaml::{Kind as YamlKind, Node as YamlNode};

use icb_core::checks::ProbeReport;
use std::collections::BTreeMap;

/// Loads, resolves and checks the inputs: the whole of `ic-bench probe env`.
pub fn probe_env(inputs: &[Input]) -> Result<ProbeReport, RecipeError> {
    let docs = load_recipes(inputs)?;
    let res = resolve(&docs);
    let checks = check(&res);
    let target = inputs.iter().map(Input::label).collect::<Vec<_>>().join(" ");
    let next = node_next_step(inputs, &transport_env(&res)).into_iter().collect();
    Ok(ProbeReport::new("env", &target, checks, next))
}

/// Loads the inputs and refuses input in which no document is a recipe (empty stdin, YAML with
/// no `kind`): that is a wrong argument, not a recipe that failed its checks.
fn load_recipes(inputs: &[Input]) -> Result<Vec<Document>, RecipeError> {
    let docs = load_inputs(inputs)?;
    if !docs.iter().any(resolve::is_recipe_document) {
        return Err(RecipeError::NoRecipe {
            inputs: inputs.iter().map(Input::label).collect::<Vec<_>>().join(" "),
        });
    }
    Ok(docs)
}

/// The `probe node --recipe` command that works on these inputs, if one does: it re-reads the
/// files, so standard input and in-memory text cannot be named; roles whose transport
/// variables differ need `--role`, as `probe node` refuses to guess.
fn node_next_step(inputs: &[Input], roles: &[TransportEnv]) -> Option<String> {
    let first = roles.first()?;
    let mut paths = Vec::new();
    for i in inputs {
        match i {
            Input::Path(p) => paths.push(shell_word(&p.display().to_string())),
            Input::Stdin | Input::Text { .. } => return None,
        }
    }
    let mut cmd = format!("ic-bench probe node --recipe {}", paths.join(" --recipe "));
    if roles.iter().any(|r| r.vars != first.vars) {
        let pick = roles.iter().find(|r| r.role == Role::Prefill).unwrap_or(first);
        cmd.push_str(&format!(" --role {}", pick.role.as_str()));
    }
    Some(cmd)
}

/// A path as one shell word, quoted only when it needs to be.
fn shell_word(s: &str) -> String {
    let plain = !s.is_empty() && s.chars().all(|c| c.is_ascii_alphanumeric() || "/._-+:,=@%".contains(c));
    if plain {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// The transport variables of one role, for the node probe's `--recipe` cross-check.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TransportEnv {
    pub role: Role,
    /// Same text as the checks' scope: `decode (VllmDecodeWorker, deploy.yaml)`.
    pub scope: String,
    pub ucx_net_devices: Option<String>,
    pub nccl_ib_hca: Option<String>,
    pub ucx_tls: Option<String>,
    /// Every literal transport variable (transport libraries and GPU visibility: the fabric
    /// vocabulary's pod set, what `pair` copies), secret-looking ones masked.
    pub vars: BTreeMap<String, String>,
}

/// Effective transport variables of every engine role (prefill, decode, worker).
pub fn transport_env(res: &Resolution) -> Vec<TransportEnv> {
    res.roles
        .iter()
        .filter(|r| r.role.is_engine())
        .map(|r| {
            let lit = |n: &str| r.literal(n).map(|v| res.mask(v.trim()));
            let vars = r
                .env
                .iter()
                .filter(|v| icb_core::fabric::is_pod_transport_env(&v.name))
                .filter(|v| v.literal().is_some())
                .map(|v| (v.name.clone(), res.mask(&display_value(v))))
                .collect();
            TransportEnv {
                role: r.role.clone(),
                scope: res.mask(&r.scope()),
                ucx_net_devices: lit("UCX_NET_DEVICES"),
                nccl_ib_hca: lit("NCCL_IB_HCA"),
                ucx_tls: lit("UCX_TLS"),
                vars,
            }
        })
        .collect()
}

/// `transport_env` straight from inputs (what `probe node --recipe PATH` needs).
pub fn recipe_transport_env(inputs: &[Input]) -> Result<Vec<TransportEnv>, RecipeError> {
    let docs = load_recipes(inputs)?;
    Ok(transport_env(&resolve(&docs)))
}

/// Fuzzing entry point: parse, resolve and check arbitrary bytes. Must never panic.
pub fn fuzz_load(bytes: &[u8]) {
    if let Ok(docs) = parse_bytes("fuzz.yaml", bytes) {
        let res = resolve(&docs);
        let _ = check(&res);
        let _ = transport_env(&res);
    }
}
