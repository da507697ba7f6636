//! icb-push: a run's Prometheus text to a Pushgateway (`--push-gateway URL`), the conventional
//! path for batch jobs such as the nightly sweep CronJob. One HTTP/1.1 `PUT` (the group's metrics
//! replaced whole) with hyper, on a small runtime of its own, under one deadline that covers
//! connecting, sending and the answer. `http://` only: a Pushgateway behind TLS is reached
//! through a sidecar or a local proxy.
#![forbid(unsafe_code)]

use http_body_util::{BodyExt as _, Full};
use hyper::Request;
use hyper::body::Bytes;
use std::time::Duration;

/// Why a push did not land.
#[derive(Debug, thiserror::Error)]
pub enum PushError {
    #[error("--push-gateway {url}: {why}")]
    BadUrl { url: String, why: String },
    #[error("--push-gateway {url}: unreachable: {why}")]
    Unreachable { url: String, why: String },
    #[error("--push-gateway {url}: no answer within {deadline:?}")]
    Timeout { url: String, deadline: Duration },
    #[error("--push-gateway {url}: refused with HTTP {status}: {body}")]
    Refused { url: String, status: u16, body: String },
}

/// Where to push: `http://HOST:PORT[/PATH]`, parsed once.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Gateway {
    url: String,
    host: String,
    port: u16,
    base: String,
}

impl Gateway {
    pub fn parse(url: &str) -> Result<Gateway, PushError> {
        let bad = |why: &str| PushError::BadUrl {
            url: url.to_string(),
            why: why.to_string(),
        };
        let rest = url
            .strip_prefix("http://")
            .ok_or_else(|| bad("give an http:// URL, e.g. http://pushgateway:9091"))?;
        let (authority, path) = rest.split_once('/').map_or((rest, ""), |(a, p)| (a, p));
        let (host, port) = match authority.rsplit_once(':') {
            Some((h, p)) => (h, p.parse::<u16>().map_err(|_| bad("the port is not a number"))?),
            None => (authority, 80),
        };
        if host.is_empty() {
            return Err(bad("no host"));
        }
        Ok(Gateway {
            url: url.to_string(),
            host: host.to_string(),
            port,
            base: path.trim_end_matches('/').to_string(),
        })
    }

    /// The path of a group: `/metrics/job/JOB/LABEL/VALUE…`; a value a path cannot carry as is
    /// goes in the Pushgateway's base64 form (`LABEL@base64/VALUE`).
    pub fn group_path(&self, job: &str, grouping: &[(&str, &str)]) -> String {
        let mut p = String::new();
        if !self.base.is_empty() {
            p.push('/');
            p.push_str(&self.base);
        }
        p.push_str("/metrics");
        for (k, v) in std::iter::once(("job", job)).chain(grouping.iter().copied()) {
            p.push_str(&segment(k, v));
        }
        p
    }

    /// Replaces the group's metrics with `text` (Prometheus text format), within `deadline`.
    /// Blocking, on a thread and runtime of its own (callable from async code too).
    pub fn put(&self, job: &str, grouping: &[(&str, &str)], text: &str, deadline: Duration) -> Result<(), PushError> {
        let path = self.group_path(job, grouping);
        let body = Bytes::from(text.to_string());
        std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    let rt = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()
                        .map_err(|e| self.unreachable(e))?;
                    rt.block_on(async {
                        tokio::time::timeout(deadline, self.send(path, body))
                            .await
                            .unwrap_or_else(|_| {
                                Err(PushError::Timeout {
                                    url: self.url.clone(),
                                    deadline,
                                })
                            })
                    })
                })
                .join()
                .unwrap_or_else(|_| Err(self.unreachable("the push thread panicked")))
        })
    }

    async fn send(&self, path: String, body: Bytes) -> Result<(), PushError> {
        let tcp = tokio::net::TcpStream::connect((self.host.as_str(), self.port))
            .await
            .map_err(|e| self.unreachable(e))?;
        let (mut sender, conn) = hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(tcp))
            .await
            .map_err(|e| self.unreachable(e))?;
        let driver = tokio::spawn(conn);
        let req = Request::put(path)
            .header("host", format!("{}:{}", self.host, self.port))
            .header("content-type", "text/plain; version=0.0.4; charset=utf-8")
            .body(Full::new(body))
            .map_err(|e| self.unreachable(e))?;
        let res = sender.send_request(req).await.map_err(|e| self.unreachable(e))?;
        let status = res.status();
        let text = res
            .into_body()
            .collect()
            .await
            .map(|b| String::from_utf8_lossy(&b.to_bytes()).trim().to_string())
            .unwrap_or_default();
        driver.abort();
        if status.is_success() {
            return Ok(());
        }
        Err(PushError::Refused {
            url: self.url.clone(),
            status: status.as_u16(),
            body: text.lines().next().unwrap_or_default().to_string(),
        })
    }

    fn unreachable(&self, e: impl std::fmt::Display) -> PushError {
        PushError::Unreachable {
            url: self.url.clone(),
            why: e.to_string(),
        }
    }
}

/// `/LABEL/VALUE`, or `/LABEL@base64/VALUE` for a value with characters a path cannot carry.
fn segment(label: &str, value: &str) -> String {
    if !value.is_empty() && value.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_.".contains(&b)) {
        format!("/{label}/{value}")
    } else {
        format!("/{label}@base64/{}", base64url(value.as_bytes()))
    }
}

/// URL-safe base64 with padding, as the Pushgateway decodes it.
fn base64url(bytes: &[u8]) -> String {
    const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut s = String::new();
    for chunk in bytes.chunks(3) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, b)| n | (u32::from(*b) << (16 - 8 * i)));
        for i in 0..4 {
            if i <= chunk.len() {
                s.push(A[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                s.push('=');
            }
        }
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_and_group_paths() {
        let g = Gateway::parse("http://pg.monitoring:9091/").unwrap();
        assert_eq!(g.group_path("ic-bench-sweep", &[]), "/metrics/job/ic-bench-sweep");
        assert_eq!(
            g.group_path("ic-bench-pair", &[("pair", "a→b"), ("empty", "")]),
            "/metrics/job/ic-bench-pair/pair@base64/YeKGkmI=/empty@base64/"
        );
        let g = Gateway::parse("http://10.0.0.1:9091/prefix/pg").unwrap();
        assert_eq!(g.group_path("j", &[]), "/prefix/pg/metrics/job/j");
        assert!(matches!(
            Gateway::parse("https://pg:9091"),
            Err(PushError::BadUrl { .. })
        ));
        assert!(matches!(
            Gateway::parse("http://pg:port"),
            Err(PushError::BadUrl { .. })
        ));
        assert_eq!(base64url(b"ab"), "YWI=");
        assert_eq!(base64url(b"abc"), "YWJj");
    }

    #[test]
    fn an_unreachable_gateway_fails_in_time() {
        // A port nothing listens on: bound, then closed.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let g = Gateway::parse(&format!("http://127.0.0.1:{port}")).unwrap();
        let started = std::time::Instant::now();
        let e = g.put("j", &[], "x 1\n", Duration::from_secs(5)).unwrap_err();
        assert!(matches!(e, PushError::Unreachable { .. }), "{e}");
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn a_silent_gateway_times_out_at_the_deadline() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let g = Gateway::parse(&format!("http://{}", listener.local_addr().unwrap())).unwrap();
        let started = std::time::Instant::now();
        let e = g.put("j", &[], "x 1\n", Duration::from_millis(300)).unwrap_err();
        assert!(matches!(e, PushError::Timeout { .. }), "{e}");
        assert!(started.elapsed() < Duration::from_secs(3));
        drop(listener);
    }
}
