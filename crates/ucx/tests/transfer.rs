//! Real UCX transfers between two workers of this process: tag, put and get with verified
//! payloads, for UCX's default transports and for TLS=tcp set through the context config.
#![allow(unsafe_code)] // TestBuf implements the unsafe Region trait (tests/common)

use crate::common;

use common::*;
use std::time::{Duration, Instant};
use ucx::{Error, ErrorMode, OpOptions, Rma};

const SIZES: [usize; 3] = [8, 64 << 10, 4 << 20];

fn tag_roundtrip(tls: Option<&str>) {
    let p = pair(tls, ErrorMode::None);
    for (n, &size) in SIZES.iter().enumerate() {
        let seed = n as u8 + 1;
        let src = TestBuf::patterned(size, seed);
        let mut dst = TestBuf::new(size);
        let tag = 0x1000 + n as u64;
        let r =
            p.b.tag_recv(&dst, 0..size, tag, u64::MAX, OpOptions::default())
                .unwrap();
        let s = p.a.tag_send(&p.ab, &src, 0..size, tag, OpOptions::default()).unwrap();
        drive(&p, &[(&p.a, s), (&p.b, r)]);
        assert_eq!(p.b.wait(r, deadline()).unwrap().length, size);
        p.a.wait(s, deadline()).unwrap();
        assert_eq!(p.a.pending() + p.b.pending(), 0);
        assert_pattern(&mut dst, size, seed);
    }
}

fn rma_roundtrip(tls: Option<&str>) {
    let p = pair(tls, ErrorMode::None);
    // Put targets are read back once B's worker is gone: until then a peer holding the rkey
    // could still write them, so the ucx crate keeps them (see tests/teardown.rs).
    let mut put_targets = Vec::new();
    for (n, &size) in SIZES.iter().enumerate() {
        // put: A writes its pattern into B's mapped buffer.
        let seed = 0x40 + n as u8;
        let src = TestBuf::patterned(size, seed);
        let target = TestBuf::new(size);
        let map = p.ctx_b.mem_map(&target).unwrap();
        let rkey = p.ab.unpack_rkey(&map.pack_rkey().unwrap()).unwrap();
        let put =
            p.a.rma(
                Rma::Put,
                &p.ab,
                &src,
                0..size,
                map.address(),
                &rkey,
                OpOptions::default(),
            )
            .unwrap();
        let flush = p.a.flush(&p.ab, OpOptions::default()).unwrap();
        drive(&p, &[(&p.a, put), (&p.a, flush)]);
        p.a.wait_all(deadline()).unwrap();
        drop(rkey);
        drop(map);
        put_targets.push((target, size, seed));

        // get: A reads B's mapped pattern into its own buffer.
        let seed = 0x80 + n as u8;
        let remote = TestBuf::patterned(size, seed);
        let map = p.ctx_b.mem_map(&remote).unwrap();
        let rkey = p.ab.unpack_rkey(&map.pack_rkey().unwrap()).unwrap();
        let mut local = TestBuf::new(size);
        let get =
            p.a.rma(
                Rma::Get,
                &p.ab,
                &local,
                0..size,
                map.address(),
                &rkey,
                OpOptions::default(),
            )
            .unwrap();
        drive(&p, &[(&p.a, get)]);
        assert_eq!(p.a.wait(get, deadline()).unwrap().length, size);
        drop(rkey);
        assert_pattern(&mut local, size, seed);
    }
    close_pair(p);
    for (mut target, size, seed) in put_targets {
        assert_pattern(&mut target, size, seed);
    }
}

#[test]
fn tag_send_recv_default_transports() {
    tag_roundtrip(None);
}

#[test]
fn tag_send_recv_tcp() {
    tag_roundtrip(Some("tcp"));
}

#[test]
fn put_get_default_transports() {
    rma_roundtrip(None);
}

#[test]
fn put_get_tcp() {
    rma_roundtrip(Some("tcp"));
}

/// A window of sends completed by one wait_all: the bandwidth-test pattern.
#[test]
fn window_of_sends_completes_with_wait_all() {
    let p = pair(None, ErrorMode::None);
    let size = 64 << 10;
    let src = TestBuf::patterned(size, 7);
    let dsts: Vec<_> = (0..16).map(|_| TestBuf::new(size)).collect();
    let mut ops = Vec::new();
    for d in &dsts {
        ops.push((
            &p.b,
            p.b.tag_recv(d, 0..size, 5, u64::MAX, OpOptions::default()).unwrap(),
        ));
    }
    for _ in 0..16 {
        ops.push((
            &p.a,
            p.a.tag_send(&p.ab, &src, 0..size, 5, OpOptions::default()).unwrap(),
        ));
    }
    drive(&p, &ops);
    p.a.wait_all(deadline()).unwrap();
    p.b.wait_all(deadline()).unwrap();
    assert_eq!(p.a.pending() + p.b.pending(), 0);
    drop(ops);
    for mut d in dsts {
        assert_pattern(&mut d, size, 7);
    }
}

fn pending_info(tls: Option<&str>) -> (String, String) {
    let p = pair(tls, ErrorMode::None);
    let size = 4 << 20;
    let src = TestBuf::patterned(size, 3);
    let dst = TestBuf::new(size);
    // Send first, with no receive posted: a rendezvous send stays pending until the receiver
    // matches it, so the query sees a live request.
    let s = p.a.tag_send(&p.ab, &src, 0..size, 9, OpOptions::QUERYABLE).unwrap();
    assert!(!s.completed_immediately());
    let tag_info =
        p.a.info_string(s)
            .unwrap()
            .expect("a pending 4 MiB send has an info string");
    let r = p.b.tag_recv(&dst, 0..size, 9, u64::MAX, OpOptions::default()).unwrap();
    drive(&p, &[(&p.a, s), (&p.b, r)]);
    p.a.wait(s, deadline()).unwrap();
    assert_eq!(p.a.info_string(s).unwrap(), None, "a completed op has no info string");

    let target = TestBuf::new(size);
    let map = p.ctx_b.mem_map(&target).unwrap();
    let rkey = p.ab.unpack_rkey(&map.pack_rkey().unwrap()).unwrap();
    let put =
        p.a.rma(
            Rma::Put,
            &p.ab,
            &src,
            0..size,
            map.address(),
            &rkey,
            OpOptions::QUERYABLE,
        )
        .unwrap();
    let put_info = p.a.info_string(put).unwrap().unwrap_or_default();
    drive(&p, &[(&p.a, put)]);
    p.a.wait_all(deadline()).unwrap();
    (tag_info, put_info)
}

#[test]
fn info_string_of_pending_op_names_tcp() {
    let (tag, put) = pending_info(Some("tcp"));
    eprintln!("tcp tag: {tag}\ntcp put: {put}");
    assert!(tag.contains("tag_send") && tag.contains("tcp"), "{tag}");
    assert!(tag.contains("4194304"), "{tag}");
    // The put may finish inside the submit call on some transports; when UCX describes it, it is tcp.
    assert!(put.is_empty() || put.contains("tcp"), "{put}");
}

#[test]
fn info_string_of_pending_op_names_shared_memory() {
    let (tag, put) = pending_info(None);
    eprintln!("default tag: {tag}\ndefault put: {put}");
    assert!(tag.contains("tag_send"), "{tag}");
    assert!(
        ["cma", "sysv", "posix", "xpmem", "knem"]
            .iter()
            .any(|t| tag.contains(t)),
        "{tag}"
    );
    assert!(!tag.contains("tcp"), "{tag}");
}

#[test]
fn endpoint_transports_are_reported() {
    let p = pair(Some("tcp"), ErrorMode::None);
    assert!(p.a.max_info_string() > 0);
    let ucx = p.ctx_a.ucx();
    if !ucx.version().at_least(1, 14) {
        assert_eq!(p.ab.transports().unwrap(), None);
        return;
    }
    // Lanes are settled once wireup ran: one small exchange.
    let src = TestBuf::patterned(8, 1);
    let dst = TestBuf::new(8);
    let r = p.b.tag_recv(&dst, 0..8, 1, u64::MAX, OpOptions::default()).unwrap();
    let s = p.a.tag_send(&p.ab, &src, 0..8, 1, OpOptions::default()).unwrap();
    drive(&p, &[(&p.a, s), (&p.b, r)]);
    p.a.wait_all(deadline()).unwrap();
    p.b.wait_all(deadline()).unwrap();
    let lanes = p.ab.transports().unwrap().expect("UCX >= 1.14 reports transports");
    eprintln!("lanes: {lanes:?}");
    assert!(!lanes.is_empty());
    assert!(lanes.iter().all(|l| l.transport == "tcp"), "{lanes:?}");
    assert!(lanes.iter().all(|l| !l.device.is_empty()), "{lanes:?}");
}

#[test]
fn recv_without_sender_times_out_and_is_cancelled() {
    let p = pair(None, ErrorMode::None);
    let mut dst = TestBuf::new(64);
    let r = p.b.tag_recv(&dst, 0..64, 77, u64::MAX, OpOptions::default()).unwrap();
    let start = Instant::now();
    let err = p.b.wait(r, Instant::now() + Duration::from_millis(100)).unwrap_err();
    assert!(err.is_timeout(), "{err}");
    assert!(err.to_string().contains("tag_recv"), "{err}");
    assert!(start.elapsed() < Duration::from_secs(2));
    assert_eq!(p.b.pending(), 0);
    // The cancelled receive released the buffer: Rust may touch it again.
    assert!(std::rc::Rc::get_mut(&mut dst).is_some());
    // Waiting on it again is misuse, reported as such.
    assert!(matches!(p.b.wait(r, deadline()), Err(Error::Invalid { .. })));
}

#[test]
fn wait_all_times_out_with_the_op_named() {
    let p = pair(None, ErrorMode::None);
    let dst = TestBuf::new(64);
    p.b.tag_recv(&dst, 0..64, 78, u64::MAX, OpOptions::default()).unwrap();
    let err = p.b.wait_all(Instant::now() + Duration::from_millis(50)).unwrap_err();
    assert!(matches!(err, Error::Timeout { op: "tag_recv", .. }), "{err}");
    assert_eq!(p.b.pending(), 0);
    // The worker stays usable.
    let src = TestBuf::patterned(64, 2);
    let mut dst2 = TestBuf::new(64);
    let r = p.b.tag_recv(&dst2, 0..64, 79, u64::MAX, OpOptions::default()).unwrap();
    let s = p.a.tag_send(&p.ab, &src, 0..64, 79, OpOptions::default()).unwrap();
    drive(&p, &[(&p.a, s), (&p.b, r)]);
    p.b.wait_all(deadline()).unwrap();
    p.a.wait_all(deadline()).unwrap();
    assert_pattern(&mut dst2, 64, 2);
}

#[test]
fn truncated_receive_is_a_status_error() {
    let p = pair(None, ErrorMode::None);
    let src = TestBuf::patterned(128, 1);
    let dst = TestBuf::new(16);
    let r = p.b.tag_recv(&dst, 0..16, 4, u64::MAX, OpOptions::default()).unwrap();
    let s = p.a.tag_send(&p.ab, &src, 0..128, 4, OpOptions::default()).unwrap();
    drive(&p, &[(&p.a, s), (&p.b, r)]);
    let err = p.b.wait(r, deadline()).unwrap_err();
    assert!(err.status().is_some(), "{err}");
    assert!(err.to_string().contains("tag_recv"), "{err}");
    let _ = p.a.wait_all(deadline());
}

#[test]
fn bad_arguments_are_errors() {
    let p = pair(None, ErrorMode::None);
    let buf = TestBuf::new(16);
    let err = p.a.tag_send(&p.ab, &buf, 0..17, 1, OpOptions::default()).unwrap_err();
    assert!(matches!(err, Error::Invalid { .. }), "{err}");
    let err = p.b.tag_send(&p.ab, &buf, 0..8, 1, OpOptions::default()).unwrap_err();
    assert!(err.to_string().contains("another worker"), "{err}");
    assert!(p.a.connect(&[], ErrorMode::None).is_err());
    assert!(p.ab.unpack_rkey(&[]).is_err());
    assert_eq!(p.a.pending(), 0);
    let err = ucx().context().config("NO_SUCH_SETTING_XYZ", "1").build().unwrap_err();
    assert!(matches!(err, Error::Config { .. }), "{err}");
}

#[test]
fn peer_mode_endpoints_transfer_and_force_close() {
    let p = pair(Some("tcp"), ErrorMode::Peer);
    let src = TestBuf::patterned(4096, 9);
    let mut dst = TestBuf::new(4096);
    let r = p.b.tag_recv(&dst, 0..4096, 2, u64::MAX, OpOptions::default()).unwrap();
    let s = p.a.tag_send(&p.ab, &src, 0..4096, 2, OpOptions::default()).unwrap();
    drive(&p, &[(&p.a, s), (&p.b, r)]);
    p.a.wait_all(deadline()).unwrap();
    p.b.wait_all(deadline()).unwrap();
    assert_pattern(&mut dst, 4096, 9);
    assert!(p.ab.failure().is_none());
    let Pair { ab, ba, a, b, .. } = p;
    ab.close(deadline()).unwrap();
    ba.close(deadline()).unwrap();
    drop((a, b));
}

#[test]
fn dropping_a_worker_with_a_pending_receive_cancels_it() {
    let p = pair(None, ErrorMode::None);
    let mut dst = TestBuf::new(64);
    let _r = p.b.tag_recv(&dst, 0..64, 5, u64::MAX, OpOptions::default()).unwrap();
    assert!(
        std::rc::Rc::get_mut(&mut dst).is_none(),
        "the pending receive holds the buffer"
    );
    drop(p);
    assert!(
        std::rc::Rc::get_mut(&mut dst).is_some(),
        "dropping the worker released it"
    );
}

#[test]
fn version_and_library_are_reported() {
    let u = ucx();
    assert!(u.version().at_least(1, 14));
    assert!(u.library_path().exists());
    assert!(u.library_dir().join("libucs.so.0").exists() || u.library_dir().exists());
    let (major, minor, full) = ucx::Ucx::header_version();
    assert_eq!(major, 1);
    assert!(minor >= 14);
    assert!(full.starts_with(&format!("{major}.{minor}")), "{full}");
}

/// With peer error handling, a peer that went away turns a pending transfer into an error (or,
/// at worst, a timeout) well within the deadline — never a hang.
#[test]
fn dead_peer_in_peer_mode_is_an_error_not_a_hang() {
    let u = ucx();
    let ctx_a = context(&u, Some("tcp"));
    let a = ctx_a.worker().unwrap();
    let ab = {
        let ctx_b = context(&u, Some("tcp"));
        let b = ctx_b.worker().unwrap();
        let ab = a.connect(&b.address().unwrap(), ErrorMode::Peer).unwrap();
        let ba = b.connect(&a.address().unwrap(), ErrorMode::Peer).unwrap();
        // Wire the endpoints up with one exchange, then let B vanish.
        let src = TestBuf::patterned(8, 1);
        let dst = TestBuf::new(8);
        let r = b.tag_recv(&dst, 0..8, 1, u64::MAX, OpOptions::default()).unwrap();
        let s = a.tag_send(&ab, &src, 0..8, 1, OpOptions::default()).unwrap();
        let end = deadline();
        while !(a.is_done(s) && b.is_done(r)) {
            a.progress();
            b.progress();
            assert!(Instant::now() < end);
        }
        a.wait_all(end).unwrap();
        b.wait_all(end).unwrap();
        drop(ba);
        ab
    };
    let src = TestBuf::patterned(4 << 20, 2);
    let start = Instant::now();
    let result = a
        .tag_send(&ab, &src, 0..4 << 20, 2, OpOptions::default())
        .and_then(|s| a.wait(s, Instant::now() + Duration::from_secs(3)));
    eprintln!("dead peer: {:?} after {:?}", result.as_ref().err(), start.elapsed());
    assert!(result.is_err(), "a send to a vanished peer cannot succeed");
    assert!(start.elapsed() < Duration::from_secs(5));
    assert_eq!(a.pending(), 0);
    ab.close(deadline())
        .unwrap_or_else(|e| panic!("a forced close must not fail: {e}"));
}

#[test]
fn another_workers_op_is_refused() {
    let p = pair(None, ErrorMode::None);
    let dst = TestBuf::new(8);
    let r = p.b.tag_recv(&dst, 0..8, 1, u64::MAX, OpOptions::QUERYABLE).unwrap();
    assert!(matches!(p.a.wait(r, deadline()), Err(Error::Invalid { .. })));
    assert!(matches!(p.a.info_string(r), Err(Error::Invalid { .. })));
    assert!(!p.b.is_done(r));
}

/// The loaded library may be shared across threads (the engine loads it before spawning its
/// UCX thread); everything below it stays on the thread that made it.
#[test]
fn ucx_handle_is_send_and_sync() {
    fn send_sync<T: Send + Sync>(_: &T) {}
    send_sync(&ucx());
}

/// A memory map is itself a region: operations on it pass UCX the registration (memh).
#[test]
fn mapped_local_buffers_carry_their_registration() {
    let p = pair(None, ErrorMode::None);
    let size = 1 << 20;
    let src = std::rc::Rc::new(p.ctx_a.mem_map(&TestBuf::patterned(size, 21)).unwrap());
    let mut dst = TestBuf::new(size);
    let dst_map = std::rc::Rc::new(p.ctx_b.mem_map(&dst).unwrap());
    let r =
        p.b.tag_recv(&dst_map, 0..size, 6, u64::MAX, OpOptions::default())
            .unwrap();
    let s = p.a.tag_send(&p.ab, &src, 0..size, 6, OpOptions::default()).unwrap();
    drive(&p, &[(&p.a, s), (&p.b, r)]);
    assert_eq!(p.b.wait(r, deadline()).unwrap().length, size);
    p.a.wait(s, deadline()).unwrap();

    // get into a mapped local buffer from B's mapped region.
    let remote = p.ctx_b.mem_map(&TestBuf::patterned(size, 22)).unwrap();
    let rkey = p.ab.unpack_rkey(&remote.pack_rkey().unwrap()).unwrap();
    let mut local = TestBuf::new(size);
    let local_map = std::rc::Rc::new(p.ctx_a.mem_map(&local).unwrap());
    let g =
        p.a.rma(
            Rma::Get,
            &p.ab,
            &local_map,
            0..size,
            remote.address(),
            &rkey,
            OpOptions::default(),
        )
        .unwrap();
    drive(&p, &[(&p.a, g)]);
    p.a.wait_all(deadline()).unwrap();

    // A map of B's context cannot be used by A's worker.
    let err =
        p.a.tag_send(&p.ab, &dst_map, 0..8, 6, OpOptions::default())
            .unwrap_err();
    assert!(err.to_string().contains("another UCX context"), "{err}");

    drop((dst_map, local_map, rkey));
    assert_pattern(&mut dst, size, 21);
    assert_pattern(&mut local, size, 22);
}
