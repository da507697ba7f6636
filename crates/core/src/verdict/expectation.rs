//! The expectation: the bandwidth floors a placement should give, their defaults and reasoning,
//! and how the expectations file and the flags override them (flags win over the file, the file
//! over the defaults).

use super::GB;
use super::config::ExpectationConfig;
use crate::ParseError;
use crate::model::*;

/// Floor for different hosts, every memory pair: 8 GB/s. The slowest fabric the tool targets is
/// RoCE 100 GbE (12.5 GB/s line rate, 10–12 GB/s practical per the Dynamo guide); 8 GB/s is 80 %
/// of its lowest practical figure, so a healthy link never trips it, yet 2.7× the top of the TCP
/// fallback range (1–3 GB/s; observed failures 0.3–0.5 GB/s). Faster fabrics (HDR 25 GB/s, NDR
/// 50 GB/s) should raise it in the expectations file.
pub const DIFFERENT_HOSTS_FLOOR_BPS: f64 = 8.0 * GB;
/// Floor for same-host host→host: 1 GB/s. Shared memory and cma give 5–10 GB/s even on a 2-core
/// machine (sysv ~7 GB/s here), and the observed broken setups sit at 0.3–0.5 GB/s. Loopback TCP
/// (~4.5 GB/s here) clears this floor, which is why classification, not this number, catches it.
pub const SAME_HOST_HOST_FLOOR_BPS: f64 = 1.0 * GB;
/// Floor for same-host cuda→cuda: 50 GB/s. cuda_ipc over NVLink is estimated by UCX at 300 (A100),
/// 400 (H100/H20) and 800 (Blackwell) GB/s; 50 GB/s is 6× below the slowest of those, and above
/// anything staged through host memory or a PCIe Gen5 x16 NIC (≈ 64 GB/s theoretical, less in
/// practice), so a same-host GPU pair that lost NVLink fails. PCIe-only GPU boxes lower it.
pub const SAME_HOST_CUDA_FLOOR_BPS: f64 = 50.0 * GB;
/// Floor for same-host host↔cuda: 5 GB/s. One side is host memory, so the bytes cross PCIe
/// (Gen4 x16 ≈ 25 GB/s practical, Gen5 twice that) instead of NVLink; 5 GB/s leaves room for a
/// host-side copy and stays above the TCP fallback range.
pub const SAME_HOST_MIXED_FLOOR_BPS: f64 = 5.0 * GB;
/// Floors apply from 1 MiB: KV-cache blocks are this size or larger, and smaller messages are
/// latency-bound, so their bandwidth says nothing about the fabric.
pub const MIN_SIZE_FOR_BANDWIDTH: u64 = 1 << 20;
/// Floors apply only where at least four messages of the floors' minimum size are in flight at
/// once (message size × window, or a request's descriptors × block size; 4 MiB by default, and
/// `--min-bw-size` moves it with the size): a transfer moved one small request at a time is
/// bound by the fixed cost of each request, not by the fabric. Measured on an H200
/// (2026-11-27): a NIXL WRITE of one 1 MiB descriptor over cuda_ipc took 16 µs p50 and 22 µs
/// on average, so it read 47.5 GB/s, below the 50 GB/s cuda→cuda floor, on a path that moves
/// 1.8 TB/s; one request of 16 × 1 MiB read 84 GB/s and the UCX engine's 1 MiB put with 32 in
/// flight 129 GB/s. With that fixed cost and NVLink's slowest 300 GB/s, 4 MiB in flight reads
/// ≈ 115 GB/s, 2.3× the floor.
pub const MIN_MESSAGES_IN_FLIGHT_FOR_BANDWIDTH: u64 = 4;

/// Different hosts, line rate unknown: 400 GB/s, eight 400 Gb/s NICs (or four 800 Gb/s), the most
/// any node carries today; one transfer between two processes normally uses a fraction of it.
pub const DIFFERENT_HOSTS_CEILING_BPS: f64 = 400.0 * GB;
/// Same host, host→host: 1 TB/s. A copy reads and writes every byte, so even a two-socket
/// server with ~1.2 TB/s of DRAM bandwidth copies at well under 1 TB/s; above it, the bytes were
/// not moved (a cached or zero-page read, or a clock error).
pub const SAME_HOST_HOST_CEILING_BPS: f64 = 1000.0 * GB;
/// Same host, cuda→cuda: 5 TB/s, above a copy inside one H200/B200's HBM (4.8–8 TB/s read +
/// write, so ≤ 4 TB/s of copy) and NVLink 5's 900 GB/s per direction.
pub const SAME_HOST_CUDA_CEILING_BPS: f64 = 5000.0 * GB;
/// Same host, host↔cuda: 1 TB/s, above NVLink-C2C (450 GB/s per direction on GH200) and PCIe 6
/// x16 (~128 GB/s).
pub const SAME_HOST_MIXED_CEILING_BPS: f64 = 1000.0 * GB;
/// Measurement slack before a result counts as above the ceiling (clock and rounding noise).
pub const CEILING_SLACK: f64 = 1.05;

impl Expectation {
    /// The built-in expectation for a placement (see the constants above for the reasoning).
    pub fn defaults(locality: Locality) -> Expectation {
        let (host, cuda, mixed) = match locality {
            Locality::SameHost => (
                SAME_HOST_HOST_FLOOR_BPS,
                SAME_HOST_CUDA_FLOOR_BPS,
                SAME_HOST_MIXED_FLOOR_BPS,
            ),
            Locality::DifferentHosts => (
                DIFFERENT_HOSTS_FLOOR_BPS,
                DIFFERENT_HOSTS_FLOOR_BPS,
                DIFFERENT_HOSTS_FLOOR_BPS,
            ),
        };
        Expectation {
            locality,
            min_host_bandwidth_bps: host,
            min_cuda_bandwidth_bps: cuda,
            min_mixed_bandwidth_bps: Some(mixed),
            min_size_for_bandwidth: MIN_SIZE_FOR_BANDWIDTH,
            tcp_is_failure: true,
            source: "defaults".to_string(),
            line_rate_bps: None,
        }
    }

    /// The most a placement can physically carry for one memory pair (bytes/s), and what that
    /// bound is: the NICs' line rate between different hosts when known, else generous bounds
    /// (see the `*_CEILING_BPS` constants). A measurement above it did not go where the
    /// placement says (seen in the field: an "EFA" 285 GB/s that was NVLink).
    pub fn ceiling_for(&self, memory: MemoryPair) -> (f64, &'static str) {
        match self.locality {
            Locality::DifferentHosts => match self.line_rate_bps {
                Some(rate) if rate.is_finite() && rate > 0.0 => (rate, "the NICs' line rate"),
                _ => (
                    DIFFERENT_HOSTS_CEILING_BPS,
                    "the most NIC bandwidth a node has (8 × 400 Gb/s)",
                ),
            },
            Locality::SameHost => match (memory.initiator, memory.target) {
                (MemoryType::Host, MemoryType::Host) => (SAME_HOST_HOST_CEILING_BPS, "a host memory copy"),
                (MemoryType::Cuda, MemoryType::Cuda) => (SAME_HOST_CUDA_CEILING_BPS, "a GPU memory copy"),
                _ => (SAME_HOST_MIXED_CEILING_BPS, "a host↔GPU link"),
            },
        }
    }

    /// The floor (bytes/s) for one memory pair.
    pub fn floor_for(&self, memory: MemoryPair) -> f64 {
        match (memory.initiator, memory.target) {
            (MemoryType::Host, MemoryType::Host) => self.min_host_bandwidth_bps,
            (MemoryType::Cuda, MemoryType::Cuda) => self.min_cuda_bandwidth_bps,
            _ => self.min_mixed_bandwidth_bps.unwrap_or(self.min_cuda_bandwidth_bps),
        }
    }

    /// The bytes a case must keep in flight for a floor to judge it
    /// ([`MIN_MESSAGES_IN_FLIGHT_FOR_BANDWIDTH`] messages of `min_size_for_bandwidth`).
    pub fn min_in_flight_for_bandwidth(&self) -> u64 {
        self.min_size_for_bandwidth
            .saturating_mul(MIN_MESSAGES_IN_FLIGHT_FOR_BANDWIDTH)
    }

    /// Applies overrides; `source` names where they came from (`flags`, a file path).
    pub fn with_overrides(mut self, o: &ExpectationOverrides, source: &str) -> Expectation {
        if o.is_empty() {
            return self;
        }
        if let Some(v) = o.min_host_bandwidth_bps {
            self.min_host_bandwidth_bps = v;
        }
        if let Some(v) = o.min_cuda_bandwidth_bps {
            self.min_cuda_bandwidth_bps = v;
        }
        if let Some(v) = o.min_mixed_bandwidth_bps {
            self.min_mixed_bandwidth_bps = Some(v);
        }
        if let Some(v) = o.min_size_for_bandwidth {
            self.min_size_for_bandwidth = v;
        }
        if let Some(v) = o.tcp_is_failure {
            self.tcp_is_failure = v;
        }
        self.source = if self.source == "defaults" {
            source.to_string()
        } else {
            format!("{} + {source}", self.source)
        };
        self
    }

    /// Defaults, then the expectations file (`config` = parsed file and its path), then flags.
    pub fn resolve(
        locality: Locality,
        config: Option<(&ExpectationConfig, &str)>,
        flags: &ExpectationOverrides,
    ) -> Result<Expectation, ParseError> {
        let mut e = Expectation::defaults(locality);
        if let Some((cfg, path)) = config {
            e = e.with_overrides(&cfg.overrides_for(locality)?, path);
        }
        Ok(e.with_overrides(flags, "flags"))
    }
}

/// Values that replace defaults; `None` keeps the default.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ExpectationOverrides {
    pub min_host_bandwidth_bps: Option<f64>,
    pub min_cuda_bandwidth_bps: Option<f64>,
    pub min_mixed_bandwidth_bps: Option<f64>,
    pub min_size_for_bandwidth: Option<u64>,
    pub tcp_is_failure: Option<bool>,
}

impl ExpectationOverrides {
    pub(super) fn is_empty(&self) -> bool {
        *self == ExpectationOverrides::default()
    }

    /// From the CLI flags: `--min-host-bw`/`--min-cuda-bw` in GB/s (the cuda floor also sets the
    /// host↔cuda one), `--min-bw-size`, and `--allow-tcp`.
    pub fn from_flags(
        min_host_gbps: Option<f64>,
        min_cuda_gbps: Option<f64>,
        min_size: Option<u64>,
        allow_tcp: bool,
    ) -> Result<Self, ParseError> {
        let check = |flag: &str, v: Option<f64>| -> Result<Option<f64>, ParseError> {
            match v {
                None => Ok(None),
                Some(x) if x.is_finite() && x > 0.0 => Ok(Some(x * GB)),
                Some(x) => Err(ParseError::new(format!(
                    "{flag} {x}: give a positive bandwidth in GB/s, e.g. {flag} 10"
                ))),
            }
        };
        let cuda = check("--min-cuda-bw", min_cuda_gbps)?;
        Ok(ExpectationOverrides {
            min_host_bandwidth_bps: check("--min-host-bw", min_host_gbps)?,
            min_cuda_bandwidth_bps: cuda,
            min_mixed_bandwidth_bps: cuda,
            min_size_for_bandwidth: min_size,
            tcp_is_failure: allow_tcp.then_some(false),
        })
    }
}
