//! A bare front end to the NIXL engine for scripts (scripts/bench-nixl) until the CLI grows
//! `--engine nixl`: `nixl-pair serve ADDR:PORT` serves one client; `nixl-pair connect ADDR:PORT
//! SIZES BATCHES [MIN_TIME_S]` prints the report as one JSON line. Sizes and batches are
//! comma-separated; exit codes as the CLI's (0 pass, 1 verdict failed, 2 error).

use icb_core::{BandwidthUnit, MemoryPair, RunSettings, TestKind, ToolInfo};
use icb_engine::{ConnectOptions, ServeOptions};
use icb_nixl_engine::{NixlOptions, exit_process};
use std::time::Duration;

fn list<T: std::str::FromStr>(s: &str) -> Option<Vec<T>> {
    s.split(',').map(|x| x.trim().parse().ok()).collect()
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let tool = ToolInfo {
        name: "nixl-pair".into(),
        version: env!("CARGO_PKG_VERSION").into(),
        git_commit: String::new(),
        ucx_headers: String::new(),
    };
    let code = match (args.get(1).map(String::as_str), args.get(2)) {
        (Some("serve"), Some(addr)) => {
            let opts = ServeOptions {
                listen: addr.clone(),
                once: true,
                idle_timeout: Some(Duration::from_secs(120)),
                ucx: Default::default(),
                tool,
                on_listening: Some(Box::new(|l| eprintln!("listening on {}", l.address))),
            };
            match icb_nixl_engine::serve(opts, NixlOptions::default()) {
                Ok(()) => 0,
                Err(e) => {
                    eprintln!("nixl-pair serve: {e}");
                    e.exit_code()
                }
            }
        }
        (Some("connect"), Some(addr)) => {
            let (Some(sizes), Some(batches)) = (
                args.get(3).and_then(|s| list::<u64>(s)),
                args.get(4).and_then(|s| list::<u32>(s)),
            ) else {
                eprintln!("usage: nixl-pair connect ADDR:PORT SIZES BATCHES [MIN_TIME_S]");
                exit_process(2);
            };
            let min_time = args.get(5).and_then(|s| s.parse().ok()).unwrap_or(1.0);
            let settings = RunSettings {
                tests: vec![TestKind::GetBw, TestKind::PutBw],
                sizes,
                memory: vec![MemoryPair::HOST_HOST],
                warmup_iterations: 10,
                min_iterations: 10,
                min_time_s: min_time,
                max_time_s: (min_time * 4.0).max(5.0),
                window: 1,
                unit: BandwidthUnit::GBps,
                require_cuda: false,
            };
            let opts = ConnectOptions {
                server: addr.clone(),
                settings,
                connect_timeout: Duration::from_secs(30),
                locality: None,
                expect_flags: Default::default(),
                expect_config: None,
                expectation: None,
                ucx: Default::default(),
                tool,
                placement_mode: "manual".into(),
                on_case: None,
            };
            let nixl = NixlOptions {
                batches,
                ..Default::default()
            };
            match icb_nixl_engine::connect(opts, nixl) {
                Ok(r) => {
                    match serde_json::to_string(&r) {
                        Ok(j) => println!("{j}"),
                        Err(e) => eprintln!("nixl-pair: cannot encode the report: {e}"),
                    }
                    r.verdict.status.exit_code()
                }
                Err(e) => {
                    eprintln!("nixl-pair connect: {e}");
                    e.exit_code()
                }
            }
        }
        _ => {
            eprintln!("usage: nixl-pair serve ADDR:PORT | nixl-pair connect ADDR:PORT SIZES BATCHES [MIN_TIME_S]");
            2
        }
    };
    exit_process(code);
}
