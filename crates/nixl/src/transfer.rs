//! One prepared READ or WRITE request over two descriptor lists.

use crate::agent::{Agent, Inner, MemKind, RegInner, Registration, c_string};
use crate::error::{NixlError, check};
use nixl_sys::{
    NIXL_CAPI_IN_PROG, NIXL_CAPI_XFER_OP_READ, NIXL_CAPI_XFER_OP_WRITE, nixl_capi_xfer_dlist_t, nixl_capi_xfer_req_t,
    require,
};
use std::rc::Rc;

/// NIXL's two operations, seen from the initiator: READ pulls remote bytes into local memory,
/// WRITE pushes local bytes into remote memory.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum XferOp {
    Read,
    Write,
}

/// One block: address, length, device id (GPU ordinal for VRAM, 0 for DRAM).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Descriptor {
    pub addr: u64,
    pub len: usize,
    pub dev_id: u64,
}

/// A request that can be posted again after each completion; released on drop.
pub struct Transfer {
    agent: Rc<Inner>,
    /// Keeps the local memory registered and allocated while the request exists.
    _local: Rc<RegInner>,
    req: nixl_capi_xfer_req_t,
    lists: [nixl_capi_xfer_dlist_t; 2],
    /// Bytes one completion moves.
    pub bytes: u64,
}

impl Agent {
    /// Prepares `op` between `local` blocks, which must lie inside the registration `memory`, and
    /// the same number of `remote` blocks (of `remote_kind`) of the agent `remote_agent`, whose
    /// metadata was loaded. The request keeps `memory` alive.
    pub fn transfer(
        &self,
        op: XferOp,
        memory: &Registration,
        local: &[Descriptor],
        remote_kind: MemKind,
        remote: &[Descriptor],
        remote_agent: &str,
    ) -> Result<Transfer, NixlError> {
        if local.len() != remote.len() || local.is_empty() {
            return Err(NixlError::Input {
                call: "create_xfer_req",
                detail: format!(
                    "{} local and {} remote descriptors: give the same non-zero number",
                    local.len(),
                    remote.len()
                ),
            });
        }
        let (lo, hi) = (memory.addr(), memory.addr() + memory.len() as u64);
        if let Some(d) = local
            .iter()
            .find(|d| d.addr < lo || d.addr.saturating_add(d.len as u64) > hi)
        {
            return Err(NixlError::Input {
                call: "create_xfer_req",
                detail: format!(
                    "local block {:#x}+{} lies outside the registered memory {lo:#x}+{}",
                    d.addr,
                    d.len,
                    memory.len()
                ),
            });
        }
        let local_kind = memory.kind();
        let inner = &self.inner;
        let capi = &inner.lib.capi;
        let create_req = require(&capi.nixl_capi_create_xfer_req, "nixl_capi_create_xfer_req")?;
        let remote_name = c_string("create_xfer_req", remote_agent)?;
        let mut t = Transfer {
            agent: inner.clone(),
            _local: memory.inner.clone(),
            req: std::ptr::null_mut(),
            lists: [std::ptr::null_mut(); 2],
            bytes: local.iter().map(|d| d.len as u64).sum(),
        };
        t.lists[0] = xfer_dlist(inner, local_kind, local)?;
        t.lists[1] = xfer_dlist(inner, remote_kind, remote)?;
        let raw_op = match op {
            XferOp::Read => NIXL_CAPI_XFER_OP_READ,
            XferOp::Write => NIXL_CAPI_XFER_OP_WRITE,
        };
        // SAFETY: live agent, lists and opt args; the name is valid for the call; `t.req`
        // receives a new request released in Transfer's Drop.
        check("create_xfer_req", unsafe {
            create_req(
                inner.raw,
                raw_op,
                t.lists[0],
                t.lists[1],
                remote_name.as_ptr(),
                &mut t.req,
                inner.opt_args,
            )
        })?;
        Ok(t)
    }
}

/// A descriptor list handle; on error the partial list is destroyed.
fn xfer_dlist(inner: &Inner, kind: MemKind, descs: &[Descriptor]) -> Result<nixl_capi_xfer_dlist_t, NixlError> {
    let capi = &inner.lib.capi;
    let create = require(&capi.nixl_capi_create_xfer_dlist, "nixl_capi_create_xfer_dlist")?;
    let add = require(&capi.nixl_capi_xfer_dlist_add_desc, "nixl_capi_xfer_dlist_add_desc")?;
    let destroy = require(&capi.nixl_capi_destroy_xfer_dlist, "nixl_capi_destroy_xfer_dlist")?;
    let mut list: nixl_capi_xfer_dlist_t = std::ptr::null_mut();
    // SAFETY: `list` receives a new list owned by the caller (the Transfer).
    check("create_xfer_dlist", unsafe { create(kind.raw(), &mut list) })?;
    for d in descs {
        let addr = usize::try_from(d.addr).map_err(|_| NixlError::Input {
            call: "xfer_dlist_add_desc",
            detail: format!("address {:#x} does not fit this platform", d.addr),
        });
        // SAFETY: live list; a descriptor only records the range (NIXL checks it against the
        // registrations when the request is created).
        let r = addr.and_then(|a| check("xfer_dlist_add_desc", unsafe { add(list, a, d.len, d.dev_id) }));
        if let Err(e) = r {
            // SAFETY: destroys the list created above, once.
            unsafe { destroy(list) };
            return Err(e);
        }
    }
    Ok(list)
}

impl Transfer {
    /// Posts the request; `true` when it already completed.
    pub fn post(&mut self) -> Result<bool, NixlError> {
        let post = require(&self.agent.lib.capi.nixl_capi_post_xfer_req, "nixl_capi_post_xfer_req")?;
        // SAFETY: live agent, request and opt args.
        let s = unsafe { post(self.agent.raw, self.req, self.agent.opt_args) };
        done_or_error("post_xfer_req", s)
    }

    /// Polls (and progresses) the request; `true` once it completed.
    pub fn poll(&mut self) -> Result<bool, NixlError> {
        let status = require(
            &self.agent.lib.capi.nixl_capi_get_xfer_status,
            "nixl_capi_get_xfer_status",
        )?;
        // SAFETY: live agent and request.
        let s = unsafe { status(self.agent.raw, self.req) };
        done_or_error("get_xfer_status", s)
    }
}

fn done_or_error(call: &'static str, status: i32) -> Result<bool, NixlError> {
    if status == NIXL_CAPI_IN_PROG {
        Ok(false)
    } else {
        check(call, status).map(|()| true)
    }
}

impl Drop for Transfer {
    fn drop(&mut self) {
        let capi = &self.agent.lib.capi;
        // SAFETY: the request and lists were created for this live agent and are released and
        // destroyed exactly once; teardown errors are not actionable.
        unsafe {
            if !self.req.is_null()
                && let Ok(f) = capi.nixl_capi_release_xfer_req.as_ref()
            {
                f(self.agent.raw, self.req);
            }
            if let Ok(f) = capi.nixl_capi_destroy_xfer_dlist.as_ref() {
                for l in self.lists {
                    if !l.is_null() {
                        f(l);
                    }
                }
            }
        }
    }
}
