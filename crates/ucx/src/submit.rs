//! What every operation submit shares: the UCX entry points' types, the registration to pass
//! with a buffer, and the range check (used by `Worker`'s calls and by `PreparedTag`).

use crate::memory::Region;
use crate::memory::sealed::Token;
use crate::{Error, Result};
use std::ffi::c_void;
use std::ops::Range;
use ucx_sys as sys;

pub(crate) type PutFn = unsafe extern "C" fn(
    sys::ucp_ep_h,
    *const c_void,
    usize,
    u64,
    sys::ucp_rkey_h,
    *const sys::ucp_request_param_t,
) -> sys::ucs_status_ptr_t;
pub(crate) type GetFn = unsafe extern "C" fn(
    sys::ucp_ep_h,
    *mut c_void,
    usize,
    u64,
    sys::ucp_rkey_h,
    *const sys::ucp_request_param_t,
) -> sys::ucs_status_ptr_t;

pub(crate) type TagSendFn = unsafe extern "C" fn(
    sys::ucp_ep_h,
    *const c_void,
    usize,
    sys::ucp_tag_t,
    *const sys::ucp_request_param_t,
) -> sys::ucs_status_ptr_t;
pub(crate) type TagRecvFn = unsafe extern "C" fn(
    sys::ucp_worker_h,
    *mut c_void,
    usize,
    sys::ucp_tag_t,
    sys::ucp_tag_t,
    *const sys::ucp_request_param_t,
) -> sys::ucs_status_ptr_t;

pub(crate) enum RmaFn {
    Put(PutFn),
    Get(GetFn),
}

/// The registration to pass with an operation on `buf`, refused when it belongs to another context.
#[inline]
pub(crate) fn mapping_for(
    op: &'static str,
    buf: &dyn Region,
    ctx: sys::ucp_context_h,
) -> Result<Option<sys::ucp_mem_h>> {
    match buf.ucx_mapping(Token(())) {
        None => Ok(None),
        Some(m) if m.ctx == ctx => Ok(Some(m.memh)),
        Some(_) => Err(Error::invalid(
            op,
            "the memory map belongs to another UCX context than the worker",
        )),
    }
}

#[inline]
pub(crate) fn set_memh(param: &mut sys::ucp_request_param_t, memh: Option<sys::ucp_mem_h>) {
    if let Some(h) = memh {
        param.op_attr_mask |= sys::UCP_OP_ATTR_FIELD_MEMH;
        param.memh = h;
    }
}

pub(crate) fn check_range(op: &'static str, buf: &dyn Region, range: &Range<usize>) -> Result<*mut u8> {
    if range.start > range.end || range.end > buf.len() {
        return Err(Error::invalid(
            op,
            format!("range {range:?} is outside the {}-byte buffer", buf.len()),
        ));
    }
    // In bounds per the check above; wrapping_add avoids claiming anything about the pointer.
    Ok(buf.as_ptr().wrapping_add(range.start))
}
