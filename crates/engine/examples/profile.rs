//! Times a measurement profile end to end on this host: `serve` on one thread, `connect` on
//! another (two UCX contexts and workers, real transfers), then prints every case with the
//! precision it reached and the wall time. Host memory only unless `--all-memory`.
//!
//! ```sh
//! cargo run --release -p icb-engine --example profile -- verdict   # the default gate
//! cargo run --release -p icb-engine --example profile -- full      # the full curve
//! ```

use icb_core::{MemoryPair, RunSettings, ToolInfo};
use icb_engine::{ConnectOptions, ServeOptions, UcxOptions};
use std::sync::mpsc;
use std::time::{Duration, Instant};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut settings = match args.first().map(String::as_str) {
        Some("verdict") | None => RunSettings::verdict_profile(),
        Some("full") => RunSettings::full_curve(),
        Some(other) => {
            eprintln!("profile: unknown profile '{other}': use verdict or full");
            std::process::exit(2);
        }
    };
    if !args.iter().any(|a| a == "--all-memory") {
        settings.memory = vec![MemoryPair::HOST_HOST];
    }
    let tool = ToolInfo {
        name: "ic-bench".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        git_commit: "example".into(),
        ucx_headers: String::new(),
    };
    let started = Instant::now();
    let (tx, rx) = mpsc::channel();
    let server_tool = tool.clone();
    let server = std::thread::spawn(move || {
        icb_engine::serve(ServeOptions {
            cancel: None,
            guard: Default::default(),
            listen: "127.0.0.1:0".into(),
            once: true,
            idle_timeout: Some(Duration::from_secs(60)),
            ucx: UcxOptions::default(),
            tool: server_tool,
            on_listening: Some(Box::new(move |l| {
                let _ = tx.send(l.address);
            })),
        })
    });
    let Ok(addr) = rx.recv_timeout(Duration::from_secs(60)) else {
        eprintln!("profile: the server did not start: {:?}", server.join());
        std::process::exit(2);
    };
    let report = icb_engine::connect(ConnectOptions {
        cancel: None,
        token: None,
        server: addr.to_string(),
        settings,
        connect_timeout: Duration::from_secs(10),
        locality: None,
        expect_flags: Default::default(),
        expect_config: None,
        expectation: None,
        ucx: UcxOptions::default(),
        tool,
        placement_mode: "example".into(),
        on_case: None,
    });
    let _ = server.join();
    let report = match report {
        Ok(r) => r,
        Err(e) => {
            eprintln!("profile: {e}");
            std::process::exit(2);
        }
    };
    for c in &report.cases {
        let Some(m) = &c.measurement else {
            println!(
                "{:8} {:>9} {:10} {:?}",
                c.test.as_str(),
                c.size,
                c.memory.to_string(),
                c.status
            );
            continue;
        };
        let value = match (&m.latency_us, m.bandwidth_bps) {
            (Some(l), _) => format!("p50 {:.3} us", l.p50),
            (None, Some(b)) => format!("{:.2} GB/s", b / 1e9),
            _ => String::new(),
        };
        let p = m.precision.as_ref();
        println!(
            "{:8} {:>9} x{:<3} {:16} rounds {:>3} ±{:>5.2}% stop {:?} {:.3} s",
            c.test.as_str(),
            c.size,
            c.blocks.unwrap_or(1),
            value,
            p.map(|p| p.rounds).unwrap_or(0),
            p.and_then(|p| p.rel_half_width).unwrap_or(f64::NAN) * 100.0,
            p.map(|p| p.stopped_by),
            m.elapsed_s
        );
    }
    println!(
        "verdict {:?}: {}\nwall {:.2} s",
        report.verdict.status,
        report.verdict.reason,
        started.elapsed().as_secs_f64()
    );
}
