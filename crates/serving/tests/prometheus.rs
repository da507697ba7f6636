//! `--prometheus URL` end to end: Debian's Prometheus (scripts/setup installs it) scraping two
//! small exporters that serve the recorded vLLM and SGLang metrics every 500 ms, their counters
//! growing by the recorded values each scrape (as a serving engine's would), the figures read
//! over a window checked against the hand-computed ones. Every wait has a deadline; the daemon and
//! the exporters are stopped on drop.

use crate::common::*;
use icb_serving::http::{encode, get};
use icb_serving::{Options, Source, probe_serving};
use std::io::{Read as _, Write as _};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Serves `text` on loopback; counters (`_sum`, `_count`, `_total`, `_bucket`) are multiplied by
/// the number of scrapes so far, gauges served as recorded.
struct Exporter {
    port: u16,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

fn scaled(text: &str, k: u64) -> String {
    text.lines()
        .map(|l| {
            let counter = ["_sum", "_count", "_total", "_bucket"]
                .iter()
                .any(|s| l.split(['{', ' ']).next().is_some_and(|n| n.ends_with(s)));
            match l.rsplit_once(' ') {
                Some((head, v)) if counter && !l.starts_with('#') => {
                    format!("{head} {}", v.parse::<f64>().unwrap() * k as f64)
                }
                _ => l.to_string(),
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

impl Exporter {
    fn start(text: String) -> Exporter {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let port = listener.local_addr().unwrap().port();
        let stop = Arc::new(AtomicBool::new(false));
        let scrapes = AtomicU64::new(0);
        let stopping = stop.clone();
        let thread = std::thread::spawn(move || {
            while !stopping.load(Ordering::Relaxed) {
                let Ok((mut s, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(20));
                    continue;
                };
                s.set_nonblocking(false).unwrap();
                s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
                let mut head = [0u8; 4096];
                let _ = s.read(&mut head);
                let body = scaled(&text, scrapes.fetch_add(1, Ordering::Relaxed) + 1);
                let _ = write!(
                    s,
                    "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
            }
        });
        Exporter {
            port,
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for Exporter {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

struct Prometheus {
    child: Child,
    port: u16,
    _dir: tempfile::TempDir,
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

impl Prometheus {
    fn start(targets: &[u16]) -> Prometheus {
        let bin = ["/usr/bin/prometheus", "/usr/local/bin/prometheus"]
            .into_iter()
            .find(|p| std::path::Path::new(p).is_file())
            .expect("prometheus is not installed: run scripts/setup (apt-get install prometheus)");
        let dir = tempfile::tempdir().unwrap();
        let port = free_port();
        let targets: Vec<String> = targets.iter().map(|p| format!("'127.0.0.1:{p}'")).collect();
        let config = dir.path().join("prometheus.yml");
        std::fs::write(
            &config,
            format!(
                "global:\n  scrape_interval: 500ms\nscrape_configs:\n  - job_name: engines\n    static_configs:\n      - targets: [{}]\n",
                targets.join(", ")
            ),
        )
        .unwrap();
        let child = Command::new(bin)
            .arg(format!("--config.file={}", config.display()))
            .arg(format!("--storage.tsdb.path={}", dir.path().join("data").display()))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let p = Prometheus { child, port, _dir: dir };
        p.wait("ready", || {
            get(&format!("{}/-/ready", p.url()), Duration::from_secs(2)).is_ok()
        });
        p
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    fn wait(&self, what: &str, mut ok: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while !ok() {
            assert!(Instant::now() < deadline, "prometheus: not {what} within 30 s");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Whether every target has been scraped at least `n` times in the last minute.
    fn scraped(&self, n: u32) -> bool {
        let q = encode("min(count_over_time(up[1m]))");
        get(
            &format!("{}/api/v1/query?query={q}", self.url()),
            Duration::from_secs(2),
        )
        .ok()
        .and_then(|b| serde_json::from_str::<serde_json::Value>(&b).ok())
        .and_then(|v| {
            v["data"]["result"][0]["value"][1]
                .as_str()
                .and_then(|s| s.parse::<u32>().ok())
        })
        .is_some_and(|c| c >= n)
    }
}

#[test]
fn prometheus_figures_over_a_window_match_the_hand_computed_ones() {
    let read = |f: &str| std::fs::read_to_string(fixture(f)).unwrap();
    let vllm = Exporter::start(read("vllm_tp1.prom"));
    let sglang = Exporter::start(read("sglang.prom"));
    let prom = Prometheus::start(&[vllm.port, sglang.port]);
    prom.wait("scraping both engines three times", || prom.scraped(3));
    let o = Options {
        sources: vec![Source::Prometheus(prom.url())],
        window: "1m".into(),
        history: None,
        prefill: None,
        decode: None,
        tp: 1,
        op: None,
        line_rate_gbit: None,
        kv: None,
        deadline: Duration::from_secs(5),
    };
    let r = probe_serving(&o).unwrap();
    let s = r.serving.as_ref().unwrap();
    assert_eq!(s.sources, vec![format!("prometheus:{} (window 1m)", prom.url())]);
    let v = s
        .engines
        .iter()
        .find(|f| f.engine == "vllm-nixl")
        .expect("vLLM's figures");
    assert!(
        v.series.contains(&format!("instance=127.0.0.1:{}", vllm.port)),
        "{}",
        v.series
    );
    // The increase over the window grows every series alike: the per-transfer figures are the
    // recorded ones.
    assert!(v.transfers > 0.0);
    close(v.bytes_per_transfer, 134_217_728.0);
    close(v.descriptors_per_transfer, 4096.0);
    close(v.transfer_ms, 50.0);
    close(v.post_ms, 2.0);
    close(v.rank_gbps, 2.684_354_56);
    assert!(v.failures > 0.0);
    let sg: Vec<_> = s.engines.iter().filter(|f| f.engine == "sglang").collect();
    assert_eq!(sg.len(), 2);
    close(sg[0].rank_gbps, 1.677_721_6);
    close(sg[1].rank_gbps, 1.342_177_28);
    close(sg[0].transfer_ms, 40.0);
}

#[test]
fn a_prometheus_that_is_down_is_one_line() {
    let o = Options {
        sources: vec![Source::Prometheus(format!("http://127.0.0.1:{}", free_port()))],
        window: "5m".into(),
        history: None,
        prefill: None,
        decode: None,
        tp: 1,
        op: None,
        line_rate_gbit: None,
        kv: None,
        deadline: Duration::from_secs(5),
    };
    let e = probe_serving(&o).unwrap_err().to_string();
    let lines: Vec<&str> = e.lines().collect();
    assert_eq!(lines.len(), 2, "{e}");
    assert!(
        lines[1].trim_start().starts_with("--prometheus http://127.0.0.1:") && lines[1].contains("unreachable"),
        "{e}"
    );
}
