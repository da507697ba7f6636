//! Prepared tag operations (`Worker::prepare_tag_send` / `prepare_tag_recv` + `Worker::post`):
//! posted many times with verified payloads, refused where the unprepared calls are refused,
//! and carrying their options (the stream hint) to UCX's protocol selection.
#![allow(unsafe_code)] // TestBuf implements the unsafe Region trait (tests/common)

use crate::common;

use common::*;
use ucx::{Error, ErrorMode, OpOptions, Region};

/// The bytes of `buf` while prepared operations still hold it (none is pending).
fn peek(buf: &TestBuf, len: usize) -> Vec<u8> {
    // SAFETY: no UCX operation on `buf` is pending (every one was waited for), and `len` is
    // within the buffer.
    unsafe { std::slice::from_raw_parts(buf.as_ptr(), len) }.to_vec()
}

#[test]
fn a_prepared_pair_posts_many_times_and_every_payload_lands() {
    let p = pair(None, ErrorMode::None);
    for (n, &size) in [8usize, 64 << 10, 1 << 20].iter().enumerate() {
        let tag = 0x2000 + n as u64;
        // Two sources with different patterns, alternated: a round that delivered nothing would
        // leave the previous round's pattern, and fail.
        let seeds = [n as u8 * 2 + 1, n as u8 * 2 + 2];
        let srcs = seeds.map(|seed| TestBuf::patterned(size, seed));
        let dst = TestBuf::new(size);
        let sends = [0, 1].map(|i| {
            p.a.prepare_tag_send(&p.ab, &srcs[i], 0..size, tag, OpOptions::default())
                .unwrap()
        });
        let recv =
            p.b.prepare_tag_recv(&dst, 0..size, tag, u64::MAX, OpOptions::default())
                .unwrap();
        for round in 0..20 {
            let r = p.b.post(&recv).unwrap();
            let s = p.a.post(&sends[round % 2]).unwrap();
            drive(&p, &[(&p.a, s), (&p.b, r)]);
            assert_eq!(p.b.wait(r, deadline()).unwrap().length, size);
            p.a.wait(s, deadline()).unwrap();
            assert_eq!(p.a.pending() + p.b.pending(), 0);
            let got = peek(&dst, size);
            let seed = seeds[round % 2];
            assert!(
                got.iter().enumerate().all(|(i, &v)| v == pattern(i, seed)),
                "round {round} of {size} B: the payload did not land"
            );
        }
    }
}

#[test]
fn prepared_operations_are_checked_once_and_refused_where_they_do_not_belong() {
    let p = pair(None, ErrorMode::None);
    let buf = TestBuf::new(16);
    // The range is checked when the operation is prepared.
    let err =
        p.a.prepare_tag_send(&p.ab, &buf, 0..17, 1, OpOptions::default())
            .unwrap_err();
    assert!(matches!(err, Error::Invalid { .. }), "{err}");
    let err =
        p.a.prepare_tag_recv(&buf, 8..24, 1, u64::MAX, OpOptions::default())
            .unwrap_err();
    assert!(matches!(err, Error::Invalid { .. }), "{err}");
    // An endpoint of another worker.
    let err =
        p.b.prepare_tag_send(&p.ab, &buf, 0..8, 1, OpOptions::default())
            .unwrap_err();
    assert!(matches!(err, Error::Invalid { .. }), "{err}");
    // Posted on another worker than the one that prepared it.
    let recv =
        p.a.prepare_tag_recv(&buf, 0..8, 1, u64::MAX, OpOptions::default())
            .unwrap();
    let err = p.b.post(&recv).unwrap_err();
    assert!(matches!(err, Error::Invalid { .. }), "{err}");
    assert_eq!(p.a.pending() + p.b.pending(), 0, "a refused post leaves no operation");
}

#[test]
fn a_prepared_send_on_a_closed_endpoint_is_an_error_not_a_dangling_handle() {
    let p = pair(None, ErrorMode::None);
    let buf = TestBuf::patterned(64, 3);
    let ab = p.a.connect(&p.b.address().unwrap(), ErrorMode::None).unwrap();
    let send = p.a.prepare_tag_send(&ab, &buf, 0..64, 7, OpOptions::default()).unwrap();
    ab.close(deadline()).unwrap();
    let err = p.a.post(&send).unwrap_err();
    assert!(matches!(err, Error::Invalid { .. }), "{err}");
    assert_eq!(p.a.pending(), 0);
}

#[test]
fn the_stream_hint_reaches_ucx_protocol_selection() {
    let p = pair(None, ErrorMode::None);
    let size = 4 << 20;
    let src = TestBuf::patterned(size, 5);
    let dst = TestBuf::new(size);
    let info = |opts: OpOptions| {
        // No receive posted yet: the rendezvous send stays pending, so its request can be queried.
        let s = p.a.tag_send(&p.ab, &src, 0..size, 11, opts).unwrap();
        let text =
            p.a.info_string(s)
                .unwrap()
                .expect("a pending 4 MiB send has an info string");
        let r = p.b.tag_recv(&dst, 0..size, 11, u64::MAX, OpOptions::default()).unwrap();
        drive(&p, &[(&p.a, s), (&p.b, r)]);
        p.a.wait_all(deadline()).unwrap();
        p.b.wait_all(deadline()).unwrap();
        text
    };
    let single = info(OpOptions::QUERYABLE);
    let stream = info(OpOptions::STREAM.queryable());
    eprintln!("single: {single}\nstream: {stream}");
    // UCX names the selection table in the request's description: "(multi)" for streams.
    assert!(stream.contains("multi"), "{stream}");
    assert!(!single.contains("multi"), "{single}");
}

/// `Context::register`: a region registered where UCX can. Operations on it pass the
/// registration (a registration of another context is refused, which only a passed one can be),
/// and a region UCX will not register comes back unregistered with the reason.
#[test]
fn registered_regions_pass_their_registration_and_say_why_when_there_is_none() {
    let p = pair(None, ErrorMode::None);
    let size = 256 << 10;
    let (src, refused) = p.ctx_a.register(&TestBuf::patterned(size, 31));
    assert!(refused.is_none(), "{refused:?}");
    assert!(src.map().is_some());
    let src = std::rc::Rc::new(src);
    let dst = TestBuf::new(size);
    let (dst_reg, refused) = p.ctx_b.register(&dst);
    assert!(refused.is_none(), "{refused:?}");
    let dst_reg = std::rc::Rc::new(dst_reg);
    let send =
        p.a.prepare_tag_send(&p.ab, &src, 0..size, 9, OpOptions::STREAM)
            .unwrap();
    let recv =
        p.b.prepare_tag_recv(&dst_reg, 0..size, 9, u64::MAX, OpOptions::STREAM)
            .unwrap();
    let r = p.b.post(&recv).unwrap();
    let s = p.a.post(&send).unwrap();
    drive(&p, &[(&p.a, s), (&p.b, r)]);
    assert_eq!(p.b.wait(r, deadline()).unwrap().length, size);
    p.a.wait(s, deadline()).unwrap();
    let got = peek(&dst, size);
    assert!(
        got.iter().enumerate().all(|(i, &v)| v == pattern(i, 31)),
        "the payload did not land"
    );
    // B's registration on A's worker: refused, so it is really passed with the operation.
    let err =
        p.a.prepare_tag_send(&p.ab, &dst_reg, 0..8, 9, OpOptions::default())
            .unwrap_err();
    assert!(matches!(err, Error::Invalid { .. }), "{err}");
    drop((send, recv));
    std::rc::Rc::try_unwrap(dst_reg)
        .ok()
        .expect("no operation holds the region")
        .unmap_now();

    let (empty, refused) = p.ctx_a.register(&TestBuf::new(0));
    assert!(empty.map().is_none());
    assert!(refused.is_some(), "an empty region cannot be registered");
    assert!(p.ctx_a.register_required(&TestBuf::new(0)).is_err());
}
