//! Recipes that must be rendered before they can be read: kustomizations (rendered here: their
//! `resources`, `components` and patch files are read relative to the kustomization, and the
//! patches applied by `patch`) and Helm charts (rendered by `helm template` when the binary is
//! installed; otherwise a one-line "render it first").

use crate::error::RecipeError;
use crate::load::{self, Document, MAX_INPUT_BYTES};
use crate::yaml::{Kind, Node};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// `helm template` gets this long; a chart that renders slower is not a recipe to wait for.
const HELM_DEADLINE: Duration = Duration::from_secs(60);
/// Kustomizations nest (overlay → base → component); deeper than this is a loop.
const MAX_KUSTOMIZE_DEPTH: usize = 16;

/// The file names kustomize looks for in a directory.
pub const KUSTOMIZATION_FILES: &[&str] = &["kustomization.yaml", "kustomization.yml", "Kustomization"];

/// Whether a document is a kustomization (by `apiVersion`/`kind`, or by its file name, since a
/// `kustomization.yaml` often has neither).
pub fn is_kustomization(d: &Document) -> bool {
    d.api_version()
        .is_some_and(|a| a.starts_with("kustomize.config.k8s.io"))
        || matches!(d.kind(), Some("Kustomization" | "Component"))
        || (KUSTOMIZATION_FILES.contains(&d.file_name()) && d.kind().is_none())
}

/// Top-level keys of the values files of the serving charts (vLLM production-stack
/// `servingEngineSpec`/`routerSpec`, llm-d modelservice `modelArtifacts`/`decode`/`prefill`
/// beside `routing`), besides the `values*.yaml` file name Helm itself uses.
const HELM_VALUES_KEYS: &[&str] = &["servingEngineSpec", "routerSpec", "modelArtifacts"];

/// Whether a kind-less document is a Helm chart's values (by file name or the charts' keys).
pub fn is_helm_values(d: &Document) -> bool {
    if d.kind().is_some() || !d.root.is_map() {
        return false;
    }
    let name = d.file_name();
    let named = name.starts_with("values") || name.ends_with("-values.yaml") || name.ends_with("-values.yml");
    named
        || d.root
            .as_map()
            .iter()
            .any(|(k, _)| HELM_VALUES_KEYS.contains(&k.as_str()))
}

/// A kustomization rendered: the documents it pulls in (its own patches inlined into a copy of
/// it, so `patch::merge_documents` applies them), every file it read, and what it could not do.
#[derive(Debug, Default)]
pub struct Rendered {
    pub docs: Vec<Document>,
    pub files: Vec<String>,
    pub notes: Vec<String>,
    /// Resources and bases that are not there (a base outside the given tree): the render is
    /// incomplete, so the kustomization cannot be judged — `kustomize:line: `rel` (path)`.
    pub missing: Vec<String>,
}

/// Renders the kustomization `k` (already loaded from its file).
pub fn kustomize(k: &Document) -> Rendered {
    let mut out = Rendered::default();
    render_into(k, 0, &mut out);
    out
}

fn render_into(k: &Document, depth: usize, out: &mut Rendered) {
    if depth > MAX_KUSTOMIZE_DEPTH {
        out.notes.push(format!(
            "{}: kustomizations nest deeper than {MAX_KUSTOMIZE_DEPTH}; stopped",
            k.source
        ));
        return;
    }
    push_unique(&mut out.files, &k.source);
    let dir = PathBuf::from(k.dir());
    let can_read = !k.source.starts_with('<');
    for key in ["resources", "bases", "components"] {
        for entry in k.root.get(key).map(Node::as_seq).unwrap_or_default() {
            let Some(rel) = entry.as_str() else { continue };
            if rel.contains("://") || rel.starts_with("github.com/") || rel.contains("?ref=") {
                out.notes.push(format!(
                    "{}:{}: remote {key} `{rel}` not fetched; render with `kubectl kustomize` and pass the output",
                    k.source, entry.line
                ));
                continue;
            }
            if !can_read {
                out.notes.push(format!(
                    "{}: {key} `{rel}` cannot be read relative to standard input",
                    k.source
                ));
                continue;
            }
            read_resource(&normalize(&dir.join(rel)), k, entry.line, depth, out);
        }
    }
    // The kustomization itself, with patch files inlined, so merge_documents applies them.
    let mut inlined = k.clone();
    inline_patch_files(&mut inlined, &dir, can_read, out);
    out.docs.push(inlined);
}

fn read_resource(path: &Path, k: &Document, line: usize, depth: usize, out: &mut Rendered) {
    if std::fs::symlink_metadata(path).is_err() {
        out.missing.push(format!("{}:{line}: `{}`", k.source, path.display()));
        return;
    }
    if path.is_dir() {
        let Some(file) = KUSTOMIZATION_FILES.iter().map(|f| path.join(f)).find(|p| p.is_file()) else {
            out.missing.push(format!(
                "{}:{line}: `{}` (a directory without kustomization.yaml)",
                k.source,
                path.display()
            ));
            return;
        };
        match load::read_file(&file) {
            Ok(docs) => {
                for d in docs.iter().filter(|d| d.root.is_map()) {
                    render_into(d, depth + 1, out);
                }
            }
            Err(e) => out.notes.push(e.to_string()),
        }
        return;
    }
    // Only regular files: a FIFO or device named as a resource would block or never end.
    if !path.is_file() {
        out.notes.push(format!(
            "{}:{line}: resource `{}` is not a readable file or kustomization directory",
            k.source,
            path.display()
        ));
        return;
    }
    match load::read_file(path) {
        Ok(docs) => {
            push_unique(&mut out.files, &path.display().to_string());
            out.docs.extend(docs);
        }
        Err(e) => out.notes.push(format!("{}:{line}: resource not read: {e}", k.source)),
    }
}

/// Replaces `patches: [{path: f}]` and `patchesStrategicMerge: [f]` by the files' text.
fn inline_patch_files(k: &mut Document, dir: &Path, can_read: bool, out: &mut Rendered) {
    let source = k.source.clone();
    let Kind::Map(entries) = &mut k.root.kind else { return };
    for (key, value) in entries.iter_mut() {
        let Kind::Seq(items) = &mut value.kind else { continue };
        for item in items.iter_mut() {
            let rel = match (key.as_str(), &item.kind) {
                ("patches" | "patchesJson6902", Kind::Map(_)) if item.get("patch").is_none() => {
                    item.str_at("path").map(str::to_string)
                }
                ("patchesStrategicMerge", Kind::Scalar(s)) if !s.contains('\n') => Some(s.clone()),
                _ => None,
            };
            let Some(rel) = rel else { continue };
            if !can_read {
                out.notes.push(format!(
                    "{source}: patch file `{rel}` cannot be read relative to standard input"
                ));
                continue;
            }
            let path = normalize(&dir.join(&rel));
            let text = match read_text(&path) {
                Ok(t) => t,
                Err(e) => {
                    out.notes
                        .push(format!("{source}:{}: patch file `{rel}` not read: {e}", item.line));
                    continue;
                }
            };
            push_unique(&mut out.files, &path.display().to_string());
            let text_node = Node::new(item.line, Kind::Scalar(text));
            match &mut item.kind {
                Kind::Map(fields) => {
                    fields.retain(|(k, _)| k != "path");
                    fields.push(("patch".to_string(), text_node));
                }
                _ => *item = text_node,
            }
        }
    }
}

/// `a/overlays/aws/../../base` → `a/base`, without touching the file system, so that a base
/// reached from two overlays (or walked directly) is recognised as the same file.
pub(crate) fn normalize(path: &Path) -> PathBuf {
    use std::path::Component;
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => {
                let popped = matches!(out.components().next_back(), Some(Component::Normal(_))) && out.pop();
                if !popped {
                    out.push("..");
                }
            }
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// [`normalize`] for a document's `source`.
pub(crate) fn same_file(source: &str) -> String {
    if source.starts_with('<') {
        return source.to_string();
    }
    normalize(Path::new(source)).display().to_string()
}

/// Why a patch file a kustomization names gives no text (the render notes it and goes on).
#[derive(Debug, thiserror::Error)]
enum Unreadable {
    #[error("not a regular file")]
    NotAFile,
    #[error("{0}")]
    Io(#[from] std::io::Error),
    #[error("not UTF-8 text")]
    NotUtf8,
}

fn read_text(path: &Path) -> Result<String, Unreadable> {
    if !path.is_file() {
        return Err(Unreadable::NotAFile);
    }
    let file = std::fs::File::open(path)?;
    let mut bytes = Vec::new();
    file.take(MAX_INPUT_BYTES as u64).read_to_end(&mut bytes)?;
    String::from_utf8(bytes).map_err(|_| Unreadable::NotUtf8)
}

fn push_unique(list: &mut Vec<String>, item: &str) {
    if !list.iter().any(|x| x == item) {
        list.push(item.to_string());
    }
}

/// Finds an executable on `PATH`.
pub fn find_binary(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join(name)).find(|p| p.is_file())
}

/// Renders a Helm chart with `helm template` (the chart's defaults, then each `values` file as
/// `-f FILE`), or says how to render it when `helm` is not installed.
pub fn helm_template(chart: &Path, values: &[PathBuf]) -> Result<Vec<Document>, RecipeError> {
    helm_template_with(find_binary("helm"), chart, values)
}

/// [`helm_template`] with the `helm` binary found (or not) by the caller.
fn helm_template_with(helm: Option<PathBuf>, chart: &Path, values: &[PathBuf]) -> Result<Vec<Document>, RecipeError> {
    let shown = chart.display().to_string();
    let Some(helm) = helm else {
        return Err(RecipeError::NeedsRender {
            what: shown.clone(),
            how: format!(
                "a Helm chart, and `helm` is not installed: render it first (`helm template NAME {shown}{} > rendered.yaml`) and pass rendered.yaml",
                if values.is_empty() {
                    " -f VALUES".to_string()
                } else {
                    values
                        .iter()
                        .map(|v| format!(" -f {}", v.display()))
                        .collect::<String>()
                }
            ),
        });
    };
    let failed = |how: String| RecipeError::NeedsRender {
        what: shown.clone(),
        how,
    };
    let mut child = std::process::Command::new(helm)
        .args(["template", "ic-bench-probe"])
        .arg(chart)
        .args(values.iter().flat_map(|v| [std::ffi::OsStr::new("-f"), v.as_os_str()]))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .map_err(|e| {
            failed(format!(
                "`helm template` could not start ({e}); render the chart yourself"
            ))
        })?;
    let mut stdout = child.stdout.take();
    let reader = std::thread::spawn(move || {
        let mut bytes = Vec::new();
        if let Some(s) = stdout.as_mut() {
            let _ = s.take(MAX_INPUT_BYTES as u64 + 1).read_to_end(&mut bytes);
        }
        bytes
    });
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(status)) => break status,
            Ok(None) if started.elapsed() < HELM_DEADLINE => std::thread::sleep(Duration::from_millis(50)),
            Ok(None) | Err(_) => {
                let _ = child.kill();
                let _ = child.wait();
                return Err(failed(format!(
                    "`helm template` did not finish within {} s; render the chart yourself",
                    HELM_DEADLINE.as_secs()
                )));
            }
        }
    };
    let bytes = reader.join().unwrap_or_default();
    if !status.success() {
        let mut err = String::new();
        if let Some(mut e) = child.stderr.take() {
            let _ = (&mut e).take(4096).read_to_string(&mut err);
        }
        let first = err.lines().next().unwrap_or("no message").to_string();
        return Err(failed(format!(
            "`helm template` failed ({status}): {first}; fix the chart or its values"
        )));
    }
    // Named after the chart folder so the rendered objects group as one recipe.
    load::parse_bytes(&format!("{shown}/(helm template)"), &bytes)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Both sides of the `helm` question, whatever this machine has installed: without it the
    /// error names the command to run with every `-f`; with it (a stand-in script) the values
    /// reach `helm template` and its output is what is read.
    #[test]
    fn values_reach_helm_template_or_the_command_to_run() {
        let t = tempfile::tempdir().unwrap();
        let chart = t.path().join("stack");
        let values = vec![t.path().join("values-01.yaml"), t.path().join("values-02.yaml")];
        let err = helm_template_with(None, &chart, &values).unwrap_err();
        let msg = err.to_string();
        for v in &values {
            assert!(msg.contains(&format!("-f {}", v.display())), "{msg}");
        }
        assert!(msg.contains("render it first"), "{msg}");

        let helm = t.path().join("helm");
        std::fs::write(
            &helm,
            "#!/bin/sh\nprintf 'apiVersion: v1\\nkind: ConfigMap\\nmetadata:\\n  name: args\\ndata:\\n  args: \"%s\"\\n' \"$*\"\n",
        )
        .unwrap();
        let mut perms = std::fs::metadata(&helm).unwrap().permissions();
        std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
        std::fs::set_permissions(&helm, perms).unwrap();
        let docs = helm_template_with(Some(helm), &chart, &values).unwrap();
        assert_eq!(docs.len(), 1);
        let args = format!("{:?}", docs[0].root);
        let expected = format!(
            "template ic-bench-probe {} -f {} -f {}",
            chart.display(),
            values[0].display(),
            values[1].display()
        );
        assert!(args.contains(&expected), "{args}");
    }

    #[test]
    fn paths_are_normalised_lexically() {
        assert_eq!(
            normalize(Path::new("a/overlays/aws/../../base")),
            PathBuf::from("a/base")
        );
        assert_eq!(normalize(Path::new("./x/../../y")), PathBuf::from("../y"));
        assert_eq!(normalize(Path::new("/r/./a/../b")), PathBuf::from("/r/b"));
    }

    #[test]
    fn a_missing_binary_is_not_found() {
        assert!(find_binary("ic-bench-no-such-tool").is_none());
    }
}
