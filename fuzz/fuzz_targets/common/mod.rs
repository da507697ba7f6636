//! Helpers shared by the targets: JSON equality that tolerates the last bit of a float (serde_json
//! without `float_roundtrip` may parse its own output one ULP off), and a counting allocator.
#![allow(dead_code)]

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

/// Equal JSON values, numbers compared as f64 within a relative 1e-12.
pub fn same_json(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    use serde_json::Value::*;
    match (a, b) {
        (Number(x), Number(y)) => match (x.as_f64(), y.as_f64()) {
            (Some(x), Some(y)) => x == y || (x - y).abs() <= 1e-12 * x.abs().max(y.abs()),
            _ => x == y,
        },
        (Array(x), Array(y)) => x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same_json(x, y)),
        (Object(x), Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same_json(v, w)))
        }
        _ => a == b,
    }
}

/// Serializes both and asserts they are the same JSON (see [`same_json`]).
pub fn assert_same<T: serde::Serialize>(what: &str, a: &T, b: &T) {
    let (x, y) = (serde_json::to_value(a).unwrap(), serde_json::to_value(b).unwrap());
    assert!(
        same_json(&x, &y),
        "{what}: parse -> serialize -> parse changed the value:\n{x}\n{y}"
    );
}

/// The system allocator, counting the largest single allocation since [`Counting::reset`].
pub struct Counting;

static LARGEST: AtomicUsize = AtomicUsize::new(0);

impl Counting {
    pub fn reset() {
        LARGEST.store(0, Ordering::Relaxed);
    }
    pub fn largest() -> usize {
        LARGEST.load(Ordering::Relaxed)
    }
}

// SAFETY: forwards every call to `System` unchanged; it only records sizes.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LARGEST.fetch_max(l.size(), Ordering::Relaxed);
        // SAFETY: the caller's contract is System's.
        unsafe { System.alloc(l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        LARGEST.fetch_max(l.size(), Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { System.alloc_zeroed(l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        LARGEST.fetch_max(new, Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { System.realloc(p, l, new) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(p, l) }
    }
}
