//! Bad input and broken peers: each ends in one error line, exit code 2, within a bounded time,
//! with no panic and no process left behind.

mod engine_support;

use engine_support::{FAST, Server, command, connect, run};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

#[test]
fn unknown_flag_is_a_usage_error() {
    let out = run(
        command(&["connect", "127.0.0.1:1", "--bogus-flag"], &[]),
        Duration::from_secs(20),
    );
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("--bogus-flag"), "{}", out.stderr);
    assert!(!out.stderr.contains("panicked"));
}

#[test]
fn zero_size_is_a_usage_error() {
    let out = run(
        command(&["connect", "127.0.0.1:1", "--sizes", "0"], &[]),
        Duration::from_secs(20),
    );
    assert_eq!(out.code, 2);
    assert!(out.stderr.contains("at least 1 byte"), "{}", out.stderr);
    assert!(!out.stderr.contains("panicked"));
}

#[test]
fn unreachable_peer_fails_fast() {
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let addr = format!("127.0.0.1:{port}");
    let out = connect(&addr, &["--connect-timeout", "5s"], &[]);
    assert_eq!(out.code, 2);
    let line = out.error_line();
    assert!(line.contains("cannot reach ic-bench serve at 127.0.0.1:"), "{line}");
    assert!(out.elapsed < Duration::from_secs(15), "{:?}", out.elapsed);
}

#[test]
fn bad_server_address_is_a_usage_error() {
    let out = connect("no-port-here", &[], &[]);
    assert_eq!(out.code, 2);
    assert!(out.error_line().contains("HOST:PORT"), "{}", out.stderr);
}

/// A fake server that writes `bytes` to the first client and keeps the connection open.
fn fake_server(bytes: Vec<u8>) -> (String, std::thread::JoinHandle<()>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    let h = std::thread::spawn(move || {
        if let Ok((mut s, _)) = l.accept() {
            let _ = s.write_all(&bytes);
            let _ = s.set_read_timeout(Some(Duration::from_secs(20)));
            let mut sink = [0u8; 4096];
            while matches!(s.read(&mut sink), Ok(n) if n > 0) {}
        }
    });
    (addr, h)
}

fn header(magic: &[u8; 4], version: u16, len: u32) -> Vec<u8> {
    let mut h = magic.to_vec();
    h.extend_from_slice(&version.to_be_bytes());
    h.extend_from_slice(&[0, 0]);
    h.extend_from_slice(&len.to_be_bytes());
    h
}

fn expect_client_error(server_bytes: Vec<u8>, needle: &str) {
    let (addr, h) = fake_server(server_bytes);
    let out = connect(&addr, &[], &[]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    let line = out.error_line();
    assert!(line.contains(needle), "expected '{needle}' in: {line}");
    assert!(out.elapsed < Duration::from_secs(20), "{:?}", out.elapsed);
    let _ = h.join();
}

#[test]
fn garbage_from_the_server_is_rejected() {
    expect_client_error(b"HTTP/1.1 400 Bad Request\r\n\r\n".to_vec(), "the peer is not ic-bench");
}

#[test]
fn oversized_control_message_is_rejected() {
    expect_client_error(
        header(b"ICBC", icb_engine::PROTOCOL_VERSION, u32::MAX),
        "control message of 4294967295 bytes exceeds the 1 MiB limit: the peer is not ic-bench",
    );
}

#[test]
fn protocol_version_mismatch_is_explained() {
    // A v1 server (before token admission) meets this client.
    let mut bytes = header(b"ICBC", 1, 2);
    bytes.extend_from_slice(b"{}");
    expect_client_error(
        bytes,
        "peer speaks control protocol v1, this ic-bench speaks v2: use the same ic-bench version on both sides",
    );
}

#[test]
fn malformed_message_is_rejected() {
    let body = br#"{"type":"hello","role":"server"}"#;
    let mut bytes = header(b"ICBC", icb_engine::PROTOCOL_VERSION, body.len() as u32);
    bytes.extend_from_slice(body);
    expect_client_error(bytes, "malformed control message");
}

/// Garbage is not `--once`'s client: the server says so in one line and serves the real one.
#[test]
fn server_rejects_garbage_and_serves_the_next_client() {
    let server = Server::start(&[]);
    let mut s = TcpStream::connect(&server.addr).unwrap();
    s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let out = connect(&server.addr, FAST, &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let (code, err) = server.wait(Duration::from_secs(20));
    assert_eq!(code, 0, "{err}");
    let lines: Vec<&str> = err.lines().filter(|l| l.contains("not admitted")).collect();
    assert_eq!(lines.len(), 1, "{err}");
    assert!(lines[0].contains("the peer is not ic-bench"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn peer_killed_mid_test_ends_the_client_quickly() {
    let mut server = Server::start(&[]);
    let args = [
        "--tests",
        "tag_bw",
        "--memory",
        "host-host",
        "--sizes",
        "1MiB",
        "--min-time",
        "20",
        "--max-time",
        "30",
        "--warmup",
        "2",
    ];
    let mut cmd = command(
        &[&["connect", server.addr.as_str(), "--json-line"][..], &args[..]].concat(),
        &[],
    );
    cmd.stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped());
    let mut client = cmd.spawn().unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    assert!(
        client.try_wait().unwrap().is_none(),
        "client ended before the server was killed"
    );
    server.child.kill().unwrap();
    let killed = Instant::now();
    let status = loop {
        if let Some(s) = client.try_wait().unwrap() {
            break s;
        }
        if killed.elapsed() > Duration::from_secs(20) {
            let _ = client.kill();
            panic!("client still running 20 s after its server was killed");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut err = String::new();
    client.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    assert_eq!(status.code(), Some(2), "{err}");
    assert!(!err.contains("panicked"), "{err}");
    assert!(
        err.contains("ic-bench: error:") && err.contains("tag_bw 1 MiB"),
        "{err}"
    );
    assert!(
        killed.elapsed() < Duration::from_secs(10),
        "took {:?}",
        killed.elapsed()
    );
}

#[test]
fn client_killed_mid_test_ends_the_server_quickly() {
    let server = Server::start(&[]);
    let args = [
        "--tests",
        "put_bw",
        "--memory",
        "host-host",
        "--sizes",
        "1MiB",
        "--min-time",
        "20",
        "--max-time",
        "30",
        "--warmup",
        "2",
    ];
    let mut cmd = command(&[&["connect", server.addr.as_str()][..], &args[..]].concat(), &[]);
    cmd.stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null());
    let mut client = cmd.spawn().unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    client.kill().unwrap();
    let _ = client.wait();
    let (code, err) = server.wait(Duration::from_secs(10));
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("put_bw 1 MiB"), "{err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn fast_flags_parse() {
    // The shared fast flag set must stay valid for connect.
    let out = run(
        command(
            &[&["connect", "127.0.0.1:1", "--connect-timeout", "1"][..], FAST].concat(),
            &[],
        ),
        Duration::from_secs(20),
    );
    assert_eq!(out.code, 2);
    assert!(out.error_line().contains("cannot reach"), "{}", out.stderr);
}
