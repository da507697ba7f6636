//! Names and numbers shared by the exporters, so every format says the same thing.

use icb_core::model::{CaseResult, MemoryPair, TransportClass};

/// `host-cuda`: ASCII, for machine formats (the table uses `host→cuda`).
pub fn memory_id(m: MemoryPair) -> String {
    format!("{}-{}", m.initiator, m.target)
}

/// Stable snake_case identifier of a class (the JSON spelling).
pub fn class_id(c: TransportClass) -> &'static str {
    match c {
        TransportClass::Tcp => "tcp",
        TransportClass::RmaEmulated => "rma_emulated",
        TransportClass::SharedMemory => "shared_memory",
        TransportClass::Cma => "cma",
        TransportClass::Rdma => "rdma",
        TransportClass::CudaIpc => "cuda_ipc",
        TransportClass::CudaCopyStaging => "cuda_copy_staging",
        TransportClass::SelfLoop => "self_loop",
        TransportClass::Unknown => "unknown",
    }
}

/// The class a case's data went over, `unknown` when UCX said nothing.
pub fn case_class(c: &CaseResult) -> TransportClass {
    c.transport
        .as_ref()
        .map(|t| t.data_path.class)
        .unwrap_or(TransportClass::Unknown)
}

/// `tag_bw host→host 64 MiB`, `write host→host 64 × 16 KiB`.
pub fn case_name(c: &CaseResult) -> String {
    let rail = c.rail.map(|r| format!("rail {r}: ")).unwrap_or_default();
    format!("{rail}{} {} {}", c.operation(), c.memory, c.shape())
}

/// Labels that tell apart cases of one test, memory pair and size: the blocks per operation, and
/// for the NIXL engine the engine and its direction. Empty for a plain UCX-engine case, so
/// existing series keep their labels.
pub fn case_shape_labels(c: &CaseResult) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    if let Some(n) = c.blocks.filter(|&n| n > 1) {
        out.push(("blocks", n.to_string()));
    }
    if !c.run_by.engine.is_default() {
        out.push(("engine", c.run_by.engine.to_string()));
    }
    if let Some(d) = c.run_by.direction {
        out.push(("direction", d.to_string()));
    }
    if let Some(r) = c.rail {
        out.push(("rail", r.to_string()));
    }
    out
}

/// A bandwidth in the report's unit, no unit suffix (headers carry it): core's one rule.
pub use icb_core::units::bandwidth_value as bw_value;

#[cfg(test)]
mod tests {
    use super::*;
    use icb_core::model::BandwidthUnit;

    #[test]
    fn small_bandwidths_keep_three_significant_digits() {
        assert_eq!(bw_value(6.56e9, BandwidthUnit::GBps), "6.56");
        assert_eq!(bw_value(0.0123e9, BandwidthUnit::GBps), "0.0123");
        assert_eq!(bw_value(0.5e9, BandwidthUnit::GBps), "0.500");
        assert_eq!(bw_value(0.0, BandwidthUnit::GBps), "0.00");
    }
}
