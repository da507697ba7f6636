//! Names and numbers shared by the exporters, so every format says the same thing.

use icb_core::model::{BandwidthUnit, CaseResult, MemoryPair, TransportClass};
use icb_core::units::format_size;

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

/// `tag_bw host→host 64 MiB`.
pub fn case_name(c: &CaseResult) -> String {
    format!("{} {} {}", c.test, c.memory, format_size(c.size))
}

/// A bandwidth in the report's unit, no unit suffix (headers carry it): two decimals, or three
/// significant digits below 1 so small-message rates don't all read `0.00`.
pub fn bw_value(bps: f64, unit: BandwidthUnit) -> String {
    let v = unit.from_bytes_per_s(bps);
    if v >= 1.0 || v == 0.0 || !v.is_finite() {
        format!("{v:.2}")
    } else {
        let decimals = (2 - v.log10().floor() as i32).clamp(2, 9) as usize;
        format!("{v:.decimals$}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_bandwidths_keep_three_significant_digits() {
        assert_eq!(bw_value(6.56e9, BandwidthUnit::GBps), "6.56");
        assert_eq!(bw_value(0.0123e9, BandwidthUnit::GBps), "0.0123");
        assert_eq!(bw_value(0.5e9, BandwidthUnit::GBps), "0.500");
        assert_eq!(bw_value(0.0, BandwidthUnit::GBps), "0.00");
    }
}
