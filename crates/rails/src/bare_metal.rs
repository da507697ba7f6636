//! What the two hosts of a bare-metal rails run (`serve --rails` on the decode host,
//! `connect HOST:PORT --rails` on the prefill host) read from their flags and their host: the
//! rails chosen between two hosts, this host's name and rail map, and the pair plan of every row.

use super::plan::plan_rows;
use super::remote_run::RemoteRailsRun;
use super::serve_run::RailsAgent;
use super::{Choice, RailFlagError, RailPlanError, RailSelection, RailSite, read_selection, told_devices};
use icb_core::model::Locality;
use icb_core::rails::RailPattern;
use icb_pair::local::LocalOptions;
use icb_pair::plan::{Deadlines, PairPlan};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Why a bare-metal rails host cannot plan its rails (one line, exit 2).
#[derive(Debug, thiserror::Error)]
pub enum BareMetalError {
    #[error(transparent)]
    Flags(#[from] RailFlagError),
    #[error(transparent)]
    Plan(#[from] RailPlanError),
}

/// The selection and the devices told, as `--rails`/`--rail-devices` say between two hosts
/// ([`read_selection`]'s rule).
pub fn selection(
    rails: Option<&str>,
    devices: Option<&[String]>,
) -> Result<(RailSelection, Option<Vec<String>>), RailFlagError> {
    let (_, selection) = read_selection(rails, devices, RailSite::BareMetal)?;
    let told = told_devices(&selection, devices.map(<[String]>::to_vec));
    Ok((selection, told))
}

/// This host's name (the node name in reports).
pub fn host_name() -> String {
    nix::unistd::gethostname()
        .map(|h| h.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "localhost".into())
}

/// The recorded rail-map tree to read instead of `/sys` (tests on emulated nodes).
pub fn rail_tree() -> Option<PathBuf> {
    std::env::var_os(super::info::RAIL_TREE_ENV).map(PathBuf::from)
}

impl RailsAgent {
    /// The agent of this host on `listen`: its rail map, one serve rank (running `ranks`) per
    /// rail that `--rails`/`--rail-devices` choose.
    pub fn for_this_host(
        listen: SocketAddr,
        (rails, devices): (Option<&str>, Option<&[String]>),
        ranks: LocalOptions,
    ) -> Result<RailsAgent, BareMetalError> {
        let (selection, told) = selection(rails, devices)?;
        let info = super::info::node_info(host_name(), rail_tree().as_deref(), Path::new("/sys"));
        let rows = plan_rows(&info, &info, &selection, told.as_deref(), RailPattern::Aligned)?;
        let ends = rows.into_iter().map(|r| r.decode).collect();
        Ok(RailsAgent {
            listen,
            info,
            ends,
            ranks,
        })
    }
}

impl<'a> RemoteRailsRun<'a> {
    /// A run from this host against the agent at `agent`: every row's pair on the local
    /// launcher's deadlines (a minute to start), connecting within `connect_timeout`.
    pub fn from_this_host(
        agent: &'a str,
        (ranks, locality): (LocalOptions, Locality),
        choice: Choice,
        mut pair: PairPlan,
        connect_timeout: Duration,
    ) -> RemoteRailsRun<'a> {
        pair.set_deadlines(Deadlines::local(&pair.settings, Duration::from_secs(60)));
        pair.connect_timeout = connect_timeout;
        RemoteRailsRun {
            agent,
            ranks,
            locality,
            prefill_node: host_name(),
            tree: rail_tree(),
            choice,
            pair,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Between two hosts a count emulates nothing: refused in one line; devices are told
    /// only when the rails are not the devices themselves.
    #[test]
    fn a_count_is_refused_and_devices_are_told_beside_a_map() {
        assert!(selection(Some("2"), None).is_err());
        let devices = ["eth1".to_string()];
        let (chosen, told) = selection(Some("auto"), Some(&devices)).unwrap();
        assert_eq!((chosen, told), (RailSelection::Auto, Some(devices.to_vec())));
        let (chosen, told) = selection(None, Some(&devices)).unwrap();
        assert!(matches!(chosen, RailSelection::Devices(_)), "{chosen:?}");
        assert_eq!(told, None);
    }
}
