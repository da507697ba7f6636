//! Why a recipe could not be read, worded so the operator knows what to fix.

use std::path::PathBuf;

/// Every way loading a recipe can fail. Each message is one line that names the file.
#[derive(Debug, thiserror::Error)]
pub enum RecipeError {
    #[error("{path}: cannot read: {source} (check the path and its permissions)")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "{path}: not a regular file (a FIFO, socket or device); pass a YAML file, a directory, or - for standard input"
    )]
    NotRegular { path: PathBuf },
    #[error("{path}: no *.yaml or *.yml files found under this directory (pass the recipe files or their folder)")]
    EmptyDir { path: PathBuf },
    #[error("{file}: not UTF-8 text (invalid byte at offset {offset}); pass the YAML recipe, not a binary file")]
    NotUtf8 { file: String, offset: usize },
    #[error("{file}: larger than {limit} bytes; pass the recipe files themselves")]
    TooLarge { file: String, limit: usize },
    #[error("{file}:{line}:{col}: invalid YAML: {message}; fix the syntax there")]
    Yaml {
        file: String,
        line: usize,
        col: usize,
        message: String,
    },
    #[error("{file}:{line}: {message}")]
    Limit { file: String, line: usize, message: String },
    #[error(
        "{inputs}: no recipe found (no document has a `kind` or is a provider profile); pass the DynamoGraphDeployment, Deployment/StatefulSet/Job/Pod or LeaderWorkerSet YAML that runs the engine"
    )]
    NoRecipe { inputs: String },
    #[error("no inputs given: pass recipe files, directories, or `-` for standard input")]
    NoInputs,
    /// The input has to be rendered by another tool first (Helm, a kustomize feature this
    /// reader does not do).
    #[error("{what}: cannot be read as it is: {how}")]
    NeedsRender { what: String, how: String },
    /// Kubernetes objects, but none of a kind that runs an engine this reader knows.
    #[error(
        "{inputs}: no supported recipe kind (saw {seen}); pass a DynamoGraphDeployment, LLMInferenceService, DisaggregatedSet, LeaderWorkerSet, Deployment/StatefulSet/Job/Pod, a kustomization or a Helm chart (render other kinds to Deployments first)"
    )]
    Unsupported { inputs: String, seen: String },
}
