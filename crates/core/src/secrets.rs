//! One place that decides what must never be printed: secret-looking variable NAMES (their
//! values are replaced whole) and secret VALUES wherever they sit in a line of text — URL
//! userinfo (`http://user:pw@host`), `Bearer`/`Basic` credentials, credentials in a query
//! string (`?token=…`, `&password=…`, `X-Amz-Signature=…`), `NAME=value` pairs whose name is
//! secret, and token-shaped words (known prefixes, JWTs, long random strings).
//!
//! Every front end (probe output, the pair JSON env block, every exporter) calls [`mask_value`]
//! for a (name, value) pair and [`mask_text`] for a free-text line, so one table test covers
//! them all. Masking is linear in the input and never fails.

/// What a masked secret prints as.
pub const MASK: &str = "***";

/// Words that make a variable (or query parameter) name secret, matched as substrings of the
/// upper-cased name. `KEY` alone would also hit `NCCL_IB_PKEY` (an InfiniBand partition key,
/// not a secret), which [`is_secret_name`] lets through.
const SECRET_NAME_WORDS: &[&str] = &[
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
    "SIGNATURE",
];

/// Query-string parameters that carry credentials although their names hold none of the words
/// above (S3/GCS/Azure presigned URLs, `?pwd=`, `?sig=`).
const SECRET_QUERY_PARAMS: &[&str] = &["pwd", "pw", "pass", "sig", "sas", "x-amz-security-token", "code"];

/// Whether a variable's value is a secret whatever it looks like (`HF_TOKEN`, `AWS_SECRET_ACCESS_KEY`,
/// `NIXL_API_KEY`); `*_PKEY` (InfiniBand partition keys) is not.
pub fn is_secret_name(name: &str) -> bool {
    let n = name.to_ascii_uppercase();
    let without_pkey = n.replace("PKEY", "");
    SECRET_NAME_WORDS.iter().any(|w| without_pkey.contains(w))
}

fn is_secret_query_param(name: &str) -> bool {
    let lower = name.to_ascii_lowercase();
    is_secret_name(name) || SECRET_QUERY_PARAMS.contains(&lower.as_str())
}

/// Values that look like API tokens or keys (known prefixes, JWTs, AWS key ids, long random
/// strings). Names, paths, model ids, GPU UUIDs and transport lists do not.
pub fn looks_like_token(value: &str) -> bool {
    let v = value.trim();
    // Random strings switch between digits, lower and upper case far more often than names,
    // paths or model ids do; that is what tells a token from `DynamoGraphDeployment/x`.
    // Short runs are never random: skip the counting (every word of every masked line gets here).
    let random_run = v.split(|c: char| !c.is_ascii_alphanumeric()).any(|run| {
        if run.len() < 20 {
            return false;
        }
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
        digits >= 2 && digits < run.len() && switches * 5 >= run.len() * 2
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
    let charset = v
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '/' | '=' | '_' | '-' | '.'));
    let random = charset && v.len() >= 20 && random_run;
    prefixed || aws || jwt || random
}

/// How the value of variable `name` may be printed: `***` for a secret name or a token-shaped
/// value, otherwise the value with any credential inside it masked ([`mask_text`]).
pub fn mask_value(name: &str, value: &str) -> String {
    if is_secret_name(name) || looks_like_token(value) {
        MASK.to_string()
    } else {
        mask_text(value)
    }
}

/// Characters that end a credential inside a line (a URL's userinfo, a query value, a word).
// A `match` rather than a search of `"…".contains(c)`: these run for every character of every
// line masked (the fuzz target `recipe_load`, whose checks mask every detail and hint, spent a
// quarter of its time in `mask_text`).
fn ends_value(c: char) -> bool {
    c.is_whitespace()
        || matches!(
            c,
            '"' | '\'' | '`' | '<' | '>' | '(' | ')' | '[' | ']' | '{' | '}' | ',' | ';' | '&' | '#' | '|' | '\\'
        )
}

/// Masks every credential in a line of text (see the module doc). Text without one comes back
/// unchanged.
pub fn mask_text(text: &str) -> String {
    let t = mask_url_userinfo(text);
    let t = mask_auth_schemes(&t);
    let t = mask_assignments(&t);
    mask_token_words(&t)
}

/// `scheme://user:pw@host` → `scheme://***@host` (also `scheme://token@host`).
fn mask_url_userinfo(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find("://") {
        let (head, tail) = rest.split_at(i + 3);
        out.push_str(head);
        // The authority ends at the path, query, fragment or the end of the URL.
        let end = tail
            .find(|c: char| ends_value(c) || c == '/' || c == '?')
            .unwrap_or(tail.len());
        let authority = &tail[..end];
        match authority.rfind('@') {
            Some(at) if at > 0 => {
                out.push_str(MASK);
                out.push_str(&authority[at..]);
            }
            _ => out.push_str(authority),
        }
        rest = &tail[end..];
    }
    out.push_str(rest);
    out
}

/// `Bearer <token>`, `Basic <b64>`, `Token <x>` (HTTP Authorization schemes) → `Bearer ***`.
fn mask_auth_schemes(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let lower = text.to_ascii_lowercase();
    let mut skip_until = 0;
    for (i, c) in text.char_indices() {
        if i < skip_until {
            continue;
        }
        let word_start = i == 0 || !text[..i].ends_with(|p: char| p.is_ascii_alphanumeric() || p == '_');
        let scheme = ["bearer ", "basic ", "token "]
            .iter()
            .find(|s| word_start && lower[i..].starts_with(**s));
        if let Some(s) = scheme {
            let after = i + s.len();
            let value_start = after + text[after..].len() - text[after..].trim_start().len();
            let value_end = text[value_start..]
                .find(ends_value)
                .map_or(text.len(), |e| value_start + e);
            // `token of the pod` is prose, not a credential: only mask credential-shaped words.
            let value = &text[value_start..value_end];
            let credential = value.len() >= 8 && (s.starts_with('b') || looks_like_token(value));
            if credential {
                out.push_str(&text[i..value_start]);
                out.push_str(MASK);
                skip_until = value_end;
                continue;
            }
        }
        out.push(c);
    }
    out
}

/// `NAME=value` / `NAME: value` where NAME is secret (env assignments, query parameters, YAML and
/// JSON fragments) → `NAME=***`.
fn mask_assignments(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut i = 0;
    while i < bytes.len() {
        let is_name = |b: u8| b.is_ascii_alphanumeric() || b == b'_' || b == b'-' || b == b'.';
        if !is_name(bytes[i]) || (i > 0 && is_name(bytes[i - 1])) {
            i += 1;
            continue;
        }
        let start = i;
        while i < bytes.len() && is_name(bytes[i]) {
            i += 1;
        }
        let name = &text[start..i];
        // Separator: `=`, `:` or `":` (JSON), then optional spaces and an opening quote.
        let mut j = i;
        if j < bytes.len() && bytes[j] == b'"' {
            j += 1;
        }
        if j >= bytes.len() || !(bytes[j] == b'=' || bytes[j] == b':') {
            continue;
        }
        let query = start > 0 && matches!(bytes[start - 1], b'?' | b'&' | b';');
        let secret = if query {
            is_secret_query_param(name)
        } else {
            is_secret_name(name)
        };
        if !secret {
            continue;
        }
        j += 1;
        while j < bytes.len() && (bytes[j] == b' ' || bytes[j] == b'"' || bytes[j] == b'\'') {
            j += 1;
        }
        let end = text[j..].find(ends_value).map_or(text.len(), |e| j + e);
        let value = &text[j..end];
        // Already masked, nothing to hide (`token:` ending a sentence), or an Authorization
        // scheme whose credential `mask_auth_schemes` has handled.
        let scheme = ["bearer", "basic", "token"]
            .iter()
            .any(|s| value.eq_ignore_ascii_case(s));
        if value.is_empty() || value == MASK || scheme {
            i = end.max(i);
            continue;
        }
        out.push_str(&text[copied..j]);
        out.push_str(MASK);
        copied = end;
        i = end;
    }
    out.push_str(&text[copied..]);
    out
}

/// Characters that separate words when looking for token-shaped words.
fn is_word_separator(c: char) -> bool {
    c.is_whitespace()
        || matches!(
            c,
            ',' | ';' | ':' | '"' | '\'' | '(' | ')' | '[' | ']' | '{' | '}' | '<' | '>' | '`' | '=' | '@' | '&' | '?'
        )
}

/// Replaces token-shaped words (see [`looks_like_token`]).
fn mask_token_words(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut word_start = 0;
    for (i, c) in text.char_indices().chain(std::iter::once((text.len(), ' '))) {
        if i == text.len() || is_word_separator(c) {
            let word = &text[word_start..i];
            if !word.is_empty() && looks_like_token(word) {
                out.push_str(MASK);
            } else {
                out.push_str(word);
            }
            if i < text.len() {
                out.push(c);
            }
            word_start = i + c.len_utf8();
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names() {
        for n in [
            "HF_TOKEN",
            "AWS_SECRET_ACCESS_KEY",
            "NIXL_API_KEY",
            "db_password",
            "GH_AUTH",
            "SSH_PRIVATE",
            "X-Amz-Signature",
        ] {
            assert!(is_secret_name(n), "{n}");
        }
        for n in [
            "UCX_TLS",
            "NCCL_IB_PKEY",
            "UCX_IB_PKEY",
            "NIXL_ETCD_ENDPOINTS",
            "NCCL_IB_HCA",
        ] {
            assert!(!is_secret_name(n), "{n}");
        }
    }

    #[test]
    fn table() {
        let cases: &[(&str, &str)] = &[
            // URL userinfo, in a value and inside a sentence.
            ("http://user:pw@etcd:2379", "http://***@etcd:2379"),
            (
                "NIXL_ETCD_ENDPOINTS=http://admin:s3cr3t@etcd-0:2379,http://etcd-1:2379",
                "NIXL_ETCD_ENDPOINTS=http://***@etcd-0:2379,http://etcd-1:2379",
            ),
            ("redis://:hunter2@cache/0", "redis://***@cache/0"),
            ("https://tok@github.com/x.git", "https://***@github.com/x.git"),
            // Authorization schemes.
            ("Authorization: Bearer abcdefgh1234", "Authorization: Bearer ***"),
            (
                "curl -H 'Authorization: Basic dXNlcjpwYXNz'",
                "curl -H 'Authorization: Basic ***'",
            ),
            // Query-string credentials.
            (
                "https://s3/b/k?X-Amz-Credential=AKIAX%2F1&X-Amz-Signature=deadbeef&x=1",
                "https://s3/b/k?X-Amz-Credential=***&X-Amz-Signature=***&x=1",
            ),
            ("http://h/p?token=abc123&page=2", "http://h/p?token=***&page=2"),
            ("http://h/p?user=me&password=pw", "http://h/p?user=me&password=***"),
            (
                "https://acct.blob/c?sv=2020&sig=AbC%3D",
                "https://acct.blob/c?sv=2020&sig=***",
            ),
            // Secret-named assignments, env/YAML/JSON.
            ("HF_TOKEN=whatever", "HF_TOKEN=***"),
            ("api_key: foo", "api_key: ***"),
            ("{\"NIXL_API_KEY\":\"v\"}", "{\"NIXL_API_KEY\":\"***\"}"),
            // Token-shaped words.
            ("got hf_abcdefghijklmnopqrstuvwxyz123456 here", "got *** here"),
            // Left alone.
            ("UCX_TLS=rc,cuda_copy", "UCX_TLS=rc,cuda_copy"),
            ("UCX_NET_DEVICES=mlx5_0:1,mlx5_1:1", "UCX_NET_DEVICES=mlx5_0:1,mlx5_1:1"),
            ("NCCL_IB_PKEY=0x8001", "NCCL_IB_PKEY=0x8001"),
            ("http://etcd:2379", "http://etcd:2379"),
            (
                "nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.5.0",
                "nvcr.io/nvidia/ai-dynamo/vllm-runtime:0.5.0",
            ),
            (
                "the token of the pod is read at run time",
                "the token of the pod is read at run time",
            ),
            ("envFromSecret hf-token", "envFromSecret hf-token"),
            ("", ""),
        ];
        for (input, want) in cases {
            assert_eq!(mask_text(input), *want, "{input}");
        }
    }

    #[test]
    fn values_by_name_and_shape() {
        assert_eq!(mask_value("HF_TOKEN", "abc"), MASK);
        assert_eq!(mask_value("UCX_TLS", "rc,cuda_copy"), "rc,cuda_copy");
        assert_eq!(
            mask_value("NIXL_ETCD_ENDPOINTS", "http://u:p@e:2379"),
            "http://***@e:2379"
        );
        assert_eq!(mask_value("X", "AKIAIOSFODNN7EXAMPLE"), MASK);
    }

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
    fn non_ascii_text_is_safe() {
        assert_eq!(mask_text("é://ü@ß Bearer ñ"), "é://***@ß Bearer ñ");
        assert_eq!(mask_text("ключ=значение"), "ключ=значение");
    }
}
