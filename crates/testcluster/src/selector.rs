//! Label and field selectors as the API server parses them (`k=v,k!=v,k,!k,k in (a,b)`), because
//! kube-rs's watchers rely on the server to filter (`watch_object` sends `metadata.name=…`).

use std::collections::BTreeMap;

#[derive(Debug, Clone, PartialEq, Eq)]
enum LabelReq {
    Eq(String, String),
    NotEq(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    NotExists(String),
}

/// A selector the API server cannot parse (it answers 400 BadRequest, naming the part).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SelectorError {
    #[error("unable to parse requirement: {0:?}")]
    Requirement(String),
    #[error("invalid selector: {0:?}; expected field=value or field!=value")]
    Term(String),
    #[error("field label not supported: {0}")]
    UnsupportedField(String),
}

/// A parsed `labelSelector`; empty matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector(Vec<LabelReq>);

/// Splits on commas outside parentheses.
fn split_top(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, c) in text.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&text[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts.into_iter().map(str::trim).filter(|p| !p.is_empty()).collect()
}

fn valid_key(key: &str) -> bool {
    !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || "-_./".contains(c))
}

fn set_values(text: &str) -> Option<Vec<String>> {
    let inner = text.trim().strip_prefix('(')?.strip_suffix(')')?;
    Some(
        inner
            .split(',')
            .map(|v| v.trim().to_string())
            .filter(|v| !v.is_empty())
            .collect(),
    )
}

impl LabelSelector {
    pub fn parse(text: &str) -> Result<Self, SelectorError> {
        let mut reqs = Vec::new();
        for part in split_top(text) {
            let bad = || SelectorError::Requirement(part.to_string());
            let req = if let Some(key) = part.strip_prefix('!') {
                LabelReq::NotExists(key.trim().to_string())
            } else if let Some((key, value)) = part.split_once("!=") {
                LabelReq::NotEq(key.trim().to_string(), value.trim().to_string())
            } else if let Some((key, value)) = part.split_once("==").or_else(|| part.split_once('=')) {
                LabelReq::Eq(key.trim().to_string(), value.trim().to_string())
            } else if let Some((key, rest)) = part.split_once(" notin ") {
                LabelReq::NotIn(key.trim().to_string(), set_values(rest).ok_or_else(bad)?)
            } else if let Some((key, rest)) = part.split_once(" in ") {
                LabelReq::In(key.trim().to_string(), set_values(rest).ok_or_else(bad)?)
            } else {
                LabelReq::Exists(part.to_string())
            };
            let key = match &req {
                LabelReq::Eq(k, _)
                | LabelReq::NotEq(k, _)
                | LabelReq::In(k, _)
                | LabelReq::NotIn(k, _)
                | LabelReq::Exists(k)
                | LabelReq::NotExists(k) => k,
            };
            if !valid_key(key) {
                return Err(bad());
            }
            reqs.push(req);
        }
        Ok(LabelSelector(reqs))
    }

    pub fn matches(&self, labels: Option<&BTreeMap<String, String>>) -> bool {
        let empty = BTreeMap::new();
        let labels = labels.unwrap_or(&empty);
        self.0.iter().all(|req| match req {
            LabelReq::Eq(k, v) => labels.get(k) == Some(v),
            LabelReq::NotEq(k, v) => labels.get(k) != Some(v),
            LabelReq::In(k, vs) => labels.get(k).is_some_and(|v| vs.contains(v)),
            LabelReq::NotIn(k, vs) => labels.get(k).is_none_or(|v| !vs.contains(v)),
            LabelReq::Exists(k) => labels.contains_key(k),
            LabelReq::NotExists(k) => !labels.contains_key(k),
        })
    }
}

/// A parsed `fieldSelector`: `(field, value, equal)` terms, all of which must hold.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector(Vec<(String, String, bool)>);

impl FieldSelector {
    /// `supported` lists the field paths this resource can be filtered on.
    pub fn parse(text: &str, supported: &[&str]) -> Result<Self, SelectorError> {
        let mut terms = Vec::new();
        for part in split_top(text) {
            let (field, value, equal) = if let Some((f, v)) = part.split_once("!=") {
                (f, v, false)
            } else if let Some((f, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
                (f, v, true)
            } else {
                return Err(SelectorError::Term(part.to_string()));
            };
            let field = field.trim();
            if !supported.contains(&field) {
                return Err(SelectorError::UnsupportedField(field.to_string()));
            }
            terms.push((field.to_string(), value.trim().to_string(), equal));
        }
        Ok(FieldSelector(terms))
    }

    /// `lookup` gives a field's value on the object ("" when unset, as the API server does).
    pub fn matches(&self, lookup: impl Fn(&str) -> String) -> bool {
        self.0
            .iter()
            .all(|(field, value, equal)| (lookup(field) == *value) == *equal)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn label_selector_forms() {
        let l = labels(&[("app", "x"), ("tier", "db")]);
        let ok = |s: &str| LabelSelector::parse(s).unwrap().matches(Some(&l));
        assert!(ok(""));
        assert!(ok("app=x"));
        assert!(ok("app==x"));
        assert!(!ok("app=y"));
        assert!(ok("app!=y"));
        assert!(!ok("app!=x"));
        assert!(ok("tier"));
        assert!(!ok("!tier"));
        assert!(ok("!zone"));
        assert!(ok("tier in (web, db)"));
        assert!(!ok("tier notin (web,db)"));
        assert!(ok("zone notin (a)"));
        assert!(ok("app=x,tier in (db),!zone"));
        assert!(!ok("app=x,zone"));
        assert_eq!(
            LabelSelector::parse("a in b"),
            Err(SelectorError::Requirement("a in b".into()))
        );
        assert_eq!(
            LabelSelector::parse("bad key=1"),
            Err(SelectorError::Requirement("bad key=1".into()))
        );
    }

    #[test]
    fn field_selector_forms() {
        let fields = ["metadata.name", "spec.nodeName"];
        let sel = FieldSelector::parse("metadata.name=a,spec.nodeName!=n1", &fields).unwrap();
        let lookup = |name: &'static str, node: &'static str| {
            move |f: &str| {
                if f == "metadata.name" {
                    name.to_string()
                } else {
                    node.to_string()
                }
            }
        };
        assert!(sel.matches(lookup("a", "n2")));
        assert!(!sel.matches(lookup("a", "n1")));
        assert!(!sel.matches(lookup("b", "n2")));
        assert_eq!(
            FieldSelector::parse("status.bogus=1", &fields),
            Err(SelectorError::UnsupportedField("status.bogus".into()))
        );
        assert!(matches!(
            FieldSelector::parse("spec.nodeName", &fields),
            Err(SelectorError::Term(_))
        ));
        let empty_node = FieldSelector::parse("spec.nodeName=", &fields).unwrap();
        assert!(empty_node.matches(lookup("a", "")));
    }
}
