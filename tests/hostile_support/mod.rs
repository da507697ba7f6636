//! A hostile client for `serve`: raw TCP speaking the control framing (`icb_engine::wire`), and
//! the checks every attack ends with: the server cut the attacker within its deadline, served a
//! good client right after, and kept its descriptors, shared-memory mappings and memory flat.
#![allow(dead_code)]

use crate::engine_support::{Server, connect};
use icb_engine::auth::{self, Token};
use icb_engine::messages::{Hello, HelloAuth, HexBytes, Message, Role};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

pub const TOKEN: &str = "hostile-suite-token-0123456789abcdef";
/// `serve --max-buffer` in these tests.
pub const MAX_BUFFER: u64 = 64 << 20;
const HEADER_LEN: usize = 12;

pub fn token() -> Token {
    Token::parse(TOKEN, "test").expect("test token")
}

/// A long-running `serve` with the suite's token and bounds (`extra` flags on top).
pub fn start(extra: &[&str]) -> Server {
    let mut flags = vec!["--idle-timeout", "120s", "--max-buffer", "64MiB"];
    flags.extend_from_slice(extra);
    Server::start_with(&flags, &[("IC_BENCH_TOKEN", TOKEN)])
}

/// A good client's small real case; it must succeed. What it shows is that the server still
/// serves (a measured, verified case, exit 0), not a rate: its case is capped at 0.1 s (both
/// sides busy-poll for all of `--max-time`, and every test runs two good clients).
pub fn good_client(server: &Server) {
    let out = connect(
        &server.addr,
        &[
            "--tests",
            "tag_bw",
            "--sizes",
            "8",
            "--memory",
            "host-host",
            "--min-host-bw",
            "0.001",
            "--min-time",
            "0.05",
            "--max-time",
            "0.1",
            "--warmup",
            "2",
            "--min-iterations",
            "4",
        ],
        &[("IC_BENCH_TOKEN", TOKEN)],
    );
    assert_eq!(out.code, 0, "the good client after the attack failed: {}", out.stderr);
}

/// Resident memory (KiB), open descriptors and shared-memory mappings (SysV + /dev/shm) of `pid`.
pub fn footprint(pid: u32) -> (u64, usize, usize) {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    let rss = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS");
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).expect("fd dir").count();
    let maps = std::fs::read_to_string(format!("/proc/{pid}/maps")).expect("maps");
    let shm = maps
        .lines()
        .filter(|l| l.contains("SYSV") || l.contains("/dev/shm/"))
        .count();
    (rss, fds, shm)
}

/// Runs `attack` against a fresh server between two good clients and checks that the server
/// stayed flat: descriptors and shared-memory mappings back to the baseline, memory within 16 MiB.
pub fn survives(extra: &[&str], attack: impl FnOnce(&Server)) {
    let server = start(extra);
    good_client(&server);
    let before = footprint(server.pid());
    attack(&server);
    good_client(&server);
    // Refusals are answered off the serving path: give them a moment to close.
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut after = footprint(server.pid());
    while (after.1 > before.1 || after.2 > before.2) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
        after = footprint(server.pid());
    }
    assert!(after.1 <= before.1, "descriptors grew: {before:?} → {after:?}");
    assert!(
        after.2 <= before.2,
        "shared-memory mappings grew: {before:?} → {after:?}"
    );
    assert!(after.0 <= before.0 + 16 * 1024, "memory grew: {before:?} → {after:?}");
}

pub fn raw(server: &Server) -> TcpStream {
    let s = TcpStream::connect(&server.addr).expect("connect to serve");
    s.set_read_timeout(Some(Duration::from_secs(30))).expect("read timeout");
    s
}

pub fn frame(version: u16, body: &[u8]) -> Vec<u8> {
    let mut f = b"ICBC".to_vec();
    f.extend_from_slice(&version.to_be_bytes());
    f.extend_from_slice(&0u16.to_be_bytes());
    f.extend_from_slice(&(body.len() as u32).to_be_bytes());
    f.extend_from_slice(body);
    f
}

pub fn send(s: &mut TcpStream, msg: &Message) {
    s.write_all(&icb_engine::wire::encode(msg).expect("encode"))
        .expect("send");
}

pub fn send_json(s: &mut TcpStream, json: &str) {
    s.write_all(&frame(icb_engine::PROTOCOL_VERSION, json.as_bytes()))
        .expect("send");
}

/// The next message from the server, or `None` when it closed the connection.
pub fn recv(s: &mut TcpStream) -> Option<Message> {
    let mut header = [0u8; HEADER_LEN];
    s.read_exact(&mut header).ok()?;
    let len = icb_engine::wire::parse_header(&header).expect("a valid header from serve");
    let mut body = vec![0u8; len as usize];
    s.read_exact(&mut body).ok()?;
    Some(icb_engine::wire::decode_body(&body).expect("a valid message from serve"))
}

/// Reads until the server closes the connection (skipping what it says last); returns how long
/// that took. Fails past `limit`.
pub fn closed_within(s: &mut TcpStream, limit: Duration) -> Duration {
    let started = Instant::now();
    s.set_read_timeout(Some(limit + Duration::from_secs(1)))
        .expect("read timeout");
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(_) => continue,
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e) => panic!("serve did not close the connection within {limit:?}: {e}"),
        }
    }
    let took = started.elapsed();
    assert!(
        took <= limit,
        "serve took {took:?} to cut the connection (limit {limit:?})"
    );
    took
}

/// The server's challenge nonce (the first thing it says).
pub fn challenge(s: &mut TcpStream) -> Vec<u8> {
    match recv(s) {
        Some(Message::Challenge { nonce, token_required }) => {
            assert!(token_required, "the suite's server checks a token");
            nonce.0
        }
        other => panic!("expected a challenge, got {other:?}"),
    }
}

/// A client hello with `worker_address` and no proof yet.
pub fn hello(worker_address: Vec<u8>) -> Hello {
    Hello {
        role: Role::Client,
        tool_version: env!("CARGO_PKG_VERSION").into(),
        hostname: "hostile".into(),
        boot_id: "hostile-boot".into(),
        ucx_version: "1.22.0".into(),
        ucx_library: String::new(),
        cuda: Default::default(),
        env: Default::default(),
        worker_address: HexBytes(worker_address),
        peer_errors: false,
        engine: None,
        nixl: None,
        line_rate_bps: None,
        readiness: None,
        auth: None,
    }
}

/// `hello` proven with `token` over the server's `nonce`.
pub fn proven(mut h: Hello, token: &Token, nonce: &[u8]) -> Hello {
    let mine = auth::random_bytes();
    h.auth = Some(HelloAuth {
        nonce: HexBytes(mine.to_vec()),
        proof: auth::client_proof(token, nonce, &mine, &auth::identity(&h)),
    });
    h
}

/// A real UCX worker address (kept alive by the returned guard) for sessions that get past the
/// hello: the server creates its endpoint from it.
pub struct Worker {
    pub address: Vec<u8>,
    _worker: ucx::Worker,
    _context: ucx::Context,
}

pub fn worker() -> Worker {
    let dir = std::env::var("IC_BENCH_UCX_LIB").expect("IC_BENCH_UCX_LIB (set by .cargo/config.toml)");
    let lib = ucx::Ucx::load(Some(std::path::Path::new(&dir))).expect("load UCX");
    let context = lib.context().features(true, true).build().expect("UCX context");
    let worker = context.worker().expect("UCX worker");
    let address = worker.address().expect("worker address");
    Worker {
        address,
        _worker: worker,
        _context: context,
    }
}

/// Connects and completes the admission with a real worker; returns the stream and the worker.
pub fn admitted(server: &Server) -> (TcpStream, Worker) {
    let w = worker();
    let mut s = raw(server);
    let nonce = challenge(&mut s);
    send(
        &mut s,
        &Message::Hello(Box::new(proven(hello(w.address.clone()), &token(), &nonce))),
    );
    match recv(&mut s) {
        Some(Message::Hello(h)) => assert!(h.auth.is_some(), "the server proves the token too"),
        other => panic!("expected the server's hello, got {other:?}"),
    }
    (s, w)
}

/// The server's answer is a denial of `cause`, then it closes.
pub fn expect_denied(s: &mut TcpStream, cause: icb_engine::messages::DenyCause) {
    match recv(s) {
        Some(Message::Denied { cause: got, .. }) => assert_eq!(got, cause),
        other => panic!("expected denied ({cause:?}), got {other:?}"),
    }
    closed_within(s, Duration::from_secs(3));
}
