//! icb-recipe reads deployment recipes — DynamoGraphDeployment (v1alpha1 and v1beta1), KServe
//! LLMInferenceService, llm-d DisaggregatedSet, Deployment/StatefulSet/Job/Pod, LeaderWorkerSet,
//! provider overlay profiles, kustomizations and Helm charts — and says, before any traffic flows,
//! whether their disaggregated-serving transport settings can be trusted. It is the engine behind
//! `ic-bench probe env PATH...`.
//!
//! The pipeline is `load_inputs` (files, directories, stdin → YAML documents; Helm charts through
//! `helm template`) → `split` (a SET of recipes, each with only its own overlays, patches,
//! ConfigMaps and Secrets; see [`set`]) → per recipe `resolve`
//! (effective env, devices, security context, /dev/shm, engine args per role, across every
//! layer; see [`resolve`] for the precedence) → `check` (the probe rules, values not presence,
//! secrets masked) → one `ProbeReport` with a line per recipe and the worst verdict. `transport_env` hands the node probe the effective
//! `UCX_NET_DEVICES` / `NCCL_IB_HCA` / `UCX_TLS` to cross-check against a node.
#![forbid(unsafe_code)]

mod claims;
mod configmaps;
mod engine;
mod error;
mod kinds;
mod kserve;
mod load;
mod mask;
mod model;
mod params;
mod patch;
mod podspec;
mod render;
mod resolve;
mod roles;
pub mod rules;
pub mod set;
mod shell;
mod yaml;

pub use error::RecipeError;
pub use load::{Document, Input, MAX_INPUT_BYTES, load_inputs, parse_bytes};
pub use mask::{display_value, is_secret_name, looks_like_token};
pub use model::{
    ClaimSource, EngineAllocator, EngineArgs, EnvFrom, EnvValue, EnvVar, Placement, Resources, Role, RoleEnv,
};
pub use podspec::{is_rdma_resource, parse_quantity};
pub use render::{find_binary, is_kustomization};
pub use resolve::{Resolution, resolve};
pub use roles::{EngineRole, RecipeRoles, RoleError};

/// How a role's engine allocates its KV cache: `vmm` where the engine's own allocator holds it
/// (vLLM `--enable-sleep-mode`, SGLang `--enable-memory-saver`: `cuMemCreate`), else as its
/// PyTorch allocator setting (`PYTORCH_ALLOC_CONF`, else `PYTORCH_CUDA_ALLOC_CONF`) says: `vmm`
/// for `expandable_segments:True`, `pool` for `backend:cudaMallocAsync`, `legacy` otherwise
/// (also where the variable is unset or its value is not in the inputs).
pub fn role_cuda_alloc(role: &RoleEnv) -> icb_core::CudaAllocMode {
    rules::alloc::role_alloc_mode(role).map_or(icb_core::CudaAllocMode::Legacy, |(mode, _)| mode)
}
pub use rules::check;
pub use set::{Recipe, RecipeSet, split};
pub use yaml::{Kind as YamlKind, Node as YamlNode};

use icb_core::checks::{ProbeReport, RecipeVerdict, ResolvedVar, RoleTransportVars};
use icb_core::model::Status;
use std::collections::BTreeMap;

/// What `probe env` is asked besides the recipes.
#[derive(Debug, Clone, Default)]
pub struct EnvOptions {
    /// Provider overlays / patches to apply to every recipe (`--overlay FILE`).
    pub overlays: Vec<Input>,
    /// Values files for the Helm charts among the inputs (`-f/--values FILE`).
    pub helm_values: Vec<std::path::PathBuf>,
}

/// Loads, resolves and checks the inputs: the whole of `ic-bench probe env`.
pub fn probe_env(inputs: &[Input]) -> Result<ProbeReport, RecipeError> {
    probe_env_with(inputs, &EnvOptions::default())
}

/// One recipe resolved and checked.
struct Judged {
    recipe: Recipe,
    res: Resolution,
    checks: Vec<icb_core::checks::Check>,
}

/// `probe env` with options: every recipe of the inputs is checked with its own inputs only,
/// and the report rolls them up (worst verdict, one line per recipe).
pub fn probe_env_with(inputs: &[Input], opts: &EnvOptions) -> Result<ProbeReport, RecipeError> {
    probe_env_and_roles(inputs, opts).map(|(report, _)| report)
}

/// `probe env` and the engine roles it resolved, from one read of the inputs (the gate needs
/// both: the findings, and the roles its bench pods and node probes are modelled on).
pub fn probe_env_and_roles(inputs: &[Input], opts: &EnvOptions) -> Result<(ProbeReport, RecipeRoles), RecipeError> {
    let set = load_set(inputs, opts)?;
    let unused = set.unused_overlays.clone();
    let unused_patches = set.unused_patches.clone();
    let judged = judge(set);
    let target = inputs.iter().map(Input::label).collect::<Vec<_>>().join(" ");
    let mut checks = Vec::new();
    let mut verdicts = Vec::new();
    let mut roles = Vec::new();
    let mut vars = Vec::new();
    for j in &judged {
        let own = ProbeReport::new("env", &j.recipe.name, j.checks.clone(), Vec::new());
        let mut sources: Vec<String> = Vec::new();
        for f in j.recipe.docs.iter().map(|d| &d.source).chain(j.recipe.files.iter()) {
            if !sources.iter().any(|s| render::same_file(s) == render::same_file(f)) {
                sources.push(f.clone());
            }
        }
        verdicts.push(RecipeVerdict {
            recipe: j.res.mask(&j.recipe.name),
            sources: sources.iter().map(|s| j.res.mask(s)).collect(),
            status: own.status,
            verdict: own.verdict,
            counts: own.counts,
        });
        checks.extend(j.checks.iter().cloned());
        roles.extend(transport_env(&j.res));
        vars.extend(role_vars(&j.res));
    }
    let next = next_steps(inputs, &judged, &roles, &unused, &unused_patches);
    let mut report = ProbeReport::new("env", &target, checks, next);
    if verdicts.len() > 1 {
        let failing: Vec<&str> = verdicts
            .iter()
            .filter(|v| v.status == Status::Fail)
            .map(|v| v.recipe.as_str())
            .collect();
        if !failing.is_empty() {
            report.verdict = format!(
                "{} of {} recipes fail ({}); {}",
                failing.len(),
                verdicts.len(),
                failing.join(", "),
                report.verdict
            );
        } else {
            report.verdict = format!("all {} recipes: {}", verdicts.len(), report.verdict);
        }
        report.recipes = verdicts;
    }
    report.transport_vars = vars;
    let engine_roles = judged
        .iter()
        .flat_map(|j| {
            let envs = j.res.roles.iter().filter(|r| r.role.is_engine()).cloned();
            envs.zip(transport_env(&j.res))
                .map(|(env, transport)| EngineRole { env, transport })
        })
        .collect();
    Ok((
        report,
        RecipeRoles {
            roles: engine_roles,
            label: target,
        },
    ))
}

/// The report's next steps: the node probe for a single recipe, and the overlays and patches
/// found but not applied (they apply only when named or referenced).
fn next_steps(
    inputs: &[Input],
    judged: &[Judged],
    roles: &[TransportEnv],
    unused: &[String],
    unused_patches: &[String],
) -> Vec<String> {
    let mut next: Vec<String> = if judged.len() == 1 {
        node_next_step(inputs, roles).into_iter().collect()
    } else {
        Vec::new()
    };
    next.extend(unused.iter().map(|o| {
        format!(
            "provider overlay {o} was found but not applied (overlays apply only when named): ic-bench probe env RECIPE --overlay {}",
            shell_word(o)
        )
    }));
    next.extend(unused_patches.iter().map(|p| {
        format!("partial document {p} was found but not applied (a patch applies only when a kustomization references it or it is named): ic-bench probe env RECIPE --overlay FILE")
    }));
    next
}

/// Loads the inputs, refuses what holds no recipe, and splits the rest into recipes.
fn load_set(inputs: &[Input], opts: &EnvOptions) -> Result<RecipeSet, RecipeError> {
    check_helm_values(inputs, &opts.helm_values)?;
    let docs = load_recipes(inputs, &opts.helm_values)?;
    let overlays = if opts.overlays.is_empty() {
        Vec::new()
    } else {
        load_inputs(&opts.overlays)?
    };
    for o in overlays.iter().filter(|o| o.root.is_map()) {
        let usable = resolve::is_overlay(&o.root) || (o.kind().is_some() && patch::is_partial(&o.root));
        if !usable {
            return Err(RecipeError::NeedsRender {
                what: format!("--overlay {}", o.source),
                how: "not a provider overlay (provider/env/device/securityContext keys) or a partial patch of a recipe object; pass the overlay profile".into(),
            });
        }
    }
    if let Some(u) = docs.iter().chain(overlays.iter()).find_map(params::find) {
        return Err(RecipeError::NeedsRender {
            what: u.location,
            how: format!(
                "`{}` at {} is an unresolved template parameter, not a value: render the profile or template with its parameters first and pass the result",
                u.text, u.path
            ),
        });
    }
    let set = split(&docs, &overlays);
    if let Some(first) = set.missing_bases.first() {
        let more = match set.missing_bases.len() {
            1 => String::new(),
            n => format!(" and {} more", n - 1),
        };
        return Err(RecipeError::NeedsRender {
            what: first.clone(),
            how: format!(
                "base missing{more}: render it first (`kubectl kustomize DIR > rendered.yaml` where the base is present) and pass rendered.yaml, or pass the tree that holds the base"
            ),
        });
    }
    if set.recipes.is_empty() {
        let seen = if set.unsupported.is_empty() {
            let mut kinds: Vec<String> = Vec::new();
            for d in &docs {
                let k = d.kind().unwrap_or("kind-less document").to_string();
                if !kinds.contains(&k) {
                    kinds.push(k);
                }
            }
            kinds.join(", ")
        } else {
            set.unsupported.join(", ")
        };
        return Err(RecipeError::Unsupported {
            inputs: inputs.iter().map(Input::label).collect::<Vec<_>>().join(" "),
            seen,
        });
    }
    Ok(set)
}

/// Resolves and checks every recipe. A recipe with no engine role is dropped when others have
/// one (a benchmark Job beside a deployment is not a recipe), and kept (it fails) otherwise.
fn judge(set: RecipeSet) -> Vec<Judged> {
    // Every recipe masks every Secret of the inputs: their values are read once, not per recipe.
    let secrets = resolve::secrets_masker(&set.secrets);
    let mut judged: Vec<Judged> = set
        .recipes
        .into_iter()
        .map(|recipe| {
            let mut res = resolve(&recipe.docs);
            res.notes.extend(recipe.notes.iter().cloned());
            res.remember_secrets(&secrets);
            let checks = check(&res);
            Judged { recipe, res, checks }
        })
        .collect();
    if judged.iter().any(|j| j.res.roles.iter().any(|r| r.role.is_engine())) {
        judged.retain(|j| j.res.roles.iter().any(|r| r.role.is_engine()));
    }
    judged
}

/// `-f/--values` files must be regular files, and there must be a chart directory to render.
fn check_helm_values(inputs: &[Input], values: &[std::path::PathBuf]) -> Result<(), RecipeError> {
    for v in values {
        let meta = std::fs::metadata(v).map_err(|source| RecipeError::Io {
            path: v.clone(),
            source,
        })?;
        if !meta.is_file() {
            return Err(RecipeError::NotRegular { path: v.clone() });
        }
    }
    let chart = inputs
        .iter()
        .any(|i| matches!(i, Input::Path(p) if p.join("Chart.yaml").is_file()));
    if !values.is_empty() && !chart {
        return Err(RecipeError::NeedsRender {
            what: format!("--values {}", values[0].display()),
            how: "values apply to a Helm chart: pass the chart directory (the folder holding Chart.yaml) as PATH"
                .into(),
        });
    }
    Ok(())
}

/// Per role, the transport variables it resolved, where each came from (values masked).
fn role_vars(res: &Resolution) -> Vec<RoleTransportVars> {
    res.roles
        .iter()
        .filter(|r| r.role.is_engine())
        .map(|r| RoleTransportVars {
            scope: res.mask(&r.scope()),
            role: r.role.as_str().to_string(),
            vars: r
                .env
                .iter()
                .filter(|v| icb_core::fabric::is_pod_transport_env(&v.name))
                .map(|v| ResolvedVar {
                    name: v.name.clone(),
                    value: res.mask(&display_value(v)),
                    source: res.mask(&v.origin),
                })
                .collect(),
        })
        .collect()
}

/// Loads the inputs and refuses input in which no document is a recipe (empty stdin, YAML with
/// no `kind`): that is a wrong argument, not a recipe that failed its checks.
fn load_recipes(inputs: &[Input], helm_values: &[std::path::PathBuf]) -> Result<Vec<Document>, RecipeError> {
    let docs = load::load_inputs_with(inputs, helm_values)?;
    if !docs
        .iter()
        .any(|d| resolve::is_recipe_document(d) || is_kustomization(d))
    {
        if let Some(v) = docs.iter().find(|d| render::is_helm_values(d)) {
            return Err(RecipeError::NeedsRender {
                what: v.source.clone(),
                how: "values for a Helm chart, not a recipe: pass the chart with them (`ic-bench probe env CHART_DIR -f VALUES`) or render them (`helm template NAME CHART -f VALUES > rendered.yaml`) and pass the output".into(),
            });
        }
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
    let set = load_set(inputs, &EnvOptions::default())?;
    Ok(judge(set).iter().flat_map(|j| transport_env(&j.res)).collect())
}

/// Fuzzing entry point: parse, resolve and check arbitrary bytes. Must never panic.
pub fn fuzz_load(bytes: &[u8]) {
    if let Ok(docs) = parse_bytes("fuzz.yaml", bytes) {
        let res = resolve(&docs);
        let _ = check(&res);
        let _ = transport_env(&res);
        for recipe in split(&docs, &[]).recipes {
            let _ = check(&resolve(&recipe.docs));
        }
    }
}
