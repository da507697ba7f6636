//! Shared helpers for the ucx integration tests: a host buffer and two connected workers.

#![allow(dead_code)]

use std::rc::Rc;
use std::sync::Mutex;
use std::time::{Duration, Instant};
use ucx::{Context, Endpoint, ErrorMode, MemoryKind, Op, Region, Ucx, Worker};

/// A host buffer for tests (icb-memory has the real one; it depends on this crate).
pub struct TestBuf {
    bytes: Vec<u8>,
    ptr: *mut u8,
}

impl TestBuf {
    pub fn new(len: usize) -> Rc<TestBuf> {
        let mut bytes = vec![0u8; len];
        let ptr = bytes.as_mut_ptr();
        Rc::new(TestBuf { bytes, ptr })
    }

    pub fn patterned(len: usize, seed: u8) -> Rc<TestBuf> {
        let mut b = TestBuf::new(len);
        Rc::get_mut(&mut b).unwrap().fill(seed);
        b
    }

    pub fn fill(&mut self, seed: u8) {
        for (i, b) in self.bytes.iter_mut().enumerate() {
            *b = pattern(i, seed);
        }
    }

    pub fn bytes(&mut self) -> &[u8] {
        &self.bytes
    }
}

pub fn pattern(i: usize, seed: u8) -> u8 {
    (i as u8).wrapping_mul(31).wrapping_add(seed) ^ ((i >> 8) as u8)
}

pub fn assert_pattern(buf: &mut Rc<TestBuf>, len: usize, seed: u8) {
    let b = Rc::get_mut(buf).expect("no operation or map holds the buffer any more");
    let bytes = b.bytes();
    for (i, &v) in bytes[..len].iter().enumerate() {
        assert_eq!(v, pattern(i, seed), "byte {i} of {len}");
    }
}

// SAFETY: `ptr` points into `bytes`, which is never reallocated; the memory is only touched by
// Rust through `&mut self` methods (fill/bytes), per the Region contract.
unsafe impl Region for TestBuf {
    fn as_ptr(&self) -> *mut u8 {
        self.ptr
    }
    fn len(&self) -> usize {
        self.bytes.len()
    }
    fn memory_type(&self) -> MemoryKind {
        MemoryKind::Host
    }
}

/// UCX's global configuration parser is not meant to be raced by parallel test threads.
static INIT: Mutex<()> = Mutex::new(());

pub fn ucx() -> Ucx {
    Ucx::load(None).expect("UCX from scripts/setup (IC_BENCH_UCX_LIB via .cargo/config.toml)")
}

pub fn context(ucx: &Ucx, tls: Option<&str>) -> Context {
    let _g = INIT.lock().unwrap_or_else(|e| e.into_inner());
    let mut b = ucx.context();
    if let Some(t) = tls {
        b = b.config("TLS", t);
    }
    b.build().unwrap()
}

/// Two workers (each in its own context, like two processes) with endpoints both ways.
pub struct Pair {
    pub ctx_a: Context,
    pub ctx_b: Context,
    pub a: Worker,
    pub b: Worker,
    pub ab: Endpoint,
    pub ba: Endpoint,
}

pub fn pair(tls: Option<&str>, mode: ErrorMode) -> Pair {
    let u = ucx();
    let ctx_a = context(&u, tls);
    let ctx_b = context(&u, tls);
    let a = ctx_a.worker().unwrap();
    let b = ctx_b.worker().unwrap();
    let ab = a.connect(&b.address().unwrap(), mode).unwrap();
    let ba = b.connect(&a.address().unwrap(), mode).unwrap();
    Pair {
        ctx_a,
        ctx_b,
        a,
        b,
        ab,
        ba,
    }
}

/// Closes both endpoints, each while the other side progresses (a flush over tcp waits for
/// the peer), then destroys both workers; returns the contexts. A close that failed would keep
/// its worker (and the memory its peer reached) for the life of the process.
pub fn close_pair(p: Pair) -> (Context, Context) {
    let Pair {
        ctx_a,
        ctx_b,
        a,
        b,
        ab,
        ba,
    } = p;
    ab.close_while(deadline(), || {
        b.progress();
    })
    .unwrap();
    ba.close_while(deadline(), || {
        a.progress();
    })
    .unwrap();
    drop((a, b));
    assert_eq!(ctx_a.kept_workers() + ctx_b.kept_workers(), 0);
    (ctx_a, ctx_b)
}

pub fn deadline() -> Instant {
    Instant::now() + Duration::from_secs(10)
}

/// Progresses both workers until every op is done (the two sides share this one thread).
pub fn drive(p: &Pair, ops: &[(&Worker, Op)]) {
    let end = deadline();
    while !ops.iter().all(|(w, op)| w.is_done(*op)) {
        p.a.progress();
        p.b.progress();
        assert!(Instant::now() < end, "operations did not complete within 10 s");
    }
}
