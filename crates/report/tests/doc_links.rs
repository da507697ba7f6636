//! The documentation holds together: every relative link in README.md, BENCHMARKS.md, FUZZING.md
//! and docs/**/*.md names a file that exists, and an `#anchor` names a heading of the target (as
//! GitHub makes its anchors); every page under docs/ is reachable from the README; the README and
//! BENCHMARKS.md stay short front pages (issue 38), and the README's Testing section keeps the
//! test command `.ci/run` runs.

use std::collections::{HashMap, HashSet};
use std::fs;
use std::path::{Path, PathBuf};

/// The README and BENCHMARKS.md are front pages that link the rest: at most this many bytes.
const FRONT_PAGE_LIMIT: usize = 15_000;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .unwrap()
}

fn markdown_files(root: &Path) -> Vec<PathBuf> {
    let mut files = vec![
        root.join("README.md"),
        root.join("BENCHMARKS.md"),
        root.join("FUZZING.md"),
    ];
    let mut dirs = vec![root.join("docs")];
    while let Some(dir) = dirs.pop() {
        for entry in fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "md") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// The lines outside fenced code blocks, numbered from 1.
fn prose_lines(text: &str) -> Vec<(usize, &str)> {
    let mut fence: Option<&str> = None;
    let mut lines = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim_start();
        let marker = ["```", "~~~"].into_iter().find(|m| trimmed.starts_with(m));
        match (fence, marker) {
            (None, Some(m)) => fence = Some(m),
            (Some(open), Some(m)) if open == m => fence = None,
            (Some(_), _) => {}
            (None, None) => lines.push((i + 1, line)),
        }
    }
    lines
}

/// The line without its `code spans` (a `](` inside one is not a link).
fn without_code_spans(line: &str) -> String {
    let mut out = String::new();
    let mut rest = line;
    while let Some(start) = rest.find('`') {
        out.push_str(&rest[..start]);
        let ticks = rest[start..].len() - rest[start..].trim_start_matches('`').len();
        let delimiter = &rest[start..start + ticks];
        let after = &rest[start + ticks..];
        match after.find(delimiter) {
            Some(end) => rest = &after[end + ticks..],
            None => {
                out.push_str(&rest[start..]);
                return out;
            }
        }
    }
    out.push_str(rest);
    out
}

/// The targets of the inline links and images of one line: `[text](target "title")`.
fn link_targets(line: &str) -> Vec<String> {
    let mut targets = Vec::new();
    let mut rest = line;
    while let Some(i) = rest.find("](") {
        let after = &rest[i + 2..];
        let end = after.find(')').unwrap_or(after.len());
        let target = after[..end].split_whitespace().next().unwrap_or("");
        targets.push(target.trim_matches(['<', '>']).to_string());
        rest = &after[end..];
    }
    targets
}

/// GitHub's anchor for a heading: lower case, spaces to `-`, other punctuation dropped.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// Every anchor a page's headings give, repeated headings numbered `-1`, `-2` as GitHub does.
fn anchors(text: &str) -> HashSet<String> {
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut anchors = HashSet::new();
    for (_, line) in prose_lines(text) {
        let level = line.len() - line.trim_start_matches('#').len();
        if !(1..=6).contains(&level) || !line[level..].starts_with(' ') {
            continue;
        }
        let s = slug(line[level..].trim().trim_end_matches('#'));
        let n = seen.entry(s.clone()).or_insert(0);
        anchors.insert(if *n == 0 { s.clone() } else { format!("{s}-{n}") });
        *n += 1;
    }
    anchors
}

struct Link {
    line: usize,
    target: String,
    /// The file it names (the page itself for `#anchor`).
    file: PathBuf,
    anchor: Option<String>,
}

/// The relative links of one page (web and mail links are not checked).
fn relative_links(page: &Path) -> Vec<Link> {
    let text = fs::read_to_string(page).unwrap();
    let mut links = Vec::new();
    for (line, prose) in prose_lines(&text) {
        for target in link_targets(&without_code_spans(prose)) {
            if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (path, anchor) = match target.split_once('#') {
                Some((path, anchor)) => (path, Some(anchor.to_string())),
                None => (target.as_str(), None),
            };
            let file = if path.is_empty() {
                page.to_path_buf()
            } else {
                page.parent().unwrap().join(path)
            };
            links.push(Link {
                line,
                target: target.clone(),
                file,
                anchor,
            });
        }
    }
    links
}

/// What is wrong with one page's links, one line each.
fn broken_links(page: &Path, links: &[Link]) -> Vec<String> {
    let mut broken = Vec::new();
    for link in links {
        let at = format!("{}:{}: ({})", page.display(), link.line, link.target);
        if !link.file.exists() {
            broken.push(format!("{at}: no file {}", link.file.display()));
        } else if let Some(anchor) = &link.anchor {
            let is_markdown = link.file.extension().is_some_and(|e| e == "md");
            if is_markdown && !anchors(&fs::read_to_string(&link.file).unwrap()).contains(anchor) {
                broken.push(format!("{at}: no heading gives #{anchor}"));
            }
        }
    }
    broken
}

#[test]
fn every_relative_link_resolves() {
    let root = root();
    let mut checked = 0;
    let mut broken = Vec::new();
    for page in markdown_files(&root) {
        let links = relative_links(&page);
        checked += links.len();
        broken.extend(broken_links(page.strip_prefix(&root).unwrap_or(&page), &links));
    }
    // The README alone links a dozen pages: finding few links means the parser broke, not the docs.
    assert!(checked > 50, "only {checked} relative links found");
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
}

#[test]
fn every_docs_page_is_reachable_from_the_readme() {
    let root = root();
    let mut reached: HashSet<PathBuf> = HashSet::new();
    let mut todo = vec![root.join("README.md")];
    while let Some(page) = todo.pop() {
        let page = page.canonicalize().unwrap();
        if !reached.insert(page.clone()) {
            continue;
        }
        for link in relative_links(&page) {
            let is_markdown = link.file.extension().is_some_and(|e| e == "md");
            if is_markdown && link.file.exists() && link.file.starts_with(&root) {
                todo.push(link.file);
            }
        }
    }
    let orphans: Vec<_> = markdown_files(&root)
        .into_iter()
        .filter(|p| !reached.contains(&p.canonicalize().unwrap()))
        // docs/dev/ is for the people working on ic-bench; testing.md is linked, the rest need not be.
        .filter(|p| !p.starts_with(root.join("docs/dev")))
        .map(|p| p.strip_prefix(&root).unwrap().display().to_string())
        .collect();
    assert!(orphans.is_empty(), "pages no link from README.md leads to: {orphans:?}");
}

#[test]
fn the_front_pages_stay_short() {
    for name in ["README.md", "BENCHMARKS.md"] {
        let size = fs::read(root().join(name)).unwrap().len();
        assert!(
            size <= FRONT_PAGE_LIMIT,
            "{name} is {size} bytes, over {FRONT_PAGE_LIMIT}: move the detail to a page under docs/ and link it"
        );
    }
}

#[test]
fn the_readme_keeps_the_test_command_ci_runs() {
    let readme = fs::read_to_string(root().join("README.md")).unwrap();
    let ci = fs::read_to_string(root().join(".ci/run")).unwrap();
    let testing = readme
        .split("\n## Testing\n")
        .nth(1)
        .expect("README.md has a Testing section");
    let testing = testing.split("\n## ").next().unwrap();
    assert!(
        testing.contains("cargo test --workspace"),
        "README's Testing section lost the test command"
    );
    // CI runs it through scripts/linted (clippy-driver compiles the workspace's crates, so the
    // run rebuilds nothing the linted test build made): the command itself is the README's.
    let runs_it = |l: &str| {
        let l = l.trim_start();
        let l = l.strip_prefix("scripts/linted ").unwrap_or(l);
        l.starts_with("cargo test --workspace") && !l.contains("--no-run")
    };
    assert!(
        ci.lines().any(runs_it),
        ".ci/run no longer runs `cargo test --workspace`: update README.md's Testing section with it"
    );
}

#[test]
fn the_checker_finds_a_missing_file_and_a_missing_anchor() {
    assert_eq!(slug("Exit codes (a contract)"), "exit-codes-a-contract");
    assert_eq!(slug("`ic-bench pair` and `--rails`"), "ic-bench-pair-and---rails");
    assert_eq!(
        slug("Issue 18, 2026-11-26 03:44 UTC (load 0.4–1.1)"),
        "issue-18-2026-11-26-0344-utc-load-0411"
    );
    let text = "# Title\n\n## Part\n\n```sh\n# not a heading\n```\n\n## Part\n";
    let a = anchors(text);
    assert!(
        a.contains("title") && a.contains("part") && a.contains("part-1"),
        "{a:?}"
    );
    assert!(!a.contains("not-a-heading"));

    let dir = std::env::temp_dir().join(format!("icb-doc-links-{}", std::process::id()));
    fs::create_dir_all(dir.join("docs")).unwrap();
    fs::write(dir.join("docs/page.md"), text).unwrap();
    let page = dir.join("README.md");
    fs::write(
        &page,
        "[ok](docs/page.md#part-1) [gone](docs/gone.md) [no anchor](docs/page.md#nope) [self](#top)\n\
         `[in code](docs/gone.md)` [web](https://example.com/x.md)\n\n```\n[fenced](docs/gone.md)\n```\n",
    )
    .unwrap();
    let links = relative_links(&page);
    let targets: Vec<_> = links.iter().map(|l| l.target.as_str()).collect();
    assert_eq!(
        targets,
        ["docs/page.md#part-1", "docs/gone.md", "docs/page.md#nope", "#top"]
    );
    let broken = broken_links(&page, &links);
    fs::remove_dir_all(&dir).unwrap();
    assert_eq!(broken.len(), 3, "{broken:#?}");
    assert!(broken[0].contains("(docs/gone.md): no file"), "{}", broken[0]);
    assert!(broken[1].contains("no heading gives #nope"), "{}", broken[1]);
    assert!(broken[2].contains("no heading gives #top"), "{}", broken[2]);
}
