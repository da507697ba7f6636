//! The report's frame: who ran, where (placement, endpoints, peers), and what was found
//! about each side's UCX, NIXL and CUDA.

use super::*;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;

/// The whole outcome of one `ic-bench pair` run (also what `ic-bench connect -o json` prints).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairReport {
    pub schema: String,
    pub tool: ToolInfo,
    /// RFC 3339 UTC time the run started.
    pub started_at: String,
    pub duration_s: f64,
    pub placement: Placement,
    /// The decode side: it runs `ic-bench serve` and owns the target buffers.
    pub server: PeerInfo,
    /// The prefill side: it runs `ic-bench connect` and initiates every operation.
    pub client: PeerInfo,
    pub settings: RunSettings,
    pub expectation: Expectation,
    pub cases: Vec<CaseResult>,
    pub verdict: Verdict,
    /// Measurement-quality warnings with advice (outliers, short runs, noisy machine).
    #[serde(default)]
    pub warnings: Vec<String>,
    /// Present only when the run was cut short (Ctrl-C, SIGTERM): `cases` then holds just the
    /// cases measured before it and the verdict judges only those.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partial: Option<PartialRun>,
    /// `nixl` when the UCX engine ran with `--ucx-profile nixl` (NIXL's peer-failure mode and
    /// UCX defaults): tag cases are then not judged as the data path, put/get are. Absent: UCX's
    /// own defaults.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ucx_profile: Option<UcxProfile>,
    /// `pair --rails`: the per-rail table, aggregate and findings (then `cases` holds every
    /// rail's cases, each with its `rail`, and `verdict` rolls up the rails).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rails: Option<Box<crate::rails::RailsOutcome>>,
    /// `pair --kv-shape`: the model's KV transfer per request (then `cases` holds every peer's
    /// case, and `verdict` rolls them up with `--max-kv-ms`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kv: Option<Box<crate::KvOutcome>>,
    /// `--baseline`: each case against the mean of its last matching runs (issue 21); absent
    /// without `--baseline`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<Box<BaselineReport>>,
    /// Both sides' RDMA readiness (MTUs, GID, link layer, firmware, GPUDirect mode), read where
    /// each runs before the transfer, and what they disagree on (issue 40). Absent where no
    /// side's hello was read (a rails or KV run, which compare their own way).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub readiness: Option<Box<crate::readiness::PairReadiness>>,
    /// `--control KIND`: the negative controls run on the same two sides after the main run,
    /// each caught or not (issue 35); absent when none ran.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub controls: Vec<ControlResult>,
}

/// How the UCX engine configures UCX beyond `--ucx-config` and `UCX_*` (`--ucx-profile`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum UcxProfile {
    /// UCX's own defaults (ucx_perftest's view of the fabric).
    #[default]
    Default,
    /// What NIXL's UCX backend asks of UCX, so that a machine without NIXL gets NIXL's answer:
    /// peer-failure error handling plus NIXL's UCX defaults.
    Nixl,
}

impl UcxProfile {
    pub fn as_str(self) -> &'static str {
        match self {
            UcxProfile::Default => "default",
            UcxProfile::Nixl => "nixl",
        }
    }
}

impl fmt::Display for UcxProfile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for UcxProfile {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "default" => Ok(UcxProfile::Default),
            "nixl" => Ok(UcxProfile::Nixl),
            other => Err(format!("unknown UCX profile '{other}': use default or nixl")),
        }
    }
}

/// Why a report holds fewer cases than its settings asked for.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct PartialRun {
    /// What cut the run short, e.g. `interrupted by SIGTERM`.
    pub reason: String,
    /// How many cases the settings asked for (`cases` has the ones measured).
    pub planned_cases: usize,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolInfo {
    pub name: String,
    pub version: String,
    pub git_commit: String,
    /// Version of the UCX headers the binary was generated from.
    pub ucx_headers: String,
}

/// Where the two sides ran relative to each other; it decides what the fabric should give.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Locality {
    SameHost,
    DifferentHosts,
}

impl Locality {
    /// The locality of two sides that did (`true`) or did not share a host.
    pub fn of_same_host(same_host: bool) -> Locality {
        if same_host {
            Locality::SameHost
        } else {
            Locality::DifferentHosts
        }
    }
}

impl fmt::Display for Locality {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Locality::SameHost => "same host",
            Locality::DifferentHosts => "different hosts",
        })
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Placement {
    pub locality: Locality,
    /// How the pair was started, e.g. `local (isolation=pod)`, `kubernetes`, `manual`.
    pub mode: String,
    pub prefill: Endpoint,
    pub decode: Endpoint,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Endpoint {
    /// Host name, or the Kubernetes node name.
    pub host: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    /// Address the control channel used (server side: the listen address).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// The reference pod or workload this side was modelled on (`pod/NAME`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub modelled_on: Option<String>,
}

/// What one side reports about itself.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PeerInfo {
    pub hostname: String,
    /// UCX library version loaded at run time, e.g. `1.22.0`.
    pub ucx_version: String,
    /// Directory the UCX library was loaded from.
    pub ucx_library: String,
    pub cuda: CudaInfo,
    /// Transport-relevant environment (`UCX_*`, `NCCL_*`, `NIXL_*`, `CUDA_VISIBLE_DEVICES`), secrets masked.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// The NIXL this side ran (NIXL engine only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nixl: Option<NixlInfo>,
}

/// NIXL's release, library and backend on one side (the UCX it runs is `ucx_version`/`ucx_library`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct NixlInfo {
    /// e.g. `1.5.1`; empty when the install does not say.
    pub version: String,
    /// The `libnixl_capi.so` that was loaded.
    pub library: String,
    /// The backend plugin that moved the bytes (`UCX`).
    pub backend: String,
    /// The backend's parameters as NIXL reported them after initialisation.
    #[serde(default)]
    pub backend_params: BTreeMap<String, String>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CudaInfo {
    pub available: bool,
    /// Why CUDA is unavailable (e.g. `no CUDA driver`), or the driver version when available.
    pub detail: String,
    #[serde(default)]
    pub devices: u32,
}
