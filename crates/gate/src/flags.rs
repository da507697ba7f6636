//! The gate's flags as one typed value: what `ic-bench gate` reads from its arguments, and what
//! the gate makes of them before anything runs: the controls it refuses, the criteria its report
//! states and the input of its Kubernetes steps. The pair step's settings come in already made
//! (the engine's qualification profile is the engines' to decide).

use crate::kube::KubeGateInput;
use crate::kv::GateKv;
use crate::rails::{GateRails, RailsFlagError};
use icb_core::model::{ControlKind, Criteria, CriteriaFlags};
use icb_core::{EngineKind, RunSettings};
use icb_kube::KubeError;
use icb_kube::devices::DeviceRequest;
use icb_kube::target::Target;
use icb_pair::{ExpectationError, ExpectationFlags, ExpectationInput};

/// `ic-bench gate`'s flags, as given.
#[derive(Debug, Clone)]
pub struct GateFlags {
    pub cluster: icb_kube::ClusterOptions,
    pub recipe: Vec<String>,
    pub role: Option<String>,
    /// `--prefill` and `--decode`, as given.
    pub prefill: String,
    pub decode: String,
    pub expect: ExpectationFlags,
    /// `--image` (else the default bench image).
    pub image: Option<String>,
    pub engine: EngineKind,
    /// `--ucx-profile` when not the default.
    pub ucx_profile: Option<String>,
    /// The flags that select the engine on both sides.
    pub side_flags: Vec<String>,
    pub devices: DeviceRequest,
    /// `--rails` as given, and `--rail-margin` as a fraction.
    pub rails: Option<String>,
    pub rail_margin: f64,
    /// `--kv-shape`, as the gate takes it (none: a plain pair step).
    pub kv: Option<GateKv>,
    /// `--control` as given (none: the default controls) and `--no-controls`.
    pub controls: Vec<ControlKind>,
    pub no_controls: bool,
    pub cuda_alloc_given: bool,
    pub node_conditions: bool,
}

/// Flags a gate cannot run with (one line naming what to fix, exit 2).
#[derive(Debug, thiserror::Error)]
pub enum GateFlagError {
    #[error("--control {0} needs `pair --rails`; the gate's pair step is a plain pair: drop it")]
    ControlNeedsRails(ControlKind),
    #[error("--control knobs-off does not run with --kv-shape (its control is tcp, run by default): drop knobs-off")]
    KnobsOffWithKv,
    #[error("--control knobs-off compares the recipe's transport env with UCX's defaults: pass --recipe FILE")]
    KnobsOffWithoutRecipe,
    #[error("--prefill: {0}")]
    Prefill(KubeError),
    #[error("--decode: {0}")]
    Decode(KubeError),
    #[error(transparent)]
    Expectation(#[from] ExpectationError),
    #[error(transparent)]
    Rails(#[from] RailsFlagError),
}

impl GateFlags {
    /// A control only `pair --rails` runs, refused before the settings are made.
    pub fn refuse_rails_controls(&self) -> Result<(), GateFlagError> {
        match self.controls.iter().find(|k| k.needs_rails()) {
            Some(kind) => Err(GateFlagError::ControlNeedsRails(*kind)),
            None => Ok(()),
        }
    }

    /// The controls a gate cannot run as asked (`kv_shape`: `--kv-shape` given).
    pub fn refuse(&self, kv_shape: bool) -> Result<(), GateFlagError> {
        let knobs_off = self.controls.contains(&ControlKind::KnobsOff);
        if knobs_off && kv_shape {
            return Err(GateFlagError::KnobsOffWithKv);
        }
        if knobs_off && self.recipe.is_empty() {
            return Err(GateFlagError::KnobsOffWithoutRecipe);
        }
        Ok(())
    }

    /// What this gate judges against, as its report states it.
    pub fn criteria(&self, settings: &RunSettings) -> Criteria {
        let e = &self.expect;
        let flags = CriteriaFlags {
            tests: settings.tests.clone(),
            sizes: settings.sizes.clone(),
            memory: settings.memory.clone(),
            max_time_s: settings.max_time_s,
            min_host_bw_gbps: e.min_host_gbps,
            min_cuda_bw_gbps: e.min_cuda_gbps,
            min_bw_size: e.min_size,
            allow_tcp: e.allow_tcp,
            expect_config: e.config.as_ref().map(|p| p.display().to_string()),
            engine: self.engine,
            ucx_profile: self.ucx_profile.clone(),
            host_ipc: false,
            memlock_unlimited: false,
            rails: self.rails.clone(),
            rail_margin: self.rail_margin,
        };
        Criteria::from_flags("gate", &flags)
    }

    /// The controls the pair step runs: none with `--no-controls`, else those given, else tcp
    /// and knobs-off (which runs only where the recipe sets knobs).
    fn controls(&self) -> Vec<ControlKind> {
        match (self.no_controls, self.controls.is_empty()) {
            (true, _) => Vec::new(),
            (false, true) => vec![ControlKind::Tcp, ControlKind::KnobsOff],
            (false, false) => self.controls.clone(),
        }
    }

    /// The Kubernetes steps' input, with the pair step's settings.
    pub fn input(self, settings: RunSettings) -> Result<KubeGateInput, GateFlagError> {
        let prefill: Target = self.prefill.parse().map_err(GateFlagError::Prefill)?;
        let decode: Target = self.decode.parse().map_err(GateFlagError::Decode)?;
        let expectation = ExpectationInput::read(&self.expect)?;
        let rails = GateRails::read(self.rails.as_deref(), self.rail_margin, &self.prefill, &self.decode)?;
        Ok(KubeGateInput {
            controls: self.controls(),
            knobs_off_asked: self.controls.contains(&ControlKind::KnobsOff),
            cluster: self.cluster,
            recipe: self.recipe,
            role: self.role,
            settings,
            targets: (prefill, decode),
            expectation,
            image: self.image.unwrap_or_else(icb_kube::podspec::default_image),
            side_flags: self.side_flags,
            devices: self.devices,
            rails,
            kv: self.kv,
            cuda_alloc_given: self.cuda_alloc_given,
            node_conditions: self.node_conditions,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use icb_core::TestKind;

    fn flags(controls: &[ControlKind]) -> GateFlags {
        GateFlags {
            cluster: Default::default(),
            recipe: vec![],
            role: None,
            prefill: "node/a".into(),
            decode: "node/b".into(),
            expect: ExpectationFlags::default(),
            image: None,
            engine: EngineKind::Ucx,
            ucx_profile: None,
            side_flags: vec![],
            devices: Default::default(),
            rails: None,
            rail_margin: 0.2,
            kv: None,
            controls: controls.to_vec(),
            no_controls: false,
            cuda_alloc_given: false,
            node_conditions: false,
        }
    }

    fn settings() -> RunSettings {
        RunSettings::qualification(
            vec![TestKind::PutBw],
            vec![1 << 20],
            vec!["host-host".parse().unwrap()],
            1.0,
        )
    }

    #[test]
    fn controls_the_gate_cannot_run_are_refused_in_one_line() {
        let e = flags(&[ControlKind::WrongNic]).refuse_rails_controls().unwrap_err();
        assert!(
            matches!(e, GateFlagError::ControlNeedsRails(ControlKind::WrongNic)),
            "{e}"
        );
        assert!(
            e.to_string().starts_with("--control wrong-nic needs `pair --rails`"),
            "{e}"
        );
        let e = flags(&[ControlKind::KnobsOff]).refuse(false).unwrap_err();
        assert!(matches!(e, GateFlagError::KnobsOffWithoutRecipe), "{e}");
        let mut with_recipe = flags(&[ControlKind::KnobsOff]);
        with_recipe.recipe = vec!["deploy.yaml".into()];
        assert!(with_recipe.refuse(false).is_ok());
        assert!(matches!(with_recipe.refuse(true), Err(GateFlagError::KnobsOffWithKv)));
        assert!(flags(&[ControlKind::Tcp]).refuse_rails_controls().is_ok());
    }

    #[test]
    fn the_input_runs_the_default_controls_unless_told_and_names_a_bad_target() {
        let input = flags(&[]).input(settings()).unwrap();
        assert_eq!(input.controls, [ControlKind::Tcp, ControlKind::KnobsOff]);
        assert!(!input.knobs_off_asked);
        assert_eq!(input.image, icb_kube::podspec::default_image());
        let mut none = flags(&[ControlKind::KnobsOff]);
        none.no_controls = true;
        assert!(none.input(settings()).unwrap().controls.is_empty());
        let asked = flags(&[ControlKind::KnobsOff]).input(settings()).unwrap();
        assert_eq!(
            (asked.controls, asked.knobs_off_asked),
            (vec![ControlKind::KnobsOff], true)
        );
        let mut bad = flags(&[]);
        bad.decode = "b".into();
        let e = bad.input(settings()).unwrap_err();
        assert!(
            matches!(e, GateFlagError::Decode(_)) && e.to_string().starts_with("--decode: "),
            "{e}"
        );
    }

    #[test]
    fn the_criteria_state_the_settings_and_the_flags() {
        let mut f = flags(&[]);
        f.expect.min_host_gbps = Some(12.5);
        f.expect.config = Some("e.yaml".into());
        f.engine = EngineKind::Nixl;
        let c = f.criteria(&settings());
        assert_eq!((c.tests, c.sizes), (vec!["put_bw".to_string()], vec![1 << 20]));
        assert_eq!(
            (c.min_host_bw_bps, c.expect_config),
            (Some(12.5e9), Some("e.yaml".into()))
        );
        assert_eq!((c.engine.as_str(), c.profile.as_str()), ("nixl", "gate"));
        assert_eq!(c.rail_margin, None);
    }
}
