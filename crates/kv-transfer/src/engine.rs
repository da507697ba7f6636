//! Which engine a KV transfer's ranks run: `--engine` when given, else NIXL wherever its library
//! loads on this host, else the UCX engine. Finding NIXL loads it, so the flags only say how to
//! decide ([`KvEngine`]); the decision is made when the run starts ([`KvEngine::decide`]), by
//! `pair`'s target and by the gate's KV step, not while the flags are read.

use icb_core::EngineKind;
use std::path::{Path, PathBuf};

/// How the binary finds whether NIXL's library loads here (`icb_nixl_engine::probe_load`: a
/// load without an agent, no UCX starts); this crate loads no NIXL itself.
pub type NixlLoads = fn(Option<&Path>) -> bool;

/// The engine of a KV transfer, as its flags chose it.
#[derive(Debug, Clone)]
pub enum KvEngine {
    /// `--engine` on the command line: kept (`--engine ucx` where NIXL loads still runs UCX).
    Chosen(EngineKind),
    /// No `--engine`: NIXL where its library loads (from `library_dir`, `--nixl-lib`, else the
    /// loader's search), else the UCX engine's block lists.
    NixlWhereItLoads {
        library_dir: Option<PathBuf>,
        loads: NixlLoads,
    },
}

impl KvEngine {
    /// The flags as given: `engine` (its default is the UCX engine) and whether `--engine` was
    /// on the command line.
    pub fn of_flags(engine: EngineKind, given: bool, library_dir: Option<PathBuf>, loads: NixlLoads) -> KvEngine {
        match engine {
            EngineKind::Ucx if !given => KvEngine::NixlWhereItLoads { library_dir, loads },
            chosen => KvEngine::Chosen(chosen),
        }
    }

    /// The engine the ranks run; asks whether NIXL loads only when `--engine` chose none.
    pub fn decide(&self) -> EngineKind {
        match self {
            KvEngine::Chosen(kind) => *kind,
            KvEngine::NixlWhereItLoads { library_dir, loads } if loads(library_dir.as_deref()) => EngineKind::Nixl,
            KvEngine::NixlWhereItLoads { .. } => EngineKind::Ucx,
        }
    }

    /// The engine a plan names until [`KvEngine::decide`] runs: the chosen one, else the UCX
    /// engine (what runs where NIXL does not load).
    pub fn unless_nixl_loads(&self) -> EngineKind {
        match self {
            KvEngine::Chosen(kind) => *kind,
            KvEngine::NixlWhereItLoads { .. } => EngineKind::Ucx,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn loads(_: Option<&Path>) -> bool {
        true
    }

    fn does_not_load(_: Option<&Path>) -> bool {
        false
    }

    /// Fails the test if asked: a chosen engine never looks for NIXL.
    fn never_asked(_: Option<&Path>) -> bool {
        panic!("a chosen engine asked whether NIXL loads")
    }

    /// An engine `--engine` chose is kept without looking for NIXL: `--engine ucx` on a host
    /// where NIXL loads still runs the UCX engine.
    #[test]
    fn a_chosen_engine_is_kept() {
        for kind in [EngineKind::Ucx, EngineKind::Nixl] {
            let chosen = KvEngine::of_flags(kind, true, None, never_asked);
            assert!(matches!(chosen, KvEngine::Chosen(k) if k == kind));
            assert_eq!((chosen.decide(), chosen.unless_nixl_loads()), (kind, kind));
        }
        let nixl = KvEngine::of_flags(EngineKind::Nixl, false, None, never_asked);
        assert_eq!(nixl.decide(), EngineKind::Nixl);
    }

    /// Without `--engine`: NIXL where it loads (asked with `--nixl-lib`'s directory), else UCX;
    /// until decided the plan names UCX.
    #[test]
    fn no_engine_given_takes_nixl_where_it_loads() {
        let found = KvEngine::of_flags(EngineKind::Ucx, false, Some("/opt/nixl".into()), loads);
        assert!(
            matches!(&found, KvEngine::NixlWhereItLoads { library_dir: Some(d), .. } if d == Path::new("/opt/nixl"))
        );
        assert_eq!(
            (found.decide(), found.unless_nixl_loads()),
            (EngineKind::Nixl, EngineKind::Ucx)
        );
        let missing = KvEngine::of_flags(EngineKind::Ucx, false, None, does_not_load);
        assert_eq!(missing.decide(), EngineKind::Ucx);
    }
}
