//! `pair --recipe FILE… [--role ROLE]`: each side of a pair run under a serving recipe's
//! transport env (what `probe env` reads, each side its role's), and the `UCX_*`/`NIXL_*` names a
//! `--control knobs-off` turns off, refused before anything runs when there are none.

use icb_pair::local::RecipeEnv;
use icb_recipe::{RecipeError, Role, RoleError};

/// Why a pair cannot take its sides' env from the recipe (one line, exit 2).
#[derive(Debug, thiserror::Error)]
pub enum PairEnvError {
    #[error(transparent)]
    Recipe(#[from] RecipeError),
    #[error(transparent)]
    Role(#[from] RoleError),
    #[error(
        "--control knobs-off compares a recipe's transport env with UCX's defaults: pass --local --recipe FILE (or use it with `ic-bench gate --recipe`)"
    )]
    KnobsOffWithoutRecipe,
    #[error(
        "--control knobs-off: the recipe sets no UCX_* or NIXL_* variable for its workers, so there is nothing to turn off: drop knobs-off"
    )]
    NoKnobs,
}

/// The recipe's env for each side, with the knob names a knobs-off control turns off; none of
/// either without a recipe. `knobs_off`: the run asks for that control, which needs knobs.
pub fn pair_env(
    paths: &[String],
    role: Option<&str>,
    knobs_off: bool,
) -> Result<(RecipeEnv, Vec<String>), PairEnvError> {
    let env = sides_env(paths, role)?;
    let knobs = icb_pair::controls::knob_vars(&env);
    match (knobs_off && knobs.is_empty(), paths.is_empty()) {
        (true, true) => Err(PairEnvError::KnobsOffWithoutRecipe),
        (true, false) => Err(PairEnvError::NoKnobs),
        (false, _) => Ok((env, knobs)),
    }
}

fn sides_env(paths: &[String], role: Option<&str>) -> Result<RecipeEnv, PairEnvError> {
    if paths.is_empty() {
        return Ok(RecipeEnv::default());
    }
    let inputs: Vec<icb_recipe::Input> = paths.iter().map(|p| icb_recipe::Input::from_arg(p)).collect();
    let (_, roles) = icb_recipe::probe_env_and_roles(&inputs, &icb_recipe::EnvOptions::default())?;
    let env = |side| -> Result<Vec<(String, String)>, PairEnvError> {
        let (env, _) = crate::kube::node_env(roles.for_side(side, role)?);
        Ok(env.vars.into_iter().collect())
    };
    Ok(RecipeEnv {
        prefill: env(Role::Prefill)?,
        decode: env(Role::Decode)?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn knobs_off_without_a_recipe_is_refused_and_without_it_nothing_is_read() {
        let e = pair_env(&[], None, true).unwrap_err();
        assert!(matches!(e, PairEnvError::KnobsOffWithoutRecipe), "{e}");
        assert!(
            e.to_string()
                .starts_with("--control knobs-off compares a recipe's transport env")
        );
        assert_eq!(pair_env(&[], None, false).unwrap(), (RecipeEnv::default(), vec![]));
    }

    #[test]
    fn a_missing_recipe_file_is_the_recipes_own_error() {
        let e = pair_env(&["/nonexistent/recipe.yaml".into()], None, false).unwrap_err();
        assert!(matches!(e, PairEnvError::Recipe(_)), "{e}");
    }
}
