//! Prometheus and the Pushgateway (Debian's packages, installed by scripts/setup) on loopback for
//! a test: each in a temporary directory, on a free port, killed and reaped on drop; a minimal
//! HTTP GET for their APIs, every wait with a deadline.
#![allow(dead_code)]

use serde_json::Value;
use std::io::{Read as _, Write as _};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The binary, or a panic saying how to get it (under CI scripts/setup installs it).
pub fn tool(name: &str) -> String {
    let found = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join(name))
        .find(|p| p.is_file());
    match found {
        Some(p) => p.display().to_string(),
        None => {
            panic!("{name} is not installed: run scripts/setup (apt-get install prometheus prometheus-pushgateway)")
        }
    }
}

/// A free loopback port (bound, then released for the daemon to take).
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A daemon of the test: killed and reaped on drop, its directory removed.
pub struct Daemon {
    child: Child,
    pub port: u16,
    pub dir: tempfile::TempDir,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Daemon {
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn start(mut cmd: Command, port: u16, dir: tempfile::TempDir, ready: &str) -> Daemon {
        let log = std::fs::File::create(dir.path().join("log")).unwrap();
        let child = cmd
            .stdout(Stdio::null())
            .stderr(log)
            .stdin(Stdio::null())
            .spawn()
            .unwrap();
        let mut d = Daemon { child, port, dir };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if get(port, ready).is_ok_and(|(code, _)| code == 200) {
                return d;
            }
            if let Ok(Some(status)) = d.child.try_wait() {
                panic!("{cmd:?} exited with {status}: {}", d.log());
            }
            assert!(Instant::now() < deadline, "{cmd:?} not ready within 60 s: {}", d.log());
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("log")).unwrap_or_default()
    }

    /// `prometheus-pushgateway` on a free port, no persistence.
    pub fn pushgateway() -> Daemon {
        let port = free_port();
        let mut cmd = Command::new(tool("prometheus-pushgateway"));
        cmd.arg(format!("--web.listen-address=127.0.0.1:{port}"));
        Daemon::start(cmd, port, tempfile::tempdir().unwrap(), "/-/ready")
    }

    /// `prometheus` scraping `target` every second (honor_labels, as a Pushgateway needs),
    /// evaluating `rules` every second.
    pub fn prometheus(target: u16, rules: &Path) -> Daemon {
        let port = free_port();
        let dir = tempfile::tempdir().unwrap();
        let config = dir.path().join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files:\n  - {}\nscrape_configs:\n  - job_name: pushgateway\n    honor_labels: true\n    static_configs:\n      - targets: ['127.0.0.1:{target}']\n",
                rules.display()
            ),
        )
        .unwrap();
        let mut cmd = Command::new(tool("prometheus"));
        cmd.arg(format!("--config.file={}", config.display()))
            .arg(format!("--storage.tsdb.path={}", dir.path().join("data").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"));
        Daemon::start(cmd, port, dir, "/-/ready")
    }

    /// An instant query's result vector.
    pub fn query(&self, promql: &str) -> Vec<Value> {
        let (code, body) = get(self.port, &format!("/api/v1/query?query={}", encode(promql))).unwrap();
        let v: Value = serde_json::from_str(&body).unwrap_or_else(|e| panic!("{e}: {body}"));
        assert_eq!((code, v["status"].as_str()), (200, Some("success")), "{promql}: {body}");
        v["data"]["result"].as_array().cloned().unwrap_or_default()
    }

    /// The alerts Prometheus holds now (pending and firing).
    pub fn alerts(&self) -> Vec<Value> {
        let (_, body) = get(self.port, "/api/v1/alerts").unwrap();
        let v: Value = serde_json::from_str(&body).unwrap();
        v["data"]["alerts"].as_array().cloned().unwrap_or_default()
    }
}

/// Waits for `what` to hold, at most `limit`.
pub fn wait_for(limit: Duration, what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !check() {
        assert!(Instant::now() < deadline, "not within {limit:?}: {what}");
        std::thread::sleep(Duration::from_millis(250));
    }
}

/// `GET path` on loopback: (status, body). HTTP/1.0, so the body ends with the connection.
pub fn get(port: u16, path: &str) -> std::io::Result<(u16, String)> {
    let mut s = std::net::TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_secs(2))?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1:{port}\r\n\r\n")?;
    let mut text = String::new();
    s.read_to_string(&mut text)?;
    let code = text.split_whitespace().nth(1).and_then(|c| c.parse().ok()).unwrap_or(0);
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b).to_string();
    Ok((code, body))
}

fn encode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}
