//! Page-aligned host buffers (UCX registers and zero-copies whole pages).

use crate::error::MemoryError;
use crate::pattern::{Mismatch, fill_pattern, verify_pattern};
use std::alloc::Layout;
use std::cell::Cell;
use std::marker::PhantomData;
use std::ptr::NonNull;
use ucx::{MemoryKind, Region};

/// Alignment of host buffers. 4 KiB is the base page on every platform ic-bench targets.
pub const PAGE_SIZE: usize = 4096;

/// A zero-initialised, page-aligned host allocation. `!Sync`; `Send` (see below).
pub struct HostBuffer {
    ptr: NonNull<u8>,
    layout: Layout,
    _not_sync: PhantomData<Cell<()>>,
}

// SAFETY: the buffer exclusively owns its allocation (no aliasing handle exists outside it), so
// moving it to another thread moves sole ownership; it stays !Sync.
unsafe impl Send for HostBuffer {}

impl std::fmt::Debug for HostBuffer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostBuffer")
            .field("ptr", &self.ptr)
            .field("len", &self.layout.size())
            .finish()
    }
}

impl HostBuffer {
    pub fn new(len: usize) -> Result<Self, MemoryError> {
        if len == 0 {
            return Err(MemoryError::Empty);
        }
        let layout = Layout::from_size_align(len, PAGE_SIZE).map_err(|_| MemoryError::HostAlloc { len })?;
        // SAFETY: the layout has a non-zero size (checked above).
        let raw = unsafe { std::alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(raw).ok_or(MemoryError::HostAlloc { len })?;
        Ok(HostBuffer {
            ptr,
            layout,
            _not_sync: PhantomData,
        })
    }

    pub fn as_slice(&mut self) -> &[u8] {
        // SAFETY: `ptr` is a live allocation of `layout.size()` initialised (zeroed) bytes; the
        // `&mut self` receiver rules out a UCX operation holding the buffer (ops hold an `Rc`, so
        // a `&mut` exists only when no op or map does).
        unsafe { std::slice::from_raw_parts(self.ptr.as_ptr(), self.layout.size()) }
    }

    pub fn as_mut_slice(&mut self) -> &mut [u8] {
        // SAFETY: as in `as_slice`, and `&mut self` makes this the only reference.
        unsafe { std::slice::from_raw_parts_mut(self.ptr.as_ptr(), self.layout.size()) }
    }

    /// Fills the whole buffer with the pattern for `seed`.
    pub fn fill(&mut self, seed: u64) {
        fill_pattern(self.as_mut_slice(), seed);
    }

    /// Checks the first `len` bytes against the pattern for `seed`.
    pub fn verify(&mut self, len: usize, seed: u64) -> Result<(), MemoryError> {
        let size = self.layout.size();
        let bytes = self
            .as_slice()
            .get(..len)
            .ok_or(MemoryError::Length { asked: len, len: size })?;
        verify_pattern(bytes, seed).map_err(|m: Mismatch| m.into())
    }
}

impl Drop for HostBuffer {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this exact layout, freed once.
        unsafe { std::alloc::dealloc(self.ptr.as_ptr(), self.layout) };
    }
}

// SAFETY: the pointer is stable and covers `len()` bytes of host memory for the buffer's whole
// life; Rust reaches the bytes only through `&mut self` methods, as the trait requires.
unsafe impl Region for HostBuffer {
    fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }
    fn len(&self) -> usize {
        self.layout.size()
    }
    fn memory_type(&self) -> MemoryKind {
        MemoryKind::Host
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn aligned_zeroed_and_patterned() {
        let mut b = HostBuffer::new(10_000).unwrap();
        assert_eq!(b.as_ptr() as usize % PAGE_SIZE, 0);
        assert_eq!(b.len(), 10_000);
        assert!(b.as_slice().iter().all(|&x| x == 0));
        b.fill(5);
        b.verify(10_000, 5).unwrap();
        b.verify(3, 5).unwrap();
        assert!(matches!(b.verify(10_000, 6), Err(MemoryError::Mismatch(_))));
        assert!(matches!(b.verify(10_001, 5), Err(MemoryError::Length { .. })));
        b.as_mut_slice()[9_999] ^= 0xff;
        let err = b.verify(10_000, 5).unwrap_err();
        assert!(err.to_string().contains("byte 9999"), "{err}");
    }

    #[test]
    fn zero_length_is_an_error() {
        assert!(matches!(HostBuffer::new(0), Err(MemoryError::Empty)));
    }
}
