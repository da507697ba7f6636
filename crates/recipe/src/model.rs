//! What one worker role ends up with once every layer of a recipe is applied.

use serde::Serialize;
use std::collections::{BTreeMap, HashMap};

/// The part a pod plays in disaggregated serving.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Prefill,
    Decode,
    /// An aggregated or otherwise unspecified engine worker.
    Worker,
    Frontend,
    /// Anything else (planner, router sidecars, …): no transport checks apply.
    Other(String),
}

impl Role {
    pub fn as_str(&self) -> &str {
        match self {
            Role::Prefill => "prefill",
            Role::Decode => "decode",
            Role::Worker => "worker",
            Role::Frontend => "frontend",
            Role::Other(s) => s,
        }
    }

    /// Roles that move KV cache or run NCCL, so transport checks apply to them.
    pub fn is_engine(&self) -> bool {
        matches!(self, Role::Prefill | Role::Decode | Role::Worker)
    }

    pub(crate) fn from_word(word: &str) -> Option<Role> {
        match word.trim().to_ascii_lowercase().as_str() {
            "prefill" | "prefillworker" | "prefill-worker" | "prefill_worker" => Some(Role::Prefill),
            "decode" | "decoder" | "decodeworker" | "decode-worker" | "decode_worker" => Some(Role::Decode),
            "worker" | "main" | "aggregated" | "agg" => Some(Role::Worker),
            "frontend" | "router" | "epp" | "proxy" => Some(Role::Frontend),
            "" => None,
            other => Some(Role::Other(other.to_string())),
        }
    }
}

/// Where an env value comes from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum EnvValue {
    Literal {
        value: String,
    },
    /// `valueFrom.secretKeyRef`: the value is never known and never printed.
    Secret {
        name: String,
        key: String,
    },
    ConfigMap {
        name: String,
        key: String,
    },
    /// `fieldRef` / `resourceFieldRef`: filled in by the kubelet.
    Field {
        path: String,
    },
    /// Computed by the container's shell at start (`A=$(…)`): only known in the pod.
    Computed {
        script: String,
    },
    /// Derived from the node when the pod starts by the platform's own entrypoint (KServe's
    /// `KSERVE_INFER_ROCE=true`): by design not in the recipe, so not "unresolved".
    Derived {
        /// What derives it, e.g. `KServe entrypoint (KSERVE_INFER_ROCE=true)`.
        by: String,
        /// What it becomes, e.g. `active RoCE v2 mlx5 HCAs (port 1) from sysfs`.
        what: String,
    },
    /// `valueFrom` of a shape this reader does not know.
    Unknown,
}

/// One effective variable.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EnvVar {
    pub name: String,
    pub value: EnvValue,
    /// The layer and place that set it last, e.g. `spec.services.decode.envs (deploy.yaml:42)`.
    pub origin: String,
    /// Read from a Secret in the inputs: known to the checks, printed only as `***`.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub from_secret: bool,
}

impl EnvVar {
    pub fn literal(&self) -> Option<&str> {
        match &self.value {
            EnvValue::Literal { value } => Some(value),
            _ => None,
        }
    }
}

/// `envFrom` (or DGD `envFromSecret`): every key is unknown to a recipe reader.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EnvFrom {
    /// `secret` or `configMap`.
    pub kind: String,
    pub name: String,
    pub origin: String,
}

/// Requested devices and limits.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Resources {
    /// GPUs requested (any GPU resource of the fabric vocabulary: `nvidia.com/gpu`, MIG slices,
    /// `amd.com/gpu`, `gpu.intel.com/*`, or DGD `gpu`).
    pub gpus: Option<String>,
    /// Every extended resource that gives the pod an RDMA-capable NIC, with its count.
    pub rdma: BTreeMap<String, String>,
    /// `resourceClaims` names (DRA: NICs, ComputeDomains/IMEX channels).
    pub claims: Vec<String>,
    /// Resource claim templates referenced (used to tell whether two roles share a ComputeDomain).
    pub claim_templates: Vec<String>,
    /// Claims that are MNNVL ComputeDomain (IMEX) channels: an NVLink fabric, not an RDMA NIC.
    pub domain_claims: Vec<String>,
    /// Claims for accelerators (GPU/XPU devices through DRA): neither a NIC nor a ComputeDomain.
    pub gpu_claims: Vec<String>,
    /// `cuda`, `rocm` or `xpu`, from the accelerator requested.
    pub accelerator: Option<String>,
    /// Claim name → template name, from the pod's `resourceClaims`.
    #[serde(skip)]
    pub(crate) template_of: BTreeMap<String, String>,
    /// Claim name → the existing ResourceClaim it names (`resourceClaimName`: shared, not made).
    #[serde(skip)]
    pub(crate) shared_claim_of: BTreeMap<String, String>,
    /// Claim names the main container lists in `resources.claims` (DGD: the service's).
    #[serde(skip)]
    pub(crate) container_claims: Vec<String>,
    /// Claim names the pod spec's `resourceClaims` defines.
    #[serde(skip)]
    pub(crate) pod_claims: Vec<String>,
}

impl Resources {
    pub fn has_efa(&self) -> bool {
        self.rdma.keys().any(|k| {
            icb_core::fabric::resource_class(k)
                == icb_core::fabric::ResourceClass::Rdma {
                    kind: icb_core::fabric::RdmaKind::Efa,
                }
        })
    }

    /// Each claim the main container uses, with where the pod gets it from; `None` when the pod
    /// spec defines no such claim (or defines it with neither a template nor a claim name).
    pub fn engine_claims(&self) -> Vec<(String, Option<ClaimSource>)> {
        self.container_claims
            .iter()
            .map(|name| {
                let source = match (self.shared_claim_of.get(name), self.template_of.get(name)) {
                    _ if !self.pod_claims.contains(name) => None,
                    (Some(claim), _) => Some(ClaimSource::Claim(claim.clone())),
                    (None, Some(template)) => Some(ClaimSource::Template(template.clone())),
                    (None, None) => None,
                };
                (name.clone(), source)
            })
            .collect()
    }

    /// Claims that are neither ComputeDomain channels nor accelerators, so presumably a NIC (DRA).
    pub fn nic_claims(&self) -> impl Iterator<Item = &String> {
        self.claims
            .iter()
            .filter(|c| !self.domain_claims.contains(c) && !self.gpu_claims.contains(c))
    }
}

/// Where a pod's claim comes from (`spec.resourceClaims[]`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ClaimSource {
    /// `resourceClaimTemplateName`: each pod gets a fresh claim made from this template.
    Template(String),
    /// `resourceClaimName`: every pod naming it shares this existing claim.
    Claim(String),
}

/// Engine arguments that decide the KV transport.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct EngineArgs {
    /// `vllm`, `sglang`, `trtllm` when recognisable.
    pub framework: Option<String>,
    /// True when launched through Dynamo (`python -m dynamo.*`).
    pub dynamo: bool,
    /// The KV backend a platform injects when the recipe names none (KServe's LLMInferenceService
    /// P/D configs start vLLM with NixlConnector), said in the report.
    pub platform_default: Option<String>,
    /// vLLM `kv_connector` from `--kv-transfer-config`.
    pub kv_connector: Option<String>,
    /// vLLM `kv_role` from `--kv-transfer-config`.
    pub kv_role: Option<String>,
    /// NIXL backends named in `--kv-transfer-config` (top level or `kv_connector_extra_config`).
    pub nixl_backends: Vec<String>,
    /// SGLang `--disaggregation-transfer-backend` (on the command line or in its `--config` file).
    pub sglang_backend: Option<String>,
    /// SGLang `--config FILE`: options (the transfer backend among them) may be set there.
    pub config_file: Option<String>,
    /// TensorRT-LLM `cache_transceiver_config.backend` (args or a ConfigMap).
    pub trt_backend: Option<String>,
    /// `--disaggregation-mode`, `--is-prefill-worker`, … read as a role.
    pub role_hint: Option<Role>,
    /// Problems reading the arguments (e.g. `--kv-transfer-config` that is not JSON).
    pub problems: Vec<String>,
    /// The served model: `vllm serve MODEL`, `--model`, SGLang `--model-path`, `trtllm-serve
    /// MODEL` (for `gate --kv-shape`).
    pub model: Option<String>,
    /// `--tensor-parallel-size`, `--tp`, `--tp-size` (SGLang, TensorRT-LLM).
    pub tensor_parallel: Option<u32>,
    /// Tokens per KV block: vLLM `--block-size`, SGLang `--page-size`, TensorRT-LLM
    /// `tokens_per_block`.
    pub page_size: Option<u32>,
    /// The engine's own KV-cache allocator, where a flag turns it on (issue 39).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allocator: Option<EngineAllocator>,
}

/// An engine flag that moves the KV cache into the engine's own allocator, which maps it with
/// the CUDA VMM API (`cuMemCreate`): memory legacy CUDA IPC cannot export, as with PyTorch's
/// `expandable_segments:True`. Both were read in the engines' sources (2026-12): neither asks
/// `cuMemCreate` for a shareable handle type (`requestedHandleTypes` left at none).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EngineAllocator {
    /// vLLM `--enable-sleep-mode`: `CuMemAllocator` (`csrc/cumem_allocator.cpp`) holds the
    /// weights and the KV cache (`use_memory_pool(tag="kv_cache")`).
    VllmSleepMode,
    /// SGLang `--enable-memory-saver`: torch_memory_saver's `cu_mem_create` for the KV pools
    /// (`memory_saver_adapter.region(GPU_MEMORY_TYPE_KV_CACHE)`).
    SglangMemorySaver,
}

impl EngineAllocator {
    /// The flag as an operator writes it.
    pub fn flag(self) -> &'static str {
        match self {
            EngineAllocator::VllmSleepMode => "--enable-sleep-mode",
            EngineAllocator::SglangMemorySaver => "--enable-memory-saver",
        }
    }

    /// What allocates the KV cache under it.
    pub fn allocator(self) -> &'static str {
        match self {
            EngineAllocator::VllmSleepMode => "vLLM's CuMemAllocator",
            EngineAllocator::SglangMemorySaver => "SGLang's torch_memory_saver",
        }
    }
}

/// Where the pods may land.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Placement {
    pub node_selector: BTreeMap<String, String>,
    /// Required node-affinity terms, each rendered as `key op [values]`, sorted.
    pub affinity: Vec<String>,
    /// A provider overlay's `place:` advice, if any.
    pub advice: Option<String>,
    /// Required pod-affinity terms (`podAffinity <topologyKey> with pods <labels>`).
    pub pod_affinity: Vec<String>,
}

impl Placement {
    pub fn is_constrained(&self) -> bool {
        !self.node_selector.is_empty() || !self.affinity.is_empty() || !self.pod_affinity.is_empty()
    }
}

/// The effective settings of one role of one workload.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct RoleEnv {
    pub role: Role,
    /// Service / component / workload name.
    pub component: String,
    /// `Kind/name` of the object (plus `leader`/`worker` for LeaderWorkerSet templates).
    pub workload: String,
    /// Roles in one group belong to one deployment: one DGD, or plain workloads of one namespace.
    pub group: String,
    /// File(s) that contributed, in layer order.
    pub sources: Vec<String>,
    /// Effective variables, in the order a container would see them.
    pub env: Vec<EnvVar>,
    #[serde(skip)]
    env_index: HashMap<String, usize>,
    pub env_from: Vec<EnvFrom>,
    /// Layers applied, lowest first (documents the precedence that was used).
    pub layers: Vec<String>,
    pub resources: Resources,
    pub privileged: bool,
    pub capabilities: Vec<String>,
    pub host_ipc: bool,
    pub host_pid: bool,
    pub host_network: bool,
    /// The node's `/dev/infiniband` is mounted into the main container (hostPath).
    pub host_infiniband: bool,
    /// /dev/shm size as written, and in bytes when parseable. `None` when nothing sets it.
    pub shm: Option<(String, Option<u64>)>,
    /// Where the shm setting came from (`sharedMemory.size`, `emptyDir`, `hostIPC`).
    pub shm_origin: Option<String>,
    pub image: Option<String>,
    pub engine: EngineArgs,
    pub placement: Placement,
    pub replicas: Option<String>,
    /// DGD `multinode.nodeCount` or LeaderWorkerSet `size`.
    pub node_count: Option<u32>,
    /// Provider fabric named by an overlay (`ib`, `roce`, `efa`), if any.
    pub fabric: Option<String>,
    /// Overlay `kv_backend`, if any.
    pub overlay_backend: Option<String>,
    /// Variables the container's shell sets (`export A=B`, `A=B cmd`): applied last, since the
    /// script runs after the kubelet has set `env`.
    #[serde(skip)]
    pub(crate) shell_env: Vec<EnvVar>,
}

impl RoleEnv {
    pub(crate) fn new(role: Role, component: &str, workload: &str, group: &str, source: &str) -> Self {
        RoleEnv {
            role,
            component: component.to_string(),
            workload: workload.to_string(),
            group: group.to_string(),
            sources: vec![source.to_string()],
            env: Vec::new(),
            env_index: HashMap::new(),
            env_from: Vec::new(),
            layers: Vec::new(),
            resources: Resources::default(),
            privileged: false,
            capabilities: Vec::new(),
            host_ipc: false,
            host_pid: false,
            host_network: false,
            host_infiniband: false,
            shm: None,
            shm_origin: None,
            image: None,
            engine: EngineArgs::default(),
            placement: Placement::default(),
            replicas: None,
            node_count: None,
            fabric: None,
            overlay_backend: None,
            shell_env: Vec::new(),
        }
    }

    pub fn var(&self, name: &str) -> Option<&EnvVar> {
        self.env.iter().find(|v| v.name == name)
    }

    /// The literal value of a variable, if set to a literal.
    pub fn literal(&self, name: &str) -> Option<&str> {
        self.var(name).and_then(EnvVar::literal)
    }

    /// `prefill (VllmPrefillWorker, deploy.yaml)`: the scope used in checks.
    pub fn scope(&self) -> String {
        format!(
            "{} ({}, {})",
            self.role.as_str(),
            self.component,
            self.sources.join("+")
        )
    }

    /// Sets a variable; a later layer replaces the earlier value where it stood.
    pub(crate) fn set_var(&mut self, var: EnvVar) {
        // The index keeps this O(1): env lists come from untrusted input.
        match self.env_index.get(&var.name) {
            Some(&i) if i < self.env.len() && self.env[i].name == var.name => self.env[i] = var,
            _ => {
                self.env_index.insert(var.name.clone(), self.env.len());
                self.env.push(var);
            }
        }
    }

    pub(crate) fn delete_var(&mut self, name: &str) {
        if let Some(i) = self.env_index.remove(name).filter(|&i| i < self.env.len()) {
            self.env.remove(i);
            for (j, v) in self.env.iter().enumerate().skip(i) {
                self.env_index.insert(v.name.clone(), j);
            }
        }
    }

    /// Rebuilds the name index after `env` was edited directly.
    pub(crate) fn reindex(&mut self) {
        self.env_index = self.env.iter().enumerate().map(|(i, v)| (v.name.clone(), i)).collect();
    }

    /// Any device that gives the pod an RDMA NIC (extended resource, or a DRA claim that is
    /// not a ComputeDomain channel).
    pub fn requests_rdma(&self) -> bool {
        !self.resources.rdma.is_empty() || self.resources.nic_claims().next().is_some()
    }

    /// RDMA verbs devices reach the container without a device request: the node's
    /// `/dev/infiniband` mounted, or a privileged container (which sees every host device).
    pub fn host_rdma(&self) -> bool {
        self.host_infiniband || self.privileged
    }

    /// The pod will do RDMA: a device request, or host devices plus the host network.
    pub fn uses_rdma(&self) -> bool {
        self.requests_rdma() || self.host_infiniband || (self.privileged && self.host_network)
    }

    /// Claims an MNNVL ComputeDomain channel (GB200-class NVLink across nodes).
    pub fn uses_compute_domain(&self) -> bool {
        !self.resources.domain_claims.is_empty()
    }

    pub fn is_efa(&self) -> bool {
        self.resources.has_efa()
            || self
                .literal("FI_PROVIDER")
                .is_some_and(|v| v.trim().eq_ignore_ascii_case("efa"))
            || self.fabric.as_deref() == Some("efa")
    }

    pub fn has_capability(&self, cap: &str) -> bool {
        icb_core::fabric::privilege::grants_capability(&self.capabilities, cap)
    }
}
