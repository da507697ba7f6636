//! The expectations file (`--expect FILE`, YAML or JSON) and the bandwidth syntax it shares with
//! the flags. Properties: a file that parses yields finite, non-negative floors for both
//! localities; a bandwidth that parses is finite and positive.
#![no_main]

use icb_core::Locality;
use icb_core::verdict::{parse_bandwidth, parse_expectation_config};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    match parse_expectation_config(&text) {
        Ok(cfg) => {
            for loc in [Locality::SameHost, Locality::DifferentHosts] {
                let o = cfg.overrides_for(loc).expect("a parsed file's overrides were checked");
                for bps in [
                    o.min_host_bandwidth_bps,
                    o.min_cuda_bandwidth_bps,
                    o.min_mixed_bandwidth_bps,
                ]
                .into_iter()
                .flatten()
                {
                    assert!(bps.is_finite() && bps >= 0.0, "floor of {bps} B/s accepted");
                }
            }
        }
        Err(e) => assert!(
            !e.to_string().chars().any(char::is_control),
            "control character in the error: {e:?}"
        ),
    }
    for line in text.lines().take(8) {
        if let Ok(bps) = parse_bandwidth(line) {
            assert!(bps.is_finite() && bps > 0.0, "bandwidth '{line}' gave {bps} B/s");
        }
    }
});
