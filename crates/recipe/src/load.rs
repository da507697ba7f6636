//! Turns command-line inputs (files, directories, `-`) into parsed YAML documents, in a
//! deterministic order: inputs as given, directory entries sorted by path.

use crate::error::RecipeError;
use crate::yaml::{self, Node};
use std::io::Read;
use std::path::{Path, PathBuf};

/// Recipes larger than this are certainly not recipes; refusing keeps memory bounded.
pub const MAX_INPUT_BYTES: usize = 32 * 1024 * 1024;
/// Directories deeper than this are not walked (guards against symlink loops).
const MAX_DIR_DEPTH: usize = 16;

/// One thing to read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    /// A file, or a directory searched recursively for `*.yaml` / `*.yml`.
    Path(PathBuf),
    /// Standard input (`-` on the command line).
    Stdin,
    /// Text already in memory; `name` is what errors and scopes call it.
    Text { name: String, content: String },
}

impl Input {
    /// `-` means standard input; anything else is a path.
    pub fn from_arg(arg: &str) -> Input {
        if arg == "-" {
            Input::Stdin
        } else {
            Input::Path(PathBuf::from(arg))
        }
    }

    /// A short label for report targets.
    pub fn label(&self) -> String {
        match self {
            Input::Path(p) => p.display().to_string(),
            Input::Stdin => "<stdin>".to_string(),
            Input::Text { name, .. } => name.clone(),
        }
    }
}

/// One YAML document of one source file.
#[derive(Debug, Clone)]
pub struct Document {
    /// The file it came from (`<stdin>` for standard input).
    pub source: String,
    /// Position of the document in its file, from 0.
    pub index: usize,
    pub root: Node,
    /// Found by walking a directory rather than named on the command line: a provider overlay
    /// found this way is not applied to the recipes beside it (overlays apply only when named).
    pub from_dir: bool,
}

impl Document {
    pub fn kind(&self) -> Option<&str> {
        self.root.str_at("kind")
    }

    pub fn api_version(&self) -> Option<&str> {
        self.root.str_at("apiVersion")
    }

    pub fn name(&self) -> Option<&str> {
        self.root.path(&["metadata", "name"]).and_then(Node::as_str)
    }

    /// The file's name without its directories (`kustomization.yaml`).
    pub fn file_name(&self) -> &str {
        self.source.rsplit('/').next().unwrap_or(&self.source)
    }

    /// The directory of the file it came from (`.` for a bare file name, empty for stdin).
    pub fn dir(&self) -> &str {
        if self.source.starts_with('<') {
            return "";
        }
        match self.source.rfind('/') {
            Some(i) => &self.source[..i],
            None => ".",
        }
    }

    /// `file:line` of the document's first node.
    pub fn location(&self) -> String {
        format!("{}:{}", self.source, self.root.line)
    }
}

/// Reads and parses every input. Fails on the first unreadable file or YAML syntax error.
pub fn load_inputs(inputs: &[Input]) -> Result<Vec<Document>, RecipeError> {
    load_inputs_with(inputs, &[])
}

/// [`load_inputs`], rendering Helm charts with these values files (`helm template -f FILE`).
pub fn load_inputs_with(inputs: &[Input], helm_values: &[PathBuf]) -> Result<Vec<Document>, RecipeError> {
    if inputs.is_empty() {
        return Err(RecipeError::NoInputs);
    }
    let mut docs = Vec::new();
    for input in inputs {
        match input {
            Input::Stdin => {
                let mut bytes = Vec::new();
                std::io::stdin()
                    .take(MAX_INPUT_BYTES as u64 + 1)
                    .read_to_end(&mut bytes)
                    .map_err(|source| RecipeError::Io {
                        path: PathBuf::from("<stdin>"),
                        source,
                    })?;
                docs.extend(parse_bytes("<stdin>", &bytes)?);
            }
            Input::Text { name, content } => docs.extend(parse_bytes(name, content.as_bytes())?),
            Input::Path(path) => {
                let meta = std::fs::metadata(path).map_err(|source| RecipeError::Io {
                    path: path.clone(),
                    source,
                })?;
                if meta.is_dir() {
                    if path.join("Chart.yaml").is_file() {
                        docs.extend(crate::render::helm_template(path, helm_values)?);
                        continue;
                    }
                    let mut files = Vec::new();
                    let mut charts = Vec::new();
                    walk(path, 0, &mut files, &mut charts)?;
                    if files.is_empty() && charts.is_empty() {
                        return Err(RecipeError::EmptyDir { path: path.clone() });
                    }
                    files.sort();
                    for f in files {
                        let mut found = read_file(&f)?;
                        found.iter_mut().for_each(|d| d.from_dir = true);
                        docs.extend(found);
                    }
                    charts.sort();
                    for c in charts {
                        let mut found = crate::render::helm_template(&c, helm_values)?;
                        found.iter_mut().for_each(|d| d.from_dir = true);
                        docs.extend(found);
                    }
                } else if meta.is_file() {
                    docs.extend(read_file(path)?);
                } else {
                    // Opening a FIFO, socket or device would block or never end.
                    return Err(RecipeError::NotRegular { path: path.clone() });
                }
            }
        }
    }
    Ok(docs)
}

pub(crate) fn read_file(path: &Path) -> Result<Vec<Document>, RecipeError> {
    let file = std::fs::File::open(path).map_err(|source| RecipeError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let mut bytes = Vec::new();
    file.take(MAX_INPUT_BYTES as u64 + 1)
        .read_to_end(&mut bytes)
        .map_err(|source| RecipeError::Io {
            path: path.to_path_buf(),
            source,
        })?;
    parse_bytes(&path.display().to_string(), &bytes)
}

/// Collects `*.yaml`/`*.yml` files under `dir`; a folder holding `Chart.yaml` is a Helm chart
/// (its templates are not YAML until rendered), collected apart and not walked into.
fn walk(dir: &Path, depth: usize, out: &mut Vec<PathBuf>, charts: &mut Vec<PathBuf>) -> Result<(), RecipeError> {
    if depth > MAX_DIR_DEPTH {
        return Ok(());
    }
    let entries = std::fs::read_dir(dir).map_err(|source| RecipeError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    for entry in entries {
        let entry = entry.map_err(|source| RecipeError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
        let path = entry.path();
        let hidden = path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.starts_with('.'));
        if hidden {
            continue;
        }
        let ft = entry.file_type().map_err(|source| RecipeError::Io {
            path: path.clone(),
            source,
        })?;
        // Only regular files (or links to them) are read: opening a FIFO or a device found
        // in a directory would block or read forever.
        let regular = ft.is_file() || (ft.is_symlink() && std::fs::metadata(&path).is_ok_and(|m| m.is_file()));
        if ft.is_dir() && path.join("Chart.yaml").is_file() {
            charts.push(path);
        } else if ft.is_dir() {
            walk(&path, depth + 1, out, charts)?;
        } else if regular
            && path
                .extension()
                .and_then(|e| e.to_str())
                .is_some_and(|e| e == "yaml" || e == "yml")
        {
            out.push(path);
        }
    }
    Ok(())
}

/// Parses raw bytes as a YAML stream. Never panics, whatever the bytes.
pub fn parse_bytes(name: &str, bytes: &[u8]) -> Result<Vec<Document>, RecipeError> {
    if bytes.len() > MAX_INPUT_BYTES {
        return Err(RecipeError::TooLarge {
            file: name.to_string(),
            limit: MAX_INPUT_BYTES,
        });
    }
    let text = std::str::from_utf8(bytes).map_err(|e| RecipeError::NotUtf8 {
        file: name.to_string(),
        offset: e.valid_up_to(),
    })?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let raw = yaml::parse_stream(name, text).map_err(|e| match e {
        // `{{ .Values.x }}` is a Helm/Go template: not a YAML error to fix but a step to run.
        RecipeError::Yaml { .. } if text.contains("{{") && text.contains("}}") => RecipeError::NeedsRender {
            what: name.to_string(),
            how: "this is a Helm template: render the chart first (`helm template NAME CHART_DIR > rendered.yaml`) and pass the output, or pass the chart directory with `helm` installed".to_string(),
        },
        other => other,
    })?;
    Ok(raw
        .into_iter()
        .enumerate()
        .map(|(index, d)| Document {
            source: name.to_string(),
            index,
            root: d.root,
            from_dir: false,
        })
        .collect())
}
