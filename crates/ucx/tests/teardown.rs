//! Teardown order with a peer still reaching our memory (issue 17, blocker 2).
//!
//! Over transports without native RMA (tcp), a peer's GET is emulated in software: the target's
//! worker packs each reply from the registered memory when it gets to send it, possibly long
//! after the request arrived (the replies queue behind a slow link). A `serve` whose client timed
//! out used to unmap and free the case's buffer and *then* close the endpoint, whose flush packed
//! the queued replies from freed memory (SIGSEGV in `ucp_rma_sw_pack_get_reply`). The ucx crate
//! now keeps memory whose rkey was handed out registered and allocated until every worker that
//! could still serve it is destroyed, so no drop order of the wrapper's objects can do that.
#![allow(unsafe_code)] // TestBuf implements the unsafe Region trait (tests/common)

use crate::common;

use common::*;
use std::time::{Duration, Instant};
use ucx::{ErrorMode, OpOptions, Rma};

const SIZE: usize = 4 << 20;
const WINDOW: usize = 32;

/// Lets the GET requests reach the target, then progresses only the target: the initiator reads
/// nothing, so its socket fills and the remaining replies queue on the target.
fn queue_replies(p: &Pair) {
    for _ in 0..200 {
        p.a.progress();
        p.b.progress();
    }
    let until = Instant::now() + Duration::from_millis(300);
    while Instant::now() < until {
        p.b.progress();
    }
}

/// The target drops its map and buffer while a window of software GETs is queued on it, then
/// progresses and closes its endpoint (what `Runtime::reset` does). Every GET still completes
/// with the right bytes: the memory outlived its `MemMap`.
#[test]
fn queued_software_gets_outlive_the_dropped_map() {
    let p = pair(Some("tcp"), ErrorMode::None);
    let seed = 0x5a;
    let remote = TestBuf::patterned(SIZE, seed);
    let map = p.ctx_b.mem_map(&remote).unwrap();
    let rkey = p.ab.unpack_rkey(&map.pack_rkey().unwrap()).unwrap();
    let address = map.address();
    let mut locals: Vec<_> = (0..WINDOW).map(|_| TestBuf::new(SIZE)).collect();
    let gets: Vec<_> = locals
        .iter()
        .map(|local| {
            p.a.rma(Rma::Get, &p.ab, local, 0..SIZE, address, &rkey, OpOptions::default())
                .unwrap()
        })
        .collect();
    queue_replies(&p);
    assert!(
        gets.iter().any(|g| !p.a.is_done(*g)),
        "the window finished before the map was dropped: the test needs queued replies"
    );
    // The target forgets the case: map and buffer go, as a server's reset drops its case.
    drop(map);
    drop(remote);
    let ops: Vec<_> = gets.iter().map(|g| (&p.a, *g)).collect();
    drive(&p, &ops);
    for g in &gets {
        assert_eq!(p.a.wait(*g, deadline()).unwrap().length, SIZE);
    }
    drop(rkey);
    for local in &mut locals {
        assert_pattern(local, SIZE, seed);
    }
    // Teardown with both workers alive: the kept registration goes with the target's worker.
    assert_eq!(p.ctx_b.retired_maps(), 1, "the dropped, exposed map is kept");
    let (_ctx_a, ctx_b) = close_pair(p);
    assert_eq!(ctx_b.retired_maps(), 0, "released once the worker is destroyed");
}

/// The target drops its map while replies are queued and closes its endpoint at once, with the
/// initiator gone quiet (a client that timed out): the close's flush must not pack from freed
/// memory. Before the fix this test died with SIGSEGV. Then the initiator, its peer gone,
/// tears down too.
#[test]
fn closing_the_endpoint_after_dropping_an_exposed_map_is_safe() {
    let p = pair(Some("tcp"), ErrorMode::None);
    let remote = TestBuf::patterned(SIZE, 7);
    let map = p.ctx_b.mem_map(&remote).unwrap();
    let rkey = p.ab.unpack_rkey(&map.pack_rkey().unwrap()).unwrap();
    let locals: Vec<_> = (0..WINDOW).map(|_| TestBuf::new(SIZE)).collect();
    for local in &locals {
        p.a.rma(
            Rma::Get,
            &p.ab,
            local,
            0..SIZE,
            map.address(),
            &rkey,
            OpOptions::default(),
        )
        .unwrap();
    }
    queue_replies(&p);
    drop(map);
    drop(remote);
    let Pair {
        ab,
        ba,
        a,
        b,
        ctx_a,
        ctx_b,
    } = p;
    // The target's teardown, the initiator silent: the close may time out, but must not crash.
    let target_closed = ba.close(Instant::now() + Duration::from_secs(1));
    drop(b);
    // A failed close leaves a worker UCX cannot destroy safely (its purge of the endpoint's
    // queue freed a garbage pointer in 1 run of ~15 under load): it is kept instead.
    assert_eq!(ctx_b.kept_workers(), usize::from(target_closed.is_err()));
    drop(ctx_b);
    drop(rkey);
    // The initiator, its peer now gone with GETs unanswered: the close fails (a timeout, or the
    // endpoint found disconnected), and the worker is kept too.
    let closed = ab.close(Instant::now() + Duration::from_secs(1));
    assert!(closed.is_err(), "the peer is gone, yet the close succeeded");
    assert_eq!(
        ctx_a.kept_workers(),
        1,
        "a worker whose close failed is kept, not destroyed"
    );
    drop(a);
}

/// A map whose rkey was never packed cannot be reached by a peer: it is unmapped at once.
#[test]
fn a_map_never_exposed_is_released_at_once() {
    let p = pair(Some("tcp"), ErrorMode::None);
    let buf = TestBuf::new(4096);
    let map = p.ctx_b.mem_map(&buf).unwrap();
    drop(map);
    assert_eq!(p.ctx_b.retired_maps(), 0);
    let exposed = p.ctx_b.mem_map(&buf).unwrap();
    exposed.pack_rkey().unwrap();
    drop(exposed);
    assert_eq!(p.ctx_b.retired_maps(), 1);
}
