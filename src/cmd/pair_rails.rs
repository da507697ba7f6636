//! `ic-bench pair --rails`: every rail of a node pair at once (`icb_pair::rails`). Here only the
//! flags, read once into an `icb_rails::LocalRailsTarget`.

use icb_flags::rails::{EmulatedRailArgs, RailArgs};
use icb_rails::{LocalRailsFlags, LocalRailsTarget};

/// Reads the rails flags of a `--local` run.
pub fn target(
    rails: &RailArgs,
    emulated_faults: &EmulatedRailArgs,
    opts: icb_pair::local::LocalOptions,
) -> anyhow::Result<LocalRailsTarget> {
    let flags = LocalRailsFlags {
        rails: rails.rails.as_deref(),
        rail_devices: rails.rail_devices.as_deref(),
        slow_rail: &emulated_faults.slow_rail,
        dead_rail: &emulated_faults.dead_rail,
        congested_rail: &emulated_faults.congested_rail,
        lossy_rail: &emulated_faults.lossy_rail,
    };
    Ok(LocalRailsTarget::read(&flags, opts, |s| rails.choice(s))?)
}
