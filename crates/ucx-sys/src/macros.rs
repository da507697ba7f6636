//! UCX's C macros, which bindgen cannot translate, re-expressed as Rust functions.

use crate::bindings::{UCP_DATATYPE_CONTIG, UCP_DATATYPE_SHIFT, UCS_ERR_LAST, ucp_datatype_t, ucs_status_t};
use std::ffi::c_void;

/// `UCS_PTR_IS_ERR`: UCX returns small negative statuses cast to pointers in place of a request.
#[inline(always)]
pub fn ucs_ptr_is_err(ptr: *const c_void) -> bool {
    (ptr as usize) >= (UCS_ERR_LAST as isize as usize)
}

/// `UCS_PTR_IS_PTR`: a real pointer (not NULL, not an encoded status).
#[inline(always)]
pub fn ucs_ptr_is_ptr(ptr: *const c_void) -> bool {
    (ptr as usize).wrapping_sub(1) < (UCS_ERR_LAST as isize as usize).wrapping_sub(1)
}

/// `UCS_PTR_STATUS`: the status encoded in a pointer (UCS_OK for NULL).
#[inline(always)]
pub fn ucs_ptr_status(ptr: *const c_void) -> ucs_status_t {
    ptr as isize as ucs_status_t
}

/// `UCS_STATUS_IS_ERR`: errors are negative, `UCS_OK` and `UCS_INPROGRESS` are not.
#[inline(always)]
pub fn ucs_status_is_err(status: ucs_status_t) -> bool {
    status < 0
}

/// `ucp_dt_make_contig`: the datatype of a contiguous buffer of `elem_size`-byte elements.
#[inline(always)]
pub fn ucp_dt_make_contig(elem_size: usize) -> ucp_datatype_t {
    ((elem_size as ucp_datatype_t) << UCP_DATATYPE_SHIFT) | UCP_DATATYPE_CONTIG as ucp_datatype_t
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bindings::{UCS_ERR_NO_MEMORY, UCS_ERR_TIMED_OUT, UCS_INPROGRESS, UCS_OK};

    #[test]
    fn encoded_statuses_round_trip() {
        for s in [UCS_ERR_NO_MEMORY, UCS_ERR_TIMED_OUT, UCS_ERR_LAST + 1] {
            let p = s as isize as *const c_void;
            assert!(ucs_ptr_is_err(p), "status {s}");
            assert!(!ucs_ptr_is_ptr(p));
            assert_eq!(ucs_ptr_status(p), s);
        }
        let null = std::ptr::null::<c_void>();
        assert!(!ucs_ptr_is_err(null));
        assert!(!ucs_ptr_is_ptr(null));
        assert_eq!(ucs_ptr_status(null), UCS_OK as ucs_status_t);
        let x = 0u64;
        let real = (&x as *const u64).cast::<c_void>();
        assert!(ucs_ptr_is_ptr(real));
        assert!(!ucs_ptr_is_err(real));
    }

    #[test]
    fn status_sign_is_error() {
        assert!(!ucs_status_is_err(UCS_OK as ucs_status_t));
        assert!(!ucs_status_is_err(UCS_INPROGRESS as ucs_status_t));
        assert!(ucs_status_is_err(UCS_ERR_NO_MEMORY as ucs_status_t));
    }

    #[test]
    fn contig_datatype_matches_c_macro() {
        // ucp_dt_make_contig(1) == (1 << 3) | 0 == 8 in every UCX release.
        assert_eq!(ucp_dt_make_contig(1), 8);
        assert_eq!(ucp_dt_make_contig(4), 32);
    }
}
