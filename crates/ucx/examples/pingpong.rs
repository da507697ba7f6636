//! Informal per-operation overhead check: two threads (one worker each, like two processes)
//! run an 8-byte tag ping-pong and a windowed 4 MiB tag stream; compare with
//! `ucx_perftest -t tag_lat` / `-t tag_bw` on the same machine. Not a benchmark of record.
//!
//! `cargo run --release -p ucx --example pingpong [TLS]`
#![allow(unsafe_code)] // a host buffer implements the unsafe Region trait

use std::rc::Rc;
use std::sync::mpsc;
use std::time::{Duration, Instant};
use ucx::{ErrorMode, MemoryKind, OpOptions, Region, Ucx};

struct Buf(Vec<u8>, *mut u8);
// SAFETY: the Vec is never reallocated and Rust never touches its bytes after construction.
unsafe impl Region for Buf {
    fn as_ptr(&self) -> *mut u8 {
        self.1
    }
    fn len(&self) -> usize {
        self.0.len()
    }
    fn memory_type(&self) -> MemoryKind {
        MemoryKind::Host
    }
}
fn buf(len: usize) -> Rc<Buf> {
    let mut v = vec![1u8; len];
    let p = v.as_mut_ptr();
    Rc::new(Buf(v, p))
}

const LAT_ITERS: usize = 200_000;
const BW_ITERS: usize = 2_000;
const WINDOW: usize = 32;
const BW_SIZE: usize = 4 << 20;

fn side(ucx: Ucx, tls: Option<String>, server: bool, tx: mpsc::Sender<Vec<u8>>, rx: mpsc::Receiver<Vec<u8>>) {
    let mut b = ucx.context();
    if let Some(t) = &tls {
        b = b.config("TLS", t);
    }
    let ctx = b.build().unwrap();
    let w = ctx.worker().unwrap();
    tx.send(w.address().unwrap()).unwrap();
    let ep = w.connect(&rx.recv().unwrap(), ErrorMode::None).unwrap();
    let deadline = || Instant::now() + Duration::from_secs(30);
    let small = buf(8);
    let small_r = buf(8);
    // Latency: ping-pong, server echoes.
    let start = Instant::now();
    let mut samples = Vec::with_capacity(LAT_ITERS);
    for _ in 0..LAT_ITERS {
        let t0 = Instant::now();
        if server {
            let r = w.tag_recv(&small_r, 0..8, 1, u64::MAX, OpOptions::default()).unwrap();
            w.wait(r, deadline()).unwrap();
            let s = w.tag_send(&ep, &small, 0..8, 2, OpOptions::default()).unwrap();
            w.wait(s, deadline()).unwrap();
        } else {
            let r = w.tag_recv(&small_r, 0..8, 2, u64::MAX, OpOptions::default()).unwrap();
            let s = w.tag_send(&ep, &small, 0..8, 1, OpOptions::default()).unwrap();
            w.wait(s, deadline()).unwrap();
            w.wait(r, deadline()).unwrap();
        }
        samples.push(t0.elapsed());
    }
    if !server {
        let us = start.elapsed().as_secs_f64() * 1e6 / LAT_ITERS as f64 / 2.0;
        samples.sort();
        let p50 = samples[samples.len() / 2].as_secs_f64() * 1e6 / 2.0;
        println!("tag_lat 8 B: p50 {p50:.3} us, average {us:.3} us (half round trip)");
    }
    // Bandwidth: client streams windows of 4 MiB sends; server keeps a window of receives.
    let big = buf(BW_SIZE);
    let start = Instant::now();
    let mut done = 0;
    while done < BW_ITERS {
        let n = WINDOW.min(BW_ITERS - done);
        for _ in 0..n {
            if server {
                w.tag_recv(&big, 0..BW_SIZE, 3, u64::MAX, OpOptions::default()).unwrap();
            } else {
                w.tag_send(&ep, &big, 0..BW_SIZE, 3, OpOptions::default()).unwrap();
            }
        }
        w.wait_all(deadline()).unwrap();
        done += n;
    }
    if !server {
        let mib_s = (BW_ITERS * BW_SIZE) as f64 / start.elapsed().as_secs_f64() / (1 << 20) as f64;
        println!("tag_bw 4 MiB window {WINDOW}: {mib_s:.0} MiB/s");
    }
    // Keep the peer's endpoint alive until both are done.
    tx.send(vec![]).unwrap();
    let _ = rx.recv();
}

fn main() {
    let tls = std::env::args().nth(1);
    let ucx = Ucx::load(None).unwrap();
    let (tx_a, rx_b) = mpsc::channel();
    let (tx_b, rx_a) = mpsc::channel();
    let (u2, t2) = (ucx.clone(), tls.clone());
    let server = std::thread::spawn(move || side(u2, t2, true, tx_b, rx_b));
    side(ucx, tls, false, tx_a, rx_a);
    server.join().unwrap();
}
