//! Shared by the rails test binaries (`pair_rails`, `serve_connect_rails`, `pair_rails_kube`;
//! `mod rails_support;`): the flags of the one rail-sized case they run, and what a healthy
//! rail's row must show. A directory without a main.rs is not a test target of its own.
#![allow(dead_code)]

use icb_core::VerdictStatus;
use icb_core::rails::{AttributionStatus, RailResult};

/// One 4 MiB `put_bw` case of host memory on every rail, as JSON, over TCP on the emulated rails
/// (the floor is set for TCP on a 2-core machine: what is judged is the rails, not TCP).
pub const RAIL_CASE: [&str; 11] = [
    "-o",
    "json",
    "--tests",
    "put_bw",
    "--sizes",
    "4MiB",
    "--memory",
    "host-host",
    "--allow-tcp",
    "--min-host-bw",
    "0.001",
];

/// A rail that did not fail, whose counters are its own NIC's (`railN`), and whose bytes both
/// sides counted there: payload plus TCP/IP headers and ACKs, within a few percent of the
/// application's bytes.
pub fn assert_counted_on_its_own_nic(row: &RailResult) {
    assert_ne!(row.status, VerdictStatus::Fail, "{row:?}");
    assert_eq!(row.prefill.counter_device, format!("rail{}", row.index));
    let a = row.attribution.as_ref().expect("attributed");
    for side in [&a.prefill, &a.decode] {
        assert_eq!(side.status, AttributionStatus::Counted, "{side:?}");
        let own = side
            .devices
            .iter()
            .find(|d| d.device == row.prefill.counter_device)
            .unwrap();
        assert!((0.98..1.15).contains(&own.share), "rail {}: {own:?}", row.index);
    }
}
