//! Page-aligned host buffers (UCX registers and zero-copies whole pages).
//!
//! Buffers of [`HUGE_PAGE_THRESHOLD`] or more are mapped on their own, aligned to and rounded up
//! to 2 MiB and marked `MADV_HUGEPAGE`, so that where transparent huge pages are on (`always` or
//! `madvise`) they are backed by 2 MiB pages, as NumPy does for large arrays (what NIXL's Python
//! users, and `scripts/bench-nixl`'s baseline, register) and as UCX's `thp` allocation method
//! does. A KV cache is one large allocation; a cma or RDMA transfer over it pins 2 MiB pages, not
//! 4 KiB ones, and measuring with 4 KiB pages made ic-bench slower than NumPy-backed NIXL by a
//! page-size effect, not by the harness (BENCHMARKS.md, "NIXL engine").

use crate::error::MemoryError;
use crate::pattern::{Mismatch, fill_pattern, verify_pattern};
use std::alloc::Layout;
use std::cell::Cell;
use std::marker::PhantomData;
use std::ptr::NonNull;
use ucx::{MemoryKind, Region};

/// Alignment of host buffers. 4 KiB is the base page on every platform ic-bench targets.
pub const PAGE_SIZE: usize = 4096;

/// From this size on a host buffer asks for transparent huge pages, rounded up to whole 2 MiB
/// pages as UCX's `thp` allocator does (below it, the per-buffer rounding would dominate).
pub const HUGE_PAGE_THRESHOLD: usize = 256 << 10;

/// A transparent huge page on x86_64 and on aarch64 with 4 KiB base pages.
const HUGE_PAGE: usize = 2 << 20;

/// A zero-initialised, page-aligned host allocation. `!Sync`; `Send` (see below).
pub struct HostBuffer {
    ptr: NonNull<u8>,
    layout: Layout,
    /// Large buffers: the whole anonymous mapping the buffer lies in (unmapped on drop).
    mapping: Option<(NonNull<u8>, usize)>,
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
        if len >= HUGE_PAGE_THRESHOLD {
            return Self::huge(layout);
        }
        // SAFETY: the layout has a non-zero size (checked above).
        let raw = unsafe { std::alloc::alloc_zeroed(layout) };
        let ptr = NonNull::new(raw).ok_or(MemoryError::HostAlloc { len })?;
        Ok(HostBuffer {
            ptr,
            layout,
            mapping: None,
            _not_sync: PhantomData,
        })
    }

    /// A large buffer in its own anonymous mapping (zero-filled by the kernel, nothing touched
    /// yet), starting on a 2 MiB boundary and advised for huge pages before its first touch.
    fn huge(layout: Layout) -> Result<Self, MemoryError> {
        let len = layout.size();
        let err = || MemoryError::HostAlloc { len };
        // Whole huge pages, plus one for the alignment: the advised range must hold complete
        // 2 MiB pages for the kernel to back it with them.
        let huge_len = len.checked_next_multiple_of(HUGE_PAGE).ok_or_else(err)?;
        let map_len = huge_len.checked_add(HUGE_PAGE).ok_or_else(err)?;
        // SAFETY: an anonymous private mapping at an address of the kernel's choosing; no file,
        // no fixed address, so nothing existing is replaced.
        let base = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                map_len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_PRIVATE | libc::MAP_ANONYMOUS,
                -1,
                0,
            )
        };
        if base == libc::MAP_FAILED {
            return Err(err());
        }
        let base = NonNull::new(base.cast::<u8>()).ok_or_else(err)?;
        let offset = base.as_ptr().align_offset(HUGE_PAGE);
        // SAFETY: `offset` < HUGE_PAGE, so `offset + huge_len` lies within the
        // `huge_len + HUGE_PAGE` bytes just mapped.
        let start = unsafe { base.as_ptr().add(offset) };
        // SAFETY: [start, start + huge_len) is inside the mapping; madvise only changes how the
        // kernel backs it. A kernel without THP says EINVAL: base pages then, as before.
        let _ = unsafe { libc::madvise(start.cast(), huge_len, libc::MADV_HUGEPAGE) };
        Ok(HostBuffer {
            ptr: NonNull::new(start).ok_or_else(err)?,
            layout,
            mapping: Some((base, map_len)),
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
        match self.mapping {
            // SAFETY: the mapping made in `huge`, with its length, unmapped once.
            Some((base, map_len)) => unsafe {
                libc::munmap(base.as_ptr().cast(), map_len);
            },
            // SAFETY: allocated in `new` with this exact layout, freed once.
            None => unsafe { std::alloc::dealloc(self.ptr.as_ptr(), self.layout) },
        }
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
    fn large_buffers_start_on_a_huge_page_and_are_advised_for_huge_pages() {
        let len = HUGE_PAGE_THRESHOLD + 12_345;
        let mut b = HostBuffer::new(len).unwrap();
        let start = b.as_ptr() as usize;
        assert_eq!(start % HUGE_PAGE, 0);
        assert_eq!(b.len(), len);
        assert!(b.as_slice().iter().all(|&x| x == 0));
        b.fill(9);
        b.verify(len, 9).unwrap();
        // The kernel shows the advice as the `hg` flag of the buffer's mapping (THP kernels).
        let thp = std::fs::read_to_string("/sys/kernel/mm/transparent_hugepage/enabled").unwrap_or_default();
        if thp.contains("[always]") || thp.contains("[madvise]") {
            let smaps = std::fs::read_to_string("/proc/self/smaps").unwrap();
            let mut in_ours = false;
            let mut advised = false;
            for line in smaps.lines() {
                if let Some((range, _)) = line.split_once(' ')
                    && let Some((lo, hi)) = range.split_once('-')
                    && let (Ok(lo), Ok(hi)) = (usize::from_str_radix(lo, 16), usize::from_str_radix(hi, 16))
                {
                    in_ours = lo <= start && start < hi;
                }
                if in_ours && line.starts_with("VmFlags:") {
                    advised = line.split_whitespace().any(|f| f == "hg");
                }
            }
            assert!(advised, "no MADV_HUGEPAGE on the buffer's mapping");
        }
        // A small one stays on the ordinary allocator.
        assert!(HostBuffer::new(HUGE_PAGE_THRESHOLD - 1).unwrap().mapping.is_none());
    }

    #[test]
    fn zero_length_is_an_error() {
        assert!(matches!(HostBuffer::new(0), Err(MemoryError::Empty)));
    }
}
