//! File paths in table cells, shortened to what distinguishes them: the directory every path
//! shares is said once above the table instead of in every row.

/// The directory all the absolute or relative paths found in `cells` share (with its trailing
/// `/`), when stripping it shortens something; `None` when there is nothing to share.
pub fn common_dir<'a>(cells: impl IntoIterator<Item = &'a str>) -> Option<String> {
    let mut common: Option<Vec<&str>> = None;
    let mut paths = 0;
    for path in cells.into_iter().flat_map(path_tokens) {
        paths += 1;
        let dirs: Vec<&str> = match path.rsplit_once('/') {
            Some((dir, _)) => dir.split('/').collect(),
            None => return None,
        };
        common = Some(match common {
            None => dirs,
            Some(prev) => prev
                .iter()
                .zip(&dirs)
                .take_while(|(a, b)| a == b)
                .map(|(a, _)| *a)
                .collect(),
        });
    }
    let dir = common?.join("/");
    // A bare "/" or "" saves nothing worth a line of its own.
    (paths > 0 && dir.len() > 1).then(|| format!("{dir}/"))
}

/// `text` with every path under `dir` written relative to it.
pub fn strip_dir(text: &str, dir: Option<&str>) -> String {
    match dir {
        // `dir` is a whole directory path ending in '/': it only occurs as a path's beginning.
        Some(d) => text.replace(d, ""),
        None => text.to_string(),
    }
}

/// Words of `text` that look like file paths (contain a `/`, no URL scheme), without the
/// punctuation around them.
/// (Recipe scopes join the files of one workload with `+`.)
fn path_tokens(text: &str) -> impl Iterator<Item = &str> {
    text.split([' ', '+', ',', '(', ')', '[', ']', ';'])
        .map(|w| w.trim_end_matches(':'))
        .filter(|w| is_path(w))
}

/// Absolute or `./`-relative paths, and relative paths of recipe files (`dir/x.yaml:19`); not
/// resource names such as `rdma/ib` or URLs.
fn is_path(w: &str) -> bool {
    let file = w.split(':').next().unwrap_or(w);
    let recipe_file = [".yaml", ".yml", ".json"].iter().any(|ext| file.ends_with(ext));
    w.contains('/')
        && !w.contains("://")
        && !w.contains('=')
        && (w.starts_with('/') || w.starts_with('.') || recipe_file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shared_directory_is_said_once() {
        let cells = [
            "decode (VllmDecodeWorker, /srv/recipes/llama/deploy.yaml)",
            "prefill (VllmPrefillWorker, /srv/recipes/qwen/deploy.yaml)",
        ];
        let dir = common_dir(cells).unwrap();
        assert_eq!(dir, "/srv/recipes/");
        assert_eq!(
            strip_dir(cells[0], Some(&dir)),
            "decode (VllmDecodeWorker, llama/deploy.yaml)"
        );
    }

    #[test]
    fn relative_recipe_paths_count_but_resource_names_do_not() {
        let cells = ["prefill (w, recipes/fail/a.yaml)", "decode (w, recipes/fail/a.yaml)"];
        assert_eq!(common_dir(cells).as_deref(), Some("recipes/fail/"));
        assert_eq!(
            common_dir(["rdma/ib: 2", "prefill (w, recipes/x.yaml)"]).as_deref(),
            Some("recipes/")
        );
    }

    #[test]
    fn nothing_to_share_is_left_alone() {
        assert_eq!(common_dir(["mlx5_0:1", "prefill"]), None);
        assert_eq!(common_dir(["/a/x.yaml", "/b/y.yaml"]), None);
        assert_eq!(
            strip_dir(
                "p (w, /srv/a/x.yaml+/srv/a/y.yaml)",
                common_dir(["/srv/a/x.yaml+/srv/a/y.yaml"]).as_deref()
            ),
            "p (w, x.yaml+y.yaml)"
        );
    }
}
