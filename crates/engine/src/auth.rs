//! Admission: a shared secret both sides hold, proven in the hello exchange without crossing the
//! wire.
//!
//! The server opens every session with a fresh random nonce (`challenge`) and nothing else: no
//! worker address, no buffers. The client answers with its hello carrying its own nonce and
//! `HMAC-SHA256(token, "client" ‖ server nonce ‖ client nonce ‖ client identity)`; the server
//! checks it in constant time (`ring::hmac::verify`) and only then sends its hello, proven the
//! same way over both nonces and both identities, so the client knows it reached its own server.
//! A recorded answer is worthless in another session (the server's nonce differs), and the
//! identity (role, engine, host, boot id, worker address) binds the proof to the addresses the
//! UCX endpoints are then created from.

use crate::messages::{Hello, HexBytes};
use ring::hmac;
use ring::rand::{SecureRandom, SystemRandom};
use std::path::Path;

/// Bytes of each side's nonce and of a proof (SHA-256); the protocol crate checks received ones.
pub use icb_control::messages::NONCE_BYTES;
/// The environment variable both sides read the token from (a flag value would show in `ps`).
pub use icb_core::protocol::TOKEN_ENV;
/// A token shorter than this is refused: it would be guessable.
pub const MIN_TOKEN_BYTES: usize = 16;
const MAX_TOKEN_BYTES: usize = 4096;

/// The shared secret. Never printed: `Debug` shows only that there is one.
#[derive(Clone, PartialEq, Eq)]
pub struct Token(String);

impl std::fmt::Debug for Token {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

/// Why a token could not be read; each says what to fix.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum TokenError {
    #[error("cannot read the token file {path}: {detail}: give --token-file a readable file")]
    Unreadable { path: String, detail: String },
    #[error(
        "the token from {from} is {len} bytes: use {MIN_TOKEN_BYTES} to {MAX_TOKEN_BYTES} bytes of text (e.g. `openssl rand -hex 32`)"
    )]
    BadLength { from: String, len: usize },
    #[error("the token from {from} is not one line of printable text: use e.g. `openssl rand -hex 32`")]
    NotText { from: String },
}

impl Token {
    /// A token from text (`from` names where it came from, for errors); surrounding whitespace
    /// (a file's final newline) is not part of it.
    pub fn parse(text: &str, from: &str) -> Result<Token, TokenError> {
        let t = text.trim();
        if t.len() < MIN_TOKEN_BYTES || t.len() > MAX_TOKEN_BYTES {
            return Err(TokenError::BadLength {
                from: from.to_string(),
                len: t.len(),
            });
        }
        if t.chars().any(|c| c.is_control()) {
            return Err(TokenError::NotText { from: from.to_string() });
        }
        Ok(Token(t.to_string()))
    }

    /// `--token-file FILE` (a Kubernetes secret volume mounts exactly such a file).
    pub fn from_file(path: &Path) -> Result<Token, TokenError> {
        let shown = path.display().to_string();
        let unreadable = |detail: String| TokenError::Unreadable {
            path: shown.clone(),
            detail,
        };
        let meta = std::fs::metadata(path).map_err(|e| unreadable(e.to_string()))?;
        if meta.len() > MAX_TOKEN_BYTES as u64 + 64 {
            return Err(TokenError::BadLength {
                from: shown,
                len: meta.len() as usize,
            });
        }
        let text = std::fs::read_to_string(path).map_err(|e| unreadable(e.to_string()))?;
        Token::parse(&text, &shown)
    }

    /// The token from `--token-file` when given, else from [`TOKEN_ENV`], else none.
    pub fn resolve(file: Option<&Path>, env: Option<String>) -> Result<Option<Token>, TokenError> {
        match (file, env) {
            (Some(path), _) => Token::from_file(path).map(Some),
            (None, Some(v)) if !v.is_empty() => Token::parse(&v, TOKEN_ENV).map(Some),
            _ => Ok(None),
        }
    }

    /// A fresh random token (64 hex characters), as `pair` makes one per run.
    pub fn generate() -> Token {
        Token(hex(&random_bytes()))
    }

    /// The secret itself, for handing it to a child process or a Kubernetes Secret. Never log it.
    pub fn expose(&self) -> &str {
        &self.0
    }

    fn key(&self) -> hmac::Key {
        hmac::Key::new(hmac::HMAC_SHA256, self.0.as_bytes())
    }
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// The flag a started side (a rails rank) gets to read the same token file, by an absolute path;
/// `IC_BENCH_TOKEN` is inherited with the environment.
pub fn side_flags(token_file: Option<&Path>) -> Vec<String> {
    match token_file {
        Some(path) => vec![
            "--token-file".into(),
            std::path::absolute(path)
                .unwrap_or_else(|_| path.to_path_buf())
                .display()
                .to_string(),
        ],
        None => vec![],
    }
}

/// 32 bytes from the system's random source.
pub fn random_bytes() -> [u8; NONCE_BYTES] {
    let mut out = [0u8; NONCE_BYTES];
    // The system RNG (getrandom) fails only where the kernel has none; nothing could run then.
    SystemRandom::new()
        .fill(&mut out)
        .expect("the system random number generator failed");
    out
}

/// What a hello binds a proof to, each field length-prefixed so no two hellos encode alike.
pub fn identity(h: &Hello) -> Vec<u8> {
    let role = match h.role {
        crate::messages::Role::Server => "server",
        crate::messages::Role::Client => "client",
    };
    let fields: [&[u8]; 5] = [
        role.as_bytes(),
        h.engine.as_deref().unwrap_or("ucx").as_bytes(),
        h.hostname.as_bytes(),
        h.boot_id.as_bytes(),
        &h.worker_address.0,
    ];
    let mut out = Vec::new();
    for f in fields {
        out.extend_from_slice(&(f.len() as u64).to_be_bytes());
        out.extend_from_slice(f);
    }
    out
}

fn transcript(label: &str, server_nonce: &[u8], client_nonce: &[u8], ids: &[&[u8]]) -> Vec<u8> {
    let mut m = format!("ic-bench admission v2 {label}").into_bytes();
    for part in [server_nonce, client_nonce].into_iter().chain(ids.iter().copied()) {
        m.extend_from_slice(&(part.len() as u64).to_be_bytes());
        m.extend_from_slice(part);
    }
    m
}

/// The client's proof: over the server's nonce, its own and its identity.
pub fn client_proof(token: &Token, server_nonce: &[u8], client_nonce: &[u8], client_id: &[u8]) -> HexBytes {
    let m = transcript("client", server_nonce, client_nonce, &[client_id]);
    HexBytes(hmac::sign(&token.key(), &m).as_ref().to_vec())
}

/// The server's proof: over both nonces and both identities.
pub fn server_proof(
    token: &Token,
    server_nonce: &[u8],
    client_nonce: &[u8],
    client_id: &[u8],
    server_id: &[u8],
) -> HexBytes {
    let m = transcript("server", server_nonce, client_nonce, &[client_id, server_id]);
    HexBytes(hmac::sign(&token.key(), &m).as_ref().to_vec())
}

/// Checks a client's proof in constant time (any length is accepted and simply fails).
pub fn verify_client(token: &Token, server_nonce: &[u8], client_nonce: &[u8], client_id: &[u8], proof: &[u8]) -> bool {
    let m = transcript("client", server_nonce, client_nonce, &[client_id]);
    hmac::verify(&token.key(), &m, proof).is_ok()
}

/// Checks the server's proof in constant time.
pub fn verify_server(
    token: &Token,
    server_nonce: &[u8],
    client_nonce: &[u8],
    client_id: &[u8],
    server_id: &[u8],
    proof: &[u8],
) -> bool {
    let m = transcript("server", server_nonce, client_nonce, &[client_id, server_id]);
    hmac::verify(&token.key(), &m, proof).is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn token(s: &str) -> Token {
        Token::parse(s, "test").unwrap()
    }

    #[test]
    fn proofs_check_only_with_the_same_token_nonces_and_identity() {
        let t = token("0123456789abcdef0123");
        let (sn, cn) = (random_bytes(), random_bytes());
        let p = client_proof(&t, &sn, &cn, b"client-id");
        assert!(verify_client(&t, &sn, &cn, b"client-id", &p.0));
        assert!(!verify_client(
            &token("another-token-0123"),
            &sn,
            &cn,
            b"client-id",
            &p.0
        ));
        assert!(
            !verify_client(&t, &random_bytes(), &cn, b"client-id", &p.0),
            "replayed in another session"
        );
        assert!(!verify_client(&t, &sn, &cn, b"other-id", &p.0));
        assert!(
            !verify_client(&t, &sn, &cn, b"client-id", &p.0[..31]),
            "a short proof fails"
        );
        assert!(!verify_client(&t, &sn, &cn, b"client-id", &[]));
        let s = server_proof(&t, &sn, &cn, b"client-id", b"server-id");
        assert!(verify_server(&t, &sn, &cn, b"client-id", b"server-id", &s.0));
        assert!(
            !verify_client(&t, &sn, &cn, b"client-id", &s.0),
            "a server proof is not a client proof"
        );
        assert_ne!(p.0, s.0);
    }

    #[test]
    fn tokens_are_bounded_text_and_never_printed() {
        assert!(matches!(
            Token::parse("short", "x"),
            Err(TokenError::BadLength { len: 5, .. })
        ));
        assert!(matches!(
            Token::parse("0123456789abcdef\u{7}", "x"),
            Err(TokenError::NotText { .. })
        ));
        let t = token("  0123456789abcdef\n");
        assert_eq!(t.expose(), "0123456789abcdef");
        assert_eq!(format!("{t:?}"), "Token(<redacted>)");
        let g = Token::generate();
        assert_eq!(g.expose().len(), 64);
        assert_ne!(g, Token::generate());
        assert_eq!(Token::resolve(None, Some(String::new())), Ok(None));
        let from_env = Token::resolve(None, Some("0123456789abcdef".into())).unwrap();
        assert_eq!(from_env, Some(token("0123456789abcdef")));
        // The hello carries the run's IC_BENCH_* environment: never the token's value.
        let env = crate::local::filter_env([(TOKEN_ENV.to_string(), "0123456789abcdef".to_string())].into_iter());
        assert!(env.values().all(|v| !v.contains("0123456789abcdef")), "{env:?}");
        let missing = Token::resolve(Some(Path::new("/nonexistent/token")), None).unwrap_err();
        assert!(missing.to_string().contains("--token-file"), "{missing}");
    }
}
