//! Keeps secrets out of every line ic-bench prints: values from Secrets are never known, and
//! what is secret by name or by shape (URL userinfo, bearer tokens, query credentials, tokens)
//! is decided by `icb_core::secrets`, the one masking function; this module adds the values
//! only a recipe knows (a Secret document's data).

use crate::model::{EnvValue, EnvVar};
use std::collections::HashSet;

pub use icb_core::secrets::{MASK, is_secret_name, looks_like_token};

/// Decodes a Secret's base64 `data` value when it is text, so the plain value can be masked too.
pub fn base64_text(encoded: &str) -> Option<String> {
    let mut bits: u32 = 0;
    let mut nbits = 0;
    let mut out = Vec::new();
    for c in encoded.bytes().filter(|c| !c.is_ascii_whitespace()) {
        let v = match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' | b'-' => 62,
            b'/' | b'_' => 63,
            b'=' => break,
            _ => return None,
        };
        bits = (bits << 6) | u32::from(v);
        nbits += 6;
        if nbits >= 8 {
            nbits -= 8;
            // Masking to a byte is the point of the cast.
            out.push(((bits >> nbits) & 0xff) as u8);
        }
    }
    String::from_utf8(out).ok()
}

/// How a variable's value may be printed.
pub fn display_value(var: &EnvVar) -> String {
    match &var.value {
        EnvValue::Literal { .. } if var.from_secret => MASK.to_string(),
        EnvValue::Literal { value } => icb_core::secrets::mask_value(&var.name, value),
        EnvValue::Secret { name, .. } => format!("<from Secret {name}>"),
        EnvValue::ConfigMap { name, key } => format!("<from ConfigMap {name}/{key}>"),
        EnvValue::Field { path } => format!("<from {path}>"),
        EnvValue::Computed { .. } => "<computed by the container's command>".to_string(),
        EnvValue::Derived { what, .. } => format!("<derived at start: {what}>"),
        EnvValue::Unknown => "<from an unsupported valueFrom>".to_string(),
    }
}

/// Characters that end a word when masking text.
fn is_separator(c: char) -> bool {
    matches!(
        c,
        ',' | ';' | ':' | '"' | '\'' | '(' | ')' | '[' | ']' | '{' | '}' | '<' | '>' | '`'
    ) || c.is_whitespace()
}

/// Secret values containing separators are replaced as substrings; past this many the rest are
/// only masked where they stand as words (keeps masking linear for hostile inputs).
const MAX_PHRASES: usize = 256;

/// Replaces known secret values and token-shaped words in printed text.
#[derive(Debug, Clone, Default)]
pub struct Masker {
    /// Secrets that are single words: looked up per word, so any number costs the same.
    words: HashSet<String>,
    /// Secrets with separators inside, longest first.
    phrases: Vec<String>,
}

impl Masker {
    /// Remembers a secret value. Very short values are not replaced textually (that would garble
    /// every line); they are never printed anyway because `display_value` masks by name.
    pub fn add(&mut self, value: &str) {
        let v = value.trim();
        if v.len() < 4 {
            return;
        }
        if v.chars().any(is_separator) {
            if self.phrases.len() < MAX_PHRASES && !self.phrases.iter().any(|p| p == v) {
                self.phrases.push(v.to_string());
                self.phrases.sort_by_key(|p| std::cmp::Reverse(p.len()));
            }
        } else if !self.words.contains(v) {
            self.words.insert(v.to_string());
        }
    }

    /// Adds every secret `other` holds, as [`Masker::add`] would have (the phrase cap included).
    pub fn merge(&mut self, other: &Masker) {
        self.words.extend(other.words.iter().cloned());
        let before = self.phrases.len();
        for p in &other.phrases {
            if self.phrases.len() < MAX_PHRASES && !self.phrases.contains(p) {
                self.phrases.push(p.clone());
            }
        }
        if self.phrases.len() != before {
            self.phrases.sort_by_key(|p| std::cmp::Reverse(p.len()));
        }
    }

    pub fn mask(&self, text: &str) -> String {
        let mut out = text.to_string();
        for p in &self.phrases {
            if out.contains(p.as_str()) {
                out = out.replace(p.as_str(), MASK);
            }
        }
        let mut result = String::with_capacity(out.len());
        let mut word = String::new();
        let flush = |word: &mut String, result: &mut String| {
            if self.words.contains(word.as_str()) {
                result.push_str(MASK);
            } else if let Some((head, _)) = word.split_once('=').filter(|(_, rest)| self.words.contains(*rest)) {
                // `NAME=value`: keep the name, hide the value.
                result.push_str(head);
                result.push('=');
                result.push_str(MASK);
            } else {
                result.push_str(word);
            }
            word.clear();
        };
        for c in out.chars() {
            if is_separator(c) {
                flush(&mut word, &mut result);
                result.push(c);
            } else {
                word.push(c);
            }
        }
        flush(&mut word, &mut result);
        icb_core::secrets::mask_text(&result)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64() {
        assert_eq!(base64_text("aGVsbG8gd29ybGQ=").as_deref(), Some("hello world"));
        assert_eq!(base64_text("!!"), None);
    }

    /// The secrets of every recipe are read once and merged into each recipe's masker: what it
    /// masks is what adding each value to it would mask, phrases longest first.
    #[test]
    fn a_merged_masker_masks_what_adding_each_value_masks() {
        let values = ["hunter2hunter2", "pass word one", "pass word", "s3cr3t-token"];
        let mut added = Masker::default();
        added.add("own-secret-value");
        let mut shared = Masker::default();
        for v in values {
            added.add(v);
            shared.add(v);
        }
        let mut merged = Masker::default();
        merged.add("own-secret-value");
        merged.merge(&shared);
        merged.merge(&shared);
        assert_eq!(merged.phrases, added.phrases, "deduplicated, longest first");
        let line = "a=hunter2hunter2 b='pass word one' c=s3cr3t-token own-secret-value pass word";
        assert_eq!(merged.mask(line), added.mask(line));
        for v in values.iter().chain(&["own-secret-value"]) {
            assert!(!merged.mask(line).contains(v), "{v} leaked: {}", merged.mask(line));
        }
    }

    #[test]
    fn masker_replaces_literals_and_tokens() {
        let mut m = Masker::default();
        m.add("hunter2hunter2");
        m.add("two words secret");
        let s = m.mask(
            "pw=hunter2hunter2 token hf_abcdefghijklmnopqrstuvwxyz123456 UCX_TLS=rc,cuda_copy x two words secret",
        );
        assert!(!s.contains("hunter2"));
        assert!(s.contains("pw=***"));
        assert!(!s.contains("two words"));
        assert!(!s.contains("hf_abc"));
        assert!(s.contains("UCX_TLS=rc,cuda_copy"));
    }
}
