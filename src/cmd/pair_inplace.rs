//! `ic-bench pair --in-place --prefill pod/A --decode pod/B`: the pair pipeline with the in-place
//! launcher (`icb_pair::inplace`): this binary runs inside the two workers' own containers.
//!
//! Bounded for production pods: each side gets at most `--side-timeout` (15 s by default) of
//! transfers, the cases are fitted into it, and buffers stay at or under 256 MiB.

use anyhow::Context as _;
use icb_pair::inplace::{InPlacePlan, fit, strip};
use icb_pair::{Deadlines, PairPlan};
use icb_target::InPlaceTarget;
use std::path::PathBuf;
use std::time::Duration;

#[derive(clap::Args, Debug, Clone)]
pub struct InPlaceArgs {
    /// Run inside the two workers' own containers (copies this binary in through pods/exec, removes it after)
    #[arg(long, requires_all = ["prefill", "decode"], conflicts_with_all = ["local", "dry_run"])]
    pub in_place: bool,

    /// Container to run in, for --in-place (default: the pod's only or default container)
    #[arg(short = 'c', long, value_name = "NAME", requires = "in_place")]
    pub container: Option<String>,

    /// Ports the decode side may listen on, for --in-place, e.g. 45100-45199
    #[arg(long, value_name = "LO-HI", default_value = "45100-45199", value_parser = parse_port_range)]
    pub port_range: (u16, u16),

    /// Upper bound on each side's run, for --in-place (the cases are fitted into it)
    #[arg(long, value_name = "DURATION", default_value = "15s", value_parser = icb_flags::common::parse_duration)]
    pub side_timeout: Duration,

    /// The binary to copy, for --in-place (e.g. the portable or aarch64 build from scripts/release) [default: this one]
    #[arg(long, value_name = "FILE", requires = "in_place")]
    pub in_place_binary: Option<PathBuf>,
}

fn parse_port_range(s: &str) -> Result<(u16, u16), String> {
    let bad = || format!("'{s}' is not a port range: use LO-HI, e.g. 45100-45199");
    let (lo, hi) = s.split_once('-').ok_or_else(bad)?;
    let lo: u16 = lo.trim().parse().map_err(|_| bad())?;
    let hi: u16 = hi.trim().parse().map_err(|_| bad())?;
    if lo == 0 || lo > hi {
        return Err(bad());
    }
    Ok((lo, hi))
}

/// The in-place plan, with the cases fitted into `--side-timeout`, and its deadlines on `plan`.
pub fn target(args: &super::pair::Args, plan: &mut PairPlan) -> anyhow::Result<InPlaceTarget> {
    let (prefill, decode) = super::pair_kube::targets(args)?;
    let opts = &args.in_place;
    // The NIXL engine's own plan already stays within the buffer bound (64 MiB per request).
    let keep_cases = args.test.sizes.is_some() || args.engine.engine == icb_core::EngineKind::Nixl;
    let notes = fit::fit_settings(&mut plan.settings, keep_cases, opts.side_timeout)?;
    let run_id = icb_kube::podspec::run_id_or_new(args.kube.run_id.as_deref()).map_err(anyhow::Error::msg)?;
    let (binary, stripped) = match &opts.in_place_binary {
        Some(b) => (b.clone(), None),
        None => {
            let exe = std::env::current_exe().context("cannot find this binary to copy; pass --in-place-binary")?;
            strip::stripped_copy(exe)?
        }
    };
    let request_timeout = args.kube.cluster.request_timeout;
    let copy_timeout = Duration::from_secs(120).max(request_timeout);
    plan.set_deadlines(Deadlines::in_place(copy_timeout, opts.side_timeout));
    Ok(InPlaceTarget {
        cluster: args.kube.cluster.options(),
        plan: InPlacePlan {
            prefill,
            decode,
            container: opts.container.clone(),
            binary,
            ports: opts.port_range,
            side_timeout: opts.side_timeout,
            copy_timeout,
            cleanup_timeout: icb_kube::pair::cleanup_timeout(request_timeout),
            run_id,
            side_args: args.engine.side_flags(),
        },
        notes,
        _stripped: stripped,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn port_ranges() {
        assert_eq!(parse_port_range("45100-45199"), Ok((45100, 45199)));
        assert_eq!(parse_port_range("80-80"), Ok((80, 80)));
        for bad in ["", "1", "0-5", "9-3", "a-b", "1-70000"] {
            assert!(parse_port_range(bad).is_err(), "{bad}");
        }
    }
}
