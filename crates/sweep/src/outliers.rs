//! Robust outlier thresholds over the nodes' medians: the median of all nodes and the scaled
//! median absolute deviation, which one or two bad nodes cannot drag the way they drag a mean.
//! Bandwidth is bad downwards, latency upwards.

/// Median of `values` (sorted in place); `None` when empty.
pub fn median(values: &mut [f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let n = values.len();
    Some(if n % 2 == 1 {
        values[n / 2]
    } else {
        (values[n / 2 - 1] + values[n / 2]) / 2.0
    })
}

/// (median, MAD scaled to a normal's standard deviation) of `values`.
fn center_and_mad(values: &[f64]) -> Option<(f64, f64)> {
    let mut all = values.to_vec();
    let center = median(&mut all)?;
    let mut dev: Vec<f64> = values.iter().map(|m| (m - center).abs()).collect();
    Some((center, median(&mut dev).unwrap_or(0.0) * 1.4826))
}

/// A robust limit over the nodes' medians.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Limit {
    pub center: f64,
    pub mad: f64,
    pub threshold: f64,
}

/// Bandwidth: a node's median under the threshold (more than 3 scaled MADs and at least 20 %
/// under the median of all nodes) is a low outlier.
pub fn bandwidth_floor(medians: &[f64]) -> Option<Limit> {
    let (center, mad) = center_and_mad(medians)?;
    Some(Limit {
        center,
        mad,
        threshold: center - (3.0 * mad).max(0.2 * center),
    })
}

/// Latency below this margin is scheduler and cache noise on a loaded host, not a fabric
/// problem: shared-memory p50 moves by a microsecond or two when the machine is busy.
pub const LATENCY_NOISE_US: f64 = 5.0;

/// Latency: a node's median p50 over the threshold (more than 3 scaled MADs, at least double the
/// median of all nodes, and at least [`LATENCY_NOISE_US`] above it) is a high outlier.
pub fn latency_ceiling(medians_us: &[f64]) -> Option<Limit> {
    let (center, mad) = center_and_mad(medians_us)?;
    Some(Limit {
        center,
        mad,
        threshold: center + (3.0 * mad).max(center).max(LATENCY_NOISE_US),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_8_ms_node_among_sub_microsecond_peers_is_over_the_ceiling() {
        let l = latency_ceiling(&[0.65, 0.66, 0.64, 8000.0]).unwrap();
        assert!(l.threshold < 8000.0 && l.threshold > 0.66, "{l:?}");
        // Noise among healthy nodes stays under it.
        let l = latency_ceiling(&[0.65, 0.9, 2.1, 0.7]).unwrap();
        assert!(l.threshold > 2.1, "{l:?}");
    }

    #[test]
    fn the_bandwidth_floor_is_under_the_median() {
        let l = bandwidth_floor(&[20e9, 20e9, 21e9, 2e9]).unwrap();
        assert!(l.threshold > 2e9 && l.threshold < 20e9, "{l:?}");
        assert_eq!(bandwidth_floor(&[]), None);
    }
}
