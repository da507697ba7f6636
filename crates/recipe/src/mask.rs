//! Keeps secrets out of every line ic-bench prints: values from Secrets are never known,
//! values of secret-named variables are shown as `***`, and anything token-shaped is masked.

use crate::model::{EnvValue, EnvVar};
use std::collections::HashSet;

pub const MASK: &str = "***";

/// Variable names whose values are secrets whatever they look like.
pub fn is_secret_name(name: &str) -> bool {
    let n = name.to_ascii_uppercase();
    [
        "TOKEN",
        "KEY",
        "SECRET",
        "PASSWORD",
        "PASSWD",
        "PASSPHRASE",
        "CREDENTIAL",
        "AUTH",
        "PRIVATE",
        "COOKIE",
        "SESSION",
    ]
    .iter()
    .any(|w| n.contains(w))
}

/// Values that look like API tokens or keys (known prefixes, JWTs, long random strings).
pub fn looks_like_token(value: &str) -> bool {
    let v = value.trim();
    // Random strings switch between digits, lower and upper case far more often than names,
    // paths or model ids do; that is what tells a token from `DynamoGraphDeployment/x`.
    let random_run = v.split(|c: char| !c.is_ascii_alphanumeric()).any(|run| {
        let class = |c: char| {
            if c.is_ascii_digit() {
                0
            } else if c.is_ascii_lowercase() {
                1
            } else {
                2
            }
        };
        let digits = run.chars().filter(char::is_ascii_digit).count();
        let switches = run
            .chars()
            .zip(run.chars().skip(1))
            .filter(|(a, b)| class(*a) != class(*b))
            .count();
        run.len() >= 20 && digits >= 2 && digits < run.len() && switches * 5 >= run.len() * 2
    });
    let prefixed = [
        "hf_",
        "ghp_",
        "gho_",
        "ghs_",
        "ghu_",
        "github_pat_",
        "glpat-",
        "sk-",
        "xoxb-",
        "xoxp-",
        "nvapi-",
    ]
    .iter()
    .any(|p| v.starts_with(p) && v.len() >= p.len() + 16);
    let aws = (v.starts_with("AKIA") || v.starts_with("ASIA"))
        && v.len() == 20
        && v.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit());
    let jwt = v.starts_with("eyJ") && v.matches('.').count() == 2 && v.len() > 30;
    let charset = v.chars().all(|c| c.is_ascii_alphanumeric() || "+/=_-.".contains(c));
    let random = charset && v.len() >= 20 && random_run;
    prefixed || aws || jwt || random
}

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
        EnvValue::Literal { value } if is_secret_name(&var.name) || looks_like_token(value) => MASK.to_string(),
        EnvValue::Literal { value } => value.clone(),
        EnvValue::Secret { name, .. } => format!("<from Secret {name}>"),
        EnvValue::ConfigMap { name, key } => format!("<from ConfigMap {name}/{key}>"),
        EnvValue::Field { path } => format!("<from {path}>"),
        EnvValue::Unknown => "<from an unsupported valueFrom>".to_string(),
    }
}

/// Characters that end a word when masking text.
fn is_separator(c: char) -> bool {
    c.is_whitespace() || ",;:\"'()[]{}<>`".contains(c)
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
        } else {
            self.words.insert(v.to_string());
        }
    }

    fn secret_word(&self, word: &str) -> bool {
        self.words.contains(word) || looks_like_token(word)
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
            if self.secret_word(word) {
                result.push_str(MASK);
            } else if let Some((head, _)) = word.split_once('=').filter(|(_, rest)| self.secret_word(rest)) {
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
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tokens_are_recognised_and_transport_values_are_not() {
        assert!(looks_like_token("hf_abcdefghijklmnopqrstuvwxyz123456"));
        assert!(looks_like_token("AKIAIOSFODNN7EXAMPLE"));
        assert!(looks_like_token("Zx81kPq02LmN3vB4cD5eF6gH7iJ8kL9m"));
        for v in [
            "DynamoGraphDeployment/dsv4-disagg",
            "Qwen3Coder480BInstructFP8",
            "rc_x,rc,cuda_copy,cuda_ipc",
            "mlx5_0:1,mlx5_1:1",
            "GPU-4650fca3-dbba-f168-d6bd-338a4ba8f044",
            "get_zcopy",
            "nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.5.0",
        ] {
            assert!(!looks_like_token(v), "{v}");
        }
    }

    #[test]
    fn base64() {
        assert_eq!(base64_text("aGVsbG8gd29ybGQ=").as_deref(), Some("hello world"));
        assert_eq!(base64_text("!!"), None);
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
