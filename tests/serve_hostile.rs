//! A scripted hostile client against `serve` (real process, real UCX, raw TCP): each attack is
//! one test that checks the attacker is cut or refused within its deadline, that a good client
//! is served right after, and that the server's descriptors, shared-memory mappings and memory
//! stayed flat (`hostile_support::survives`).

mod engine_support;
mod hostile_support;

use hostile_support::*;
use icb_core::{MemoryPair, TestKind};
use icb_engine::admit::CaseRefusal;
use icb_engine::messages::{CaseSetup, DenyCause, HexBytes, Message, PhaseKind};
use std::io::Write;
use std::time::{Duration, Instant};

fn setup(test: TestKind, size: u64) -> CaseSetup {
    CaseSetup {
        test,
        memory: MemoryPair::HOST_HOST,
        size,
        window: 1,
        seed: 7,
        blocks: 1,
        untouched: false,
        kv: None,
        cuda_alloc: Default::default(),
    }
}

/// Cut at once: a malformed frame ends the connection within a second or two.
const AT_ONCE: Duration = Duration::from_secs(3);

#[test]
fn no_token_is_refused() {
    survives(&[], |server| {
        let mut s = raw(server);
        let _ = challenge(&mut s);
        send(&mut s, &Message::Hello(Box::new(hello(vec![1; 64]))));
        expect_denied(&mut s, DenyCause::Unauthorized);
    });
}

#[test]
fn wrong_token_is_refused() {
    survives(&[], |server| {
        let mut s = raw(server);
        let nonce = challenge(&mut s);
        let wrong = icb_engine::auth::Token::parse("a-different-token-0123456789", "test").unwrap();
        send(
            &mut s,
            &Message::Hello(Box::new(proven(hello(vec![1; 64]), &wrong, &nonce))),
        );
        expect_denied(&mut s, DenyCause::Unauthorized);
    });
}

#[test]
fn an_answer_replayed_from_another_session_is_refused() {
    survives(&[], |server| {
        // A recorded session: its answer was right for its own challenge.
        let mut first = raw(server);
        let nonce = challenge(&mut first);
        let recorded = proven(hello(vec![1; 64]), &token(), &nonce);
        // Ended before the next connection (else that one is told "busy").
        first.shutdown(std::net::Shutdown::Write).unwrap();
        closed_within(&mut first, AT_ONCE);
        let mut s = raw(server);
        let _ = challenge(&mut s);
        send(&mut s, &Message::Hello(Box::new(recorded)));
        expect_denied(&mut s, DenyCause::Unauthorized);
    });
}

#[test]
fn a_proof_of_the_wrong_length_is_refused() {
    survives(&[], |server| {
        let mut s = raw(server);
        let nonce = challenge(&mut s);
        let mut h = proven(hello(vec![1; 64]), &token(), &nonce);
        if let Some(a) = h.auth.as_mut() {
            a.proof = HexBytes(a.proof.0[..7].to_vec());
        }
        send(&mut s, &Message::Hello(Box::new(h)));
        expect_denied(&mut s, DenyCause::Unauthorized);
        // A nonce of the wrong length does not even parse as a hello: cut at once.
        let mut s = raw(server);
        let nonce = challenge(&mut s);
        let mut h = proven(hello(vec![1; 64]), &token(), &nonce);
        if let Some(a) = h.auth.as_mut() {
            a.nonce = HexBytes(vec![0; 3]);
        }
        send(&mut s, &Message::Hello(Box::new(h)));
        closed_within(&mut s, AT_ONCE);
    });
}

#[test]
fn a_client_silent_before_its_hello_is_cut() {
    survives(&[], |server| {
        let mut s = raw(server);
        let _ = challenge(&mut s);
        // The admission deadline is 5 s.
        let took = closed_within(&mut s, Duration::from_secs(8));
        assert!(
            took >= Duration::from_secs(4),
            "cut after {took:?}, before its deadline"
        );
    });
}

#[test]
fn a_client_stalling_mid_frame_is_cut() {
    survives(&["--max-session", "60s"], |server| {
        let (mut s, _w) = admitted(server);
        // Half a header, then nothing (slowloris): the frame deadline is 3 s.
        s.write_all(&frame(icb_engine::PROTOCOL_VERSION, b"{}")[..6]).unwrap();
        closed_within(&mut s, Duration::from_secs(6));
    });
}

#[test]
fn a_huge_frame_length_is_cut_at_once() {
    survives(&[], |server| {
        let mut s = raw(server);
        let _ = challenge(&mut s);
        let mut f = frame(icb_engine::PROTOCOL_VERSION, b"");
        f[8..12].copy_from_slice(&u32::MAX.to_be_bytes());
        s.write_all(&f).unwrap();
        closed_within(&mut s, AT_ONCE);
    });
}

#[test]
fn a_zero_length_frame_is_cut_at_once() {
    survives(&[], |server| {
        let mut s = raw(server);
        let _ = challenge(&mut s);
        s.write_all(&frame(icb_engine::PROTOCOL_VERSION, b"")).unwrap();
        closed_within(&mut s, AT_ONCE);
    });
}

#[test]
fn invalid_json_is_cut_at_once() {
    survives(&[], |server| {
        let mut s = raw(server);
        let _ = challenge(&mut s);
        send_json(&mut s, "{\"type\": \"hello\", \"role\": ");
        closed_within(&mut s, AT_ONCE);
    });
}

#[test]
fn garbage_that_is_not_ic_bench_is_cut_at_once() {
    survives(&[], |server| {
        let mut s = raw(server);
        s.write_all(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        closed_within(&mut s, AT_ONCE);
    });
}

#[test]
fn an_old_protocol_version_is_cut_at_once() {
    survives(&[], |server| {
        let mut s = raw(server);
        let _ = challenge(&mut s);
        s.write_all(&frame(1, b"{\"type\":\"bye\"}")).unwrap();
        closed_within(&mut s, AT_ONCE);
    });
}

#[test]
fn a_valid_message_instead_of_the_hello_is_cut() {
    survives(&[], |server| {
        let mut s = raw(server);
        let _ = challenge(&mut s);
        send(&mut s, &Message::Setup(setup(TestKind::TagBw, 8)));
        closed_within(&mut s, AT_ONCE);
    });
}

#[test]
fn a_phase_before_any_setup_ends_the_session() {
    survives(&[], |server| {
        let (mut s, _w) = admitted(server);
        let phase = Message::Phase {
            kind: PhaseKind::Measure,
            iterations: 10,
            timeout_s: 5.0,
            window: None,
        };
        send(&mut s, &phase);
        assert!(
            matches!(recv(&mut s), Some(Message::Error { .. })),
            "an error, then the end"
        );
        closed_within(&mut s, AT_ONCE);
    });
}

#[test]
fn a_finish_before_any_setup_is_answered_unverified() {
    survives(&[], |server| {
        let (mut s, _w) = admitted(server);
        send(&mut s, &Message::Finish);
        match recv(&mut s) {
            Some(Message::Finished { verified, .. }) => assert!(!verified),
            other => panic!("expected finished, got {other:?}"),
        }
        send(&mut s, &Message::Bye);
        closed_within(&mut s, AT_ONCE);
    });
}

#[test]
fn a_buffer_above_max_buffer_is_refused_before_allocating() {
    survives(&[], |server| {
        let (mut s, _w) = admitted(server);
        let (rss_before, _, _) = footprint(server.pid());
        send(&mut s, &Message::Setup(setup(TestKind::PutBw, MAX_BUFFER + 1)));
        match recv(&mut s) {
            Some(Message::CaseFailed { reason, refused }) => {
                assert!(reason.contains("--max-buffer of 64 MiB"), "{reason}");
                assert!(
                    matches!(refused, Some(CaseRefusal::AboveMaxBuffer { limit, .. }) if limit == MAX_BUFFER),
                    "{refused:?}"
                );
            }
            other => panic!("expected case_failed, got {other:?}"),
        }
        let (rss_after, _, _) = footprint(server.pid());
        assert!(
            rss_after < rss_before + 32 * 1024,
            "it allocated: {rss_before} → {rss_after} KiB"
        );
        // The session goes on: a case within the bound is prepared.
        send(&mut s, &Message::Setup(setup(TestKind::PutBw, 4096)));
        assert!(matches!(recv(&mut s), Some(Message::Ready(_))));
        send(&mut s, &Message::Bye);
        closed_within(&mut s, AT_ONCE);
    });
}

#[test]
fn absurd_sizes_and_windows_are_cut() {
    survives(&[], |server| {
        let (mut s, _w) = admitted(server);
        let mut absurd = setup(TestKind::TagBw, 8);
        absurd.window = 1 << 30;
        send(&mut s, &Message::Setup(absurd));
        closed_within(&mut s, AT_ONCE);
        let (mut s, _w) = admitted(server);
        send_json(
            &mut s,
            r#"{"type":"setup","test":"put_bw","memory":{"initiator":"host","target":"host"},"size":18446744073709551615,"window":1,"seed":0}"#,
        );
        closed_within(&mut s, AT_ONCE);
    });
}

#[test]
fn absurd_iterations_are_cut() {
    survives(&[], |server| {
        let (mut s, _w) = admitted(server);
        send(&mut s, &Message::Setup(setup(TestKind::TagBw, 8)));
        assert!(matches!(recv(&mut s), Some(Message::Ready(_))));
        send_json(
            &mut s,
            r#"{"type":"phase","kind":"measure","iterations":0,"timeout_s":5}"#,
        );
        closed_within(&mut s, AT_ONCE);
    });
}

#[test]
fn negative_or_nan_timeouts_are_cut() {
    survives(&[], |server| {
        for timeout in ["-1", "null", "1e309"] {
            let (mut s, _w) = admitted(server);
            send(&mut s, &Message::Setup(setup(TestKind::TagBw, 8)));
            assert!(matches!(recv(&mut s), Some(Message::Ready(_))));
            let json = format!(r#"{{"type":"phase","kind":"measure","iterations":4,"timeout_s":{timeout}}}"#);
            send_json(&mut s, &json);
            closed_within(&mut s, AT_ONCE);
        }
    });
}

#[test]
fn a_second_concurrent_client_is_told_busy_at_once() {
    survives(&[], |server| {
        let (_first, _w) = admitted(server);
        let started = Instant::now();
        let mut second = raw(server);
        expect_denied(&mut second, DenyCause::Busy);
        assert!(started.elapsed() < AT_ONCE, "busy took {:?}", started.elapsed());
        // The real client, too, says why in one line (exit 2).
        let out = engine_support::connect(&server.addr, &["--tests", "tag_bw"], &[("IC_BENCH_TOKEN", TOKEN)]);
        assert_eq!(out.code, 2, "{}", out.stderr);
        assert!(out.error_line().contains("busy with another client"), "{}", out.stderr);
    });
}

#[test]
fn a_reconnect_flood_is_rate_limited() {
    survives(&[], |server| {
        let started = Instant::now();
        let mut limited = 0;
        for _ in 0..200 {
            let mut s = raw(server);
            // Admitted ones get a challenge (and are dropped); during those, others are "busy".
            if let Some(Message::Denied {
                cause: DenyCause::RateLimited,
                ..
            }) = recv(&mut s)
            {
                limited += 1;
            }
        }
        let allowed = 20.0 + 10.0 * started.elapsed().as_secs_f64();
        assert!(
            f64::from(200 - limited) <= allowed + 1.0,
            "{limited} of 200 refused for the rate; at most {allowed:.0} may pass"
        );
        // The bucket refills at 10 per second.
        std::thread::sleep(Duration::from_millis(1500));
    });
}

#[test]
fn a_disconnect_right_after_the_hello_is_survived() {
    survives(&[], |server| {
        let (s, w) = admitted(server);
        drop(s);
        drop(w);
    });
}

#[test]
fn a_disconnect_mid_setup_is_survived() {
    survives(&[], |server| {
        let (mut s, _w) = admitted(server);
        let f = icb_engine::wire::encode(&Message::Setup(setup(TestKind::PutBw, 1 << 20))).unwrap();
        s.write_all(&f[..f.len() / 2]).unwrap();
        drop(s);
    });
}

#[test]
fn a_disconnect_mid_phase_is_survived() {
    survives(&[], |server| {
        let (mut s, _w) = admitted(server);
        send(&mut s, &Message::Setup(setup(TestKind::TagBw, 4096)));
        assert!(matches!(recv(&mut s), Some(Message::Ready(_))));
        let phase = Message::Phase {
            kind: PhaseKind::Measure,
            iterations: 1000,
            timeout_s: 30.0,
            window: None,
        };
        send(&mut s, &phase);
        assert!(matches!(recv(&mut s), Some(Message::PhaseReady)));
        // The server waits for 1000 messages that never come; the client goes away.
        drop(s);
    });
}

#[test]
fn a_session_past_max_session_is_ended() {
    survives(&["--max-session", "5s"], |server| {
        let (mut s, _w) = admitted(server);
        let started = Instant::now();
        match recv(&mut s) {
            Some(Message::Error { message }) => assert!(message.contains("--max-session"), "{message}"),
            other => panic!("expected the session limit, got {other:?}"),
        }
        closed_within(&mut s, AT_ONCE);
        let took = started.elapsed();
        assert!(took < Duration::from_secs(8), "ended after {took:?}");
    });
}

#[test]
fn a_garbage_worker_address_ends_only_that_session() {
    survives(&[], |server| {
        let mut s = raw(server);
        let nonce = challenge(&mut s);
        let garbage: Vec<u8> = (0..200u32).map(|i| (i * 37 + 11) as u8).collect();
        send(
            &mut s,
            &Message::Hello(Box::new(proven(hello(garbage), &token(), &nonce))),
        );
        // Admitted (the proof is right), then the endpoint cannot be made: an error, the end.
        // (UCX 1.22 aborted the server on exactly this address before it was checked.)
        let mut error = None;
        while let Some(m) = recv(&mut s) {
            if let Message::Error { message } = m {
                error = Some(message);
            }
        }
        let error = error.expect("the server said why it gave up");
        assert!(error.contains("worker address"), "{error}");
        // Garbage behind a plausible header: UCX's own parser refuses it with an error.
        let mut s = raw(server);
        let nonce = challenge(&mut s);
        let mut plausible: Vec<u8> = (0..150u32).map(|i| (i * 73 + 5) as u8).collect();
        plausible[0] = 0x20;
        send(
            &mut s,
            &Message::Hello(Box::new(proven(hello(plausible), &token(), &nonce))),
        );
        let mut said = false;
        while let Some(m) = recv(&mut s) {
            said |= matches!(m, Message::Error { .. });
        }
        assert!(said, "the server said why it gave up");
    });
}

/// Not an attack: what `serve` says about running without a token (one warning line on
/// loopback; beyond loopback a one-line refusal naming --token-file, unless explicitly allowed).
#[test]
fn serve_without_a_token_warns_on_loopback_and_refuses_beyond_it() {
    let refused = engine_support::run(
        engine_support::command(&["serve", "--listen", "0.0.0.0:0", "--once"], &[]),
        Duration::from_secs(30),
    );
    assert_eq!(refused.code, 2, "{}", refused.stderr);
    let line = refused.error_line();
    assert!(
        line.contains("--token-file") && line.contains("--insecure-no-token"),
        "{line}"
    );
    let server = engine_support::Server::start_with(&["--once", "--idle-timeout", "30s"], &[]);
    let out = engine_support::connect(&server.addr, engine_support::FAST, &[]);
    assert_eq!(out.code, 0, "{}", out.stderr);
    let (code, stderr) = server.wait(Duration::from_secs(20));
    assert_eq!(code, 0, "{stderr}");
    let warnings: Vec<&str> = stderr.lines().filter(|l| l.contains("without a token")).collect();
    assert_eq!(warnings.len(), 1, "{stderr}");
    // And a client holding a token refuses that server: it cannot prove it is the right one.
    let server = engine_support::Server::start_with(&["--once", "--idle-timeout", "30s"], &[]);
    let out = engine_support::connect(&server.addr, engine_support::FAST, &[("IC_BENCH_TOKEN", TOKEN)]);
    assert_eq!(out.code, 2, "{}", out.stderr);
    assert!(out.error_line().contains("runs without a token"), "{}", out.stderr);
}

/// The NIXL engine's hello carries NIXL agent metadata where the UCX engine's has a worker
/// address: garbage there ends only that session (NIXL refuses it with an error), and the next
/// client, a real NIXL one, is served.
#[test]
fn garbage_nixl_metadata_ends_only_that_session() {
    let server = start(&["--engine", "nixl"]);
    let nixl_client = || {
        let out = engine_support::connect(
            &server.addr,
            &[
                "--engine",
                "nixl",
                "--tests",
                "put_bw",
                "--sizes",
                "16KiB",
                "--memory",
                "host-host",
                "--min-host-bw",
                "0.001",
                "--min-time",
                "0.02",
                "--max-time",
                "0.3",
            ],
            &[("IC_BENCH_TOKEN", TOKEN)],
        );
        assert_eq!(out.code, 0, "a NIXL client failed: {}", out.stderr);
    };
    nixl_client();
    let before = footprint(server.pid());
    for garbage in [
        (0..200u32).map(|i| (i * 37 + 11) as u8).collect::<Vec<u8>>(),
        vec![0x20; 150],
    ] {
        let mut s = raw(&server);
        let nonce = challenge(&mut s);
        let mut h = hello(garbage);
        h.engine = Some("nixl".into());
        send(&mut s, &Message::Hello(Box::new(proven(h, &token(), &nonce))));
        let mut error = None;
        while let Some(m) = recv(&mut s) {
            if let Message::Error { message } = m {
                error = Some(message);
            }
        }
        let error = error.expect("the server said why it gave up");
        assert!(error.contains("NIXL metadata"), "{error}");
    }
    // The attacks themselves leave nothing behind. (A real NIXL-engine client does: the NIXL
    // server grows ~18 MiB resident per served client on NIXL 1.5.1, attacks or not, measured
    // for issue 22; so the footprint is compared before the next client is served.)
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
    assert!(after.0 <= before.0 + 2 * 1024, "memory grew: {before:?} → {after:?}");
    nixl_client();
}
