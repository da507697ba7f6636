//! A small YAML tree built from parser events, keeping every scalar's source text and line.
//!
//! Why not deserialize into a generic value: Kubernetes env values such as `n`, `0` or `on` must
//! stay the strings that were written (a YAML 1.1 reader would turn them into booleans), and
//! every node carries its line so checks can point at it. Comments are not data: the parser
//! drops them, so a commented-out `# - name: UCX_TLS` can never count as set.

use crate::error::RecipeError;
use serde_saphyr::granit_parser::{Event, Parser};
use std::collections::{HashMap, HashSet};

/// Lists and maps are read up to this many entries: no recipe comes near it, and it keeps
/// every rule's work linear in the input whatever the input is.
pub const MAX_ITEMS: usize = 4096;
/// Nested collections deeper than this are refused rather than risking the stack.
const MAX_DEPTH: usize = 200;
/// Alias expansion may not grow a document past this many nodes ("billion laughs").
const MAX_NODES: usize = 2_000_000;

/// One YAML node with the line (1-based) where it starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Node {
    pub line: usize,
    pub kind: Kind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    Null,
    /// The scalar text as written (after YAML escape processing), whatever its implied type.
    Scalar(String),
    Seq(Vec<Node>),
    /// Keys are scalars' text; order is kept; a repeated key replaces the earlier value.
    Map(Vec<(String, Node)>),
}

impl Node {
    pub fn new(line: usize, kind: Kind) -> Self {
        Node { line, kind }
    }

    /// `self[key]` for a mapping; `None` for anything else.
    pub fn get(&self, key: &str) -> Option<&Node> {
        match &self.kind {
            Kind::Map(entries) => entries.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v),
            _ => None,
        }
    }

    /// Walks a dotted path of mapping keys.
    pub fn path(&self, keys: &[&str]) -> Option<&Node> {
        keys.iter().try_fold(self, |n, k| n.get(k))
    }

    pub fn as_str(&self) -> Option<&str> {
        match &self.kind {
            Kind::Scalar(s) => Some(s),
            _ => None,
        }
    }

    /// A string field, trimmed; `None` when missing, null or not a scalar.
    pub fn str_at(&self, key: &str) -> Option<&str> {
        self.get(key).and_then(Node::as_str).map(str::trim)
    }

    /// The items of a sequence, at most [`MAX_ITEMS`] of them.
    pub fn as_seq(&self) -> &[Node] {
        match &self.kind {
            Kind::Seq(items) => &items[..items.len().min(MAX_ITEMS)],
            _ => &[],
        }
    }

    /// The entries of a mapping, at most [`MAX_ITEMS`] of them.
    pub fn as_map(&self) -> &[(String, Node)] {
        match &self.kind {
            Kind::Map(entries) => &entries[..entries.len().min(MAX_ITEMS)],
            _ => &[],
        }
    }

    pub fn is_map(&self) -> bool {
        matches!(self.kind, Kind::Map(_))
    }

    /// YAML 1.1 and 1.2 spellings of true (Kubernetes' reader accepts both).
    pub fn is_true(&self) -> bool {
        self.as_str()
            .map(|s| matches!(s.trim().to_ascii_lowercase().as_str(), "true" | "yes" | "on" | "y"))
            .unwrap_or(false)
    }

    fn size(&self) -> usize {
        // Iterative so that sizing a deep tree cannot overflow the stack.
        let mut count = 0;
        let mut stack = vec![self];
        while let Some(n) = stack.pop() {
            count += 1;
            match &n.kind {
                Kind::Seq(items) => stack.extend(items.iter()),
                Kind::Map(entries) => stack.extend(entries.iter().map(|(_, v)| v)),
                _ => {}
            }
        }
        count
    }
}

enum Frame {
    Seq {
        line: usize,
        anchor: usize,
        items: Vec<Node>,
    },
    Map {
        line: usize,
        anchor: usize,
        entries: Vec<(String, Node)>,
        key: Option<String>,
    },
}

/// A parsed document: its root and the line of its first node.
#[derive(Debug, Clone)]
pub struct RawDoc {
    pub root: Node,
}

/// Parses every document of a YAML stream. `file` only names the source in errors.
pub fn parse_stream(file: &str, text: &str) -> Result<Vec<RawDoc>, RecipeError> {
    let mut docs = Vec::new();
    let mut stack: Vec<Frame> = Vec::new();
    let mut anchors: HashMap<usize, Node> = HashMap::new();
    let mut nodes = 0usize;
    let mut root: Option<Node> = None;
    let limit = |line: usize, message: &str| RecipeError::Limit {
        file: file.to_string(),
        line,
        message: message.to_string(),
    };
    for item in Parser::new_from_str(text) {
        let (event, span) = item.map_err(|e| RecipeError::Yaml {
            file: file.to_string(),
            line: e.marker().line(),
            col: e.marker().col() + 1,
            message: e.info().replace(['\n', '\r'], " "),
        })?;
        let line = span.start.line();
        let finished: Option<(Node, usize)> = match event {
            Event::DocumentStart(..) => {
                anchors.clear();
                root = None;
                None
            }
            Event::DocumentEnd => {
                if let Some(r) = root.take() {
                    docs.push(RawDoc { root: r });
                }
                None
            }
            Event::Scalar(text, style, anchor, _tag) => {
                let plain = matches!(style, serde_saphyr::granit_parser::ScalarStyle::Plain);
                let kind = if plain && matches!(text.as_ref(), "" | "~" | "null" | "Null" | "NULL") {
                    Kind::Null
                } else {
                    Kind::Scalar(text.into_owned())
                };
                Some((Node::new(line, kind), anchor))
            }
            Event::Alias(id) => {
                let node = anchors.get(&id).cloned().unwrap_or(Node::new(line, Kind::Null));
                nodes += node.size();
                if nodes > MAX_NODES {
                    return Err(limit(
                        line,
                        "alias expansion exceeds 2,000,000 nodes; remove the recursive aliases",
                    ));
                }
                Some((node, 0))
            }
            Event::SequenceStart(_, anchor, _) => {
                stack.push(Frame::Seq {
                    line,
                    anchor,
                    items: Vec::new(),
                });
                None
            }
            Event::MappingStart(_, anchor, _) => {
                stack.push(Frame::Map {
                    line,
                    anchor,
                    entries: Vec::new(),
                    key: None,
                });
                None
            }
            Event::SequenceEnd => match stack.pop() {
                Some(Frame::Seq { line, anchor, items }) => Some((Node::new(line, Kind::Seq(items)), anchor)),
                _ => return Err(limit(line, "unbalanced sequence in the YAML event stream")),
            },
            Event::MappingEnd => match stack.pop() {
                Some(Frame::Map {
                    line, anchor, entries, ..
                }) => Some((Node::new(line, Kind::Map(apply_merge_keys(entries))), anchor)),
                _ => return Err(limit(line, "unbalanced mapping in the YAML event stream")),
            },
            _ => None,
        };
        if stack.len() > MAX_DEPTH {
            return Err(limit(line, "nested deeper than 200 levels; a recipe never needs this"));
        }
        if let Some((node, anchor)) = finished {
            nodes += 1;
            if nodes > MAX_NODES {
                return Err(limit(line, "more than 2,000,000 YAML nodes; split the input"));
            }
            if anchor != 0 {
                anchors.insert(anchor, node.clone());
            }
            attach(&mut stack, &mut root, node);
        }
    }
    if let Some(r) = root.take() {
        docs.push(RawDoc { root: r });
    }
    Ok(docs)
}

fn attach(stack: &mut [Frame], root: &mut Option<Node>, node: Node) {
    match stack.last_mut() {
        None => *root = Some(node),
        Some(Frame::Seq { items, .. }) => items.push(node),
        Some(Frame::Map { entries, key, .. }) => match key.take() {
            None => *key = Some(key_text(&node)),
            Some(k) => entries.push((k, node)),
        },
    }
}

fn key_text(node: &Node) -> String {
    match &node.kind {
        Kind::Null => String::new(),
        Kind::Scalar(s) => s.clone(),
        // Complex keys never name a Kubernetes field; keep them distinct but harmless.
        Kind::Seq(_) | Kind::Map(_) => format!("<complex key at line {}>", node.line),
    }
}

/// Finishes a mapping: `<<: *base` merges the aliased mapping(s) under keys that are not set
/// explicitly, and a repeated key keeps its last value. Linear in the entries (hash sets), since
/// the input is untrusted.
fn apply_merge_keys(entries: Vec<(String, Node)>) -> Vec<(String, Node)> {
    let mut own: Vec<(String, Node)> = Vec::new();
    let mut merged: Vec<(String, Node)> = Vec::new();
    for (k, v) in entries {
        if k != "<<" {
            own.push((k, v));
            continue;
        }
        let sources: Vec<Node> = match v.kind {
            Kind::Seq(items) => items,
            _ => vec![v],
        };
        for src in sources {
            if let Kind::Map(m) = src.kind {
                merged.extend(m);
            }
        }
    }
    // Explicit keys beat merged ones; among merged sources the first wins; among explicit
    // duplicates the last wins.
    let mut seen: HashSet<String> = HashSet::new();
    let mut out_rev: Vec<(String, Node)> = Vec::new();
    for (k, v) in own.into_iter().rev() {
        if seen.insert(k.clone()) {
            out_rev.push((k, v));
        }
    }
    let mut out: Vec<(String, Node)> = Vec::new();
    for (k, v) in merged {
        if seen.insert(k.clone()) {
            out.push((k, v));
        }
    }
    out.extend(out_rev.into_iter().rev());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keeps_scalar_text_and_lines() {
        let docs = parse_stream("t.yaml", "a: n\nb:\n  - 0\n  - \"x\"\n---\nc: ~\n").unwrap();
        assert_eq!(docs.len(), 2);
        assert_eq!(docs[0].root.str_at("a"), Some("n"));
        assert_eq!(docs[0].root.get("b").unwrap().as_seq()[0].as_str(), Some("0"));
        assert_eq!(docs[0].root.get("b").unwrap().line, 3);
        assert_eq!(docs[1].root.get("c").unwrap().kind, Kind::Null);
    }

    #[test]
    fn merge_keys_and_aliases() {
        let docs = parse_stream("t", "base: &b {x: 1, y: 2}\nd:\n  <<: *b\n  y: 3\n").unwrap();
        let d = docs[0].root.get("d").unwrap();
        assert_eq!(d.str_at("x"), Some("1"));
        assert_eq!(d.str_at("y"), Some("3"));
    }

    #[test]
    fn syntax_error_names_file_and_line() {
        let err = parse_stream("bad.yaml", "a: 1\nb: [1, 2\nc: 3\n")
            .unwrap_err()
            .to_string();
        assert!(err.starts_with("bad.yaml:"), "{err}");
        assert!(!err.contains('\n'));
    }

    #[test]
    fn repeated_keys_keep_the_last_value() {
        let docs = parse_stream("t", "a: 1\nb: 2\na: 3\n").unwrap();
        assert_eq!(docs[0].root.as_map().len(), 2);
        assert_eq!(docs[0].root.str_at("a"), Some("3"));
    }

    #[test]
    fn billion_laughs_is_refused() {
        let mut s = String::from("a: &a [x, x, x, x, x, x, x, x, x, x]\n");
        let mut prev = 'a';
        for c in 'b'..='k' {
            s.push_str(&format!(
                "{c}: &{c} [*{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}, *{prev}]\n"
            ));
            prev = c;
        }
        let err = parse_stream("bomb.yaml", &s).unwrap_err().to_string();
        assert!(err.contains("alias expansion"), "{err}");
    }
}
