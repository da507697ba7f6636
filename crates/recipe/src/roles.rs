//! Which recipe role models a side: one rule for every caller (the gate's node probes, its bench
//! pod templates, `probe node --recipe`), on roles loaded and resolved once.

use crate::TransportEnv;
use crate::model::{Role, RoleEnv};

/// One engine role (prefill, decode, worker) as resolved, with its transport variables.
#[derive(Debug, Clone)]
pub struct EngineRole {
    pub env: RoleEnv,
    pub transport: TransportEnv,
}

/// The engine roles of the recipes read from some inputs, in the order the recipes list them.
#[derive(Debug, Clone)]
pub struct RecipeRoles {
    pub(crate) roles: Vec<EngineRole>,
    /// The inputs, as the user named them (for messages).
    pub(crate) label: String,
}

/// Why no role could be picked; the message lists the roles there are.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RoleError {
    #[error("--recipe {inputs}: no prefill, decode or worker role found")]
    NoEngineRole { inputs: String },
    #[error("--role {wanted}: the recipe has {available}")]
    NoSuchRole { wanted: String, available: String },
    #[error("--recipe: no {side} role to model the {side} side on (the recipe has {available}); pick one with --role")]
    NoRoleForSide { side: String, available: String },
    #[error("--recipe: roles {available} carry different transport variables; pick one with --role")]
    RolesDiffer { available: String },
}

impl RecipeRoles {
    pub fn roles(&self) -> &[EngineRole] {
        &self.roles
    }

    fn available(&self) -> String {
        self.roles
            .iter()
            .map(|r| format!("{} ({})", r.env.role.as_str(), r.env.component))
            .collect::<Vec<_>>()
            .join(", ")
    }

    fn named(&self, wanted: &str) -> Result<&EngineRole, RoleError> {
        self.roles
            .iter()
            .find(|r| r.env.role.as_str() == wanted)
            .ok_or_else(|| RoleError::NoSuchRole {
                wanted: wanted.into(),
                available: self.available(),
            })
    }

    fn any(&self) -> Result<(), RoleError> {
        if self.roles.is_empty() {
            return Err(RoleError::NoEngineRole {
                inputs: self.label.clone(),
            });
        }
        Ok(())
    }

    /// The role that models `side` (prefill or decode): `explicit` (`--role`) when given, else
    /// the side's own role, a `worker` role (aggregated serving), or the only engine role.
    pub fn for_side(&self, side: Role, explicit: Option<&str>) -> Result<&EngineRole, RoleError> {
        self.any()?;
        if let Some(wanted) = explicit {
            return self.named(wanted);
        }
        self.roles
            .iter()
            .find(|r| r.env.role == side)
            .or_else(|| self.roles.iter().find(|r| r.env.role == Role::Worker))
            .or_else(|| (self.roles.len() == 1).then(|| &self.roles[0]))
            .ok_or_else(|| RoleError::NoRoleForSide {
                side: side.as_str().to_string(),
                available: self.available(),
            })
    }

    /// The role a node is probed against when no side is known (`probe node --recipe`):
    /// `explicit` when given, else the one every role shares (their transport variables agree).
    pub fn shared(&self, explicit: Option<&str>) -> Result<&EngineRole, RoleError> {
        self.any()?;
        if let Some(wanted) = explicit {
            return self.named(wanted);
        }
        let first = &self.roles[0];
        if self.roles.iter().any(|r| r.transport.vars != first.transport.vars) {
            return Err(RoleError::RolesDiffer {
                available: self.available(),
            });
        }
        Ok(first)
    }
}
