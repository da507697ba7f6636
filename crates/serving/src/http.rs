//! The HTTP this probe needs: one blocking `GET` under one deadline (connect, send, answer), with
//! hyper on a small runtime of its own, as icb-push does. `http://` only.

use http_body_util::{BodyExt as _, Empty};
use hyper::Request;
use hyper::body::Bytes;
use std::time::Duration;

/// Why a GET gave no answer: one line, naming the URL.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HttpError {
    #[error("{url}: {why}")]
    BadUrl { url: String, why: String },
    #[error("{url}: unreachable: {why}")]
    Unreachable { url: String, why: String },
    #[error("{url}: no answer within {deadline:?}")]
    Timeout { url: String, deadline: Duration },
    #[error("{url}: HTTP {status}: {body}")]
    Status { url: String, status: u16, body: String },
}

/// `http://HOST[:PORT]` and the path (with its query) to ask it.
fn split(url: &str) -> Result<(String, u16, String), HttpError> {
    let bad = |why: &str| HttpError::BadUrl {
        url: url.to_string(),
        why: why.to_string(),
    };
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| bad("give an http:// URL, e.g. http://prometheus:9090"))?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], rest[i..].to_string()),
        None => (rest, "/".to_string()),
    };
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) => (h, p.parse::<u16>().map_err(|_| bad("the port is not a number"))?),
        None => (authority, 80),
    };
    if host.is_empty() {
        return Err(bad("no host"));
    }
    Ok((host.to_string(), port, path))
}

/// The body of `GET url` when the answer is 2xx.
pub fn get(url: &str, deadline: Duration) -> Result<String, HttpError> {
    let (host, port, path) = split(url)?;
    let unreachable = |e: &dyn std::fmt::Display| HttpError::Unreachable {
        url: url.to_string(),
        why: e.to_string(),
    };
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| unreachable(&e))?;
    rt.block_on(async {
        let ask = async {
            let tcp = tokio::net::TcpStream::connect((host.as_str(), port))
                .await
                .map_err(|e| unreachable(&e))?;
            let (mut sender, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tcp))
                .await
                .map_err(|e| unreachable(&e))?;
            let driver = tokio::spawn(conn);
            let req = Request::get(path)
                .header("host", format!("{host}:{port}"))
                .body(Empty::<Bytes>::new())
                .map_err(|e| unreachable(&e))?;
            let res = sender.send_request(req).await.map_err(|e| unreachable(&e))?;
            let status = res.status();
            let body = res
                .into_body()
                .collect()
                .await
                .map(|b| String::from_utf8_lossy(&b.to_bytes()).into_owned())
                .map_err(|e| unreachable(&e))?;
            driver.abort();
            if status.is_success() {
                Ok(body)
            } else {
                Err(HttpError::Status {
                    url: url.to_string(),
                    status: status.as_u16(),
                    body: body.lines().next().unwrap_or_default().chars().take(200).collect(),
                })
            }
        };
        tokio::time::timeout(deadline, ask).await.unwrap_or_else(|_| {
            Err(HttpError::Timeout {
                url: url.to_string(),
                deadline,
            })
        })
    })
}

/// `s` as a URL query value.
pub fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_split_and_bad_ones_say_why() {
        assert_eq!(
            split("http://prom:9090/api/v1/query?query=up").unwrap(),
            ("prom".into(), 9090, "/api/v1/query?query=up".into())
        );
        assert_eq!(split("http://prom").unwrap(), ("prom".into(), 80, "/".into()));
        assert!(matches!(split("https://prom"), Err(HttpError::BadUrl { .. })));
        assert!(matches!(split("http://prom:x/"), Err(HttpError::BadUrl { .. })));
    }

    #[test]
    fn a_closed_port_is_unreachable_in_time() {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let e = get(&format!("http://127.0.0.1:{port}/metrics"), Duration::from_secs(5)).unwrap_err();
        assert!(matches!(e, HttpError::Unreachable { .. }), "{e}");
    }
}
