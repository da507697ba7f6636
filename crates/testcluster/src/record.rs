//! The request log: everything the API server received, so tests can assert what ic-bench did and
//! did not do (which pods it created, that it deleted them, that it never wrote elsewhere).

use serde_json::Value;

/// One request as received.
#[derive(Debug, Clone)]
pub struct RecordedRequest {
    pub method: String,
    pub path: String,
    /// The raw query string (kube-rs sends `?&a=b…`).
    pub query: String,
    /// The decoded query parameters in order (`command` repeats for exec).
    pub params: Vec<(String, String)>,
    pub body: Vec<u8>,
    /// The HTTP status answered (101 for an exec upgrade).
    pub status: u16,
    /// True when a fault knob answered instead of the emulated API.
    pub injected: bool,
}

impl RecordedRequest {
    /// The body as JSON, when it is JSON.
    pub fn json(&self) -> Option<Value> {
        serde_json::from_slice(&self.body).ok()
    }

    /// The body as a Pod, when it is one (what a create sent).
    pub fn pod(&self) -> Option<k8s_openapi::api::core::v1::Pod> {
        serde_json::from_slice(&self.body).ok()
    }

    /// The first value of query parameter `name`.
    pub fn param(&self, name: &str) -> Option<&str> {
        self.params.iter().find(|(k, _)| k == name).map(|(_, v)| v.as_str())
    }

    pub fn is_watch(&self) -> bool {
        matches!(self.param("watch"), Some("true" | "1"))
    }

    /// "POST /api/v1/namespaces/default/pods" — handy in assertion messages.
    pub fn line(&self) -> String {
        format!(
            "{} {}{}{} -> {}",
            self.method,
            self.path,
            if self.query.is_empty() { "" } else { "?" },
            self.query,
            self.status
        )
    }
}

pub fn parse_query(query: &str) -> Vec<(String, String)> {
    serde_urlencoded_pairs(query)
}

/// Form-decodes `a=1&b=2&&c` into pairs (empty segments skipped, `+` is a space).
fn serde_urlencoded_pairs(query: &str) -> Vec<(String, String)> {
    query
        .split('&')
        .filter(|s| !s.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            (decode(k), decode(v))
        })
        .collect()
}

fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                (Some(hi), Some(lo)) => {
                    out.push(hi * 16 + lo);
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn hex(b: u8) -> Option<u8> {
    (b as char).to_digit(16).map(|d| d as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decodes_kube_queries() {
        let p = parse_query("&fieldSelector=metadata.name%3Da&command=sh&command=-c&command=echo+hi%21&limit=500");
        assert_eq!(p[0], ("fieldSelector".to_string(), "metadata.name=a".to_string()));
        assert_eq!(p[3].1, "echo hi!");
        assert_eq!(p.len(), 5);
        assert_eq!(parse_query(""), vec![]);
        assert_eq!(decode("100%"), "100%");
        assert_eq!(decode("%zz"), "%zz");
    }
}
