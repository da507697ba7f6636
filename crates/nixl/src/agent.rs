//! The loaded library, an agent with its UCX backend, registrations and metadata.

use crate::error::{NixlError, check};
use icb_memory::{Buffer, Region};
use nixl_sys::{
    Loaded, NIXL_CAPI_MEM_DRAM, NIXL_CAPI_MEM_VRAM, nixl_capi_agent_t, nixl_capi_backend_t, nixl_capi_mem_list_t,
    nixl_capi_mem_type_t, nixl_capi_notif_map_t, nixl_capi_opt_args_t, nixl_capi_params_t, nixl_capi_reg_dlist_t,
    nixl_capi_string_list_t, require,
};
use std::cell::{Cell, RefCell};
use std::ffi::{CString, c_char, c_void};
use std::mem::ManuallyDrop;
use std::path::Path;
use std::rc::Rc;
use std::sync::Arc;

/// The NIXL C library, loaded and checked (cheap to clone, usable from any thread).
#[derive(Clone, Debug)]
pub struct Nixl {
    lib: Arc<Loaded>,
}

/// Host (DRAM) or GPU (VRAM) memory, as NIXL names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MemKind {
    Dram,
    Vram,
}

impl MemKind {
    pub(crate) fn raw(self) -> nixl_capi_mem_type_t {
        match self {
            MemKind::Dram => NIXL_CAPI_MEM_DRAM,
            MemKind::Vram => NIXL_CAPI_MEM_VRAM,
        }
    }
}

impl Nixl {
    /// Loads NIXL (see `nixl_sys::load` for the search order and the checks).
    pub fn load(explicit_dir: Option<&Path>) -> Result<Nixl, NixlError> {
        Ok(Nixl {
            lib: Arc::new(nixl_sys::load(explicit_dir)?),
        })
    }

    /// The `libnixl_capi.so` that was loaded.
    pub fn library(&self) -> &Path {
        &self.lib.path
    }

    /// NIXL's release (wheel dist-info or `nixl.pc`), if the install says.
    pub fn version(&self) -> Option<&str> {
        self.lib.version.as_deref()
    }

    /// Creates an agent named `name` (names must differ between the two sides).
    pub fn agent(&self, name: &str) -> Result<Agent, NixlError> {
        let c_name = c_string("create_agent", name)?;
        let create = require(&self.lib.capi.nixl_capi_create_agent, "nixl_capi_create_agent")?;
        let mut raw: nixl_capi_agent_t = std::ptr::null_mut();
        crate::process::mark_used();
        // SAFETY: `c_name` is a valid C string for the call; `raw` receives a new agent handle.
        check("create_agent", unsafe { create(c_name.as_ptr(), &mut raw) })?;
        let mut inner = Inner {
            lib: self.lib.clone(),
            raw,
            backend: std::ptr::null_mut(),
            opt_args: std::ptr::null_mut(),
            notifs: std::ptr::null_mut(),
            exported: Cell::new(false),
            kept: RefCell::new(Vec::new()),
        };
        let create_map = require(&self.lib.capi.nixl_capi_create_notif_map, "nixl_capi_create_notif_map")?;
        // SAFETY: writes a new notification map handle into `inner.notifs` (owned by `inner`).
        check("create_notif_map", unsafe { create_map(&mut inner.notifs) })?;
        Ok(Agent {
            inner: Rc::new(inner),
            name: name.to_string(),
        })
    }
}

/// The handles of one agent; dropped last by whatever still refers to it.
pub(crate) struct Inner {
    pub(crate) lib: Arc<Loaded>,
    pub(crate) raw: nixl_capi_agent_t,
    pub(crate) backend: nixl_capi_backend_t,
    /// Names the UCX backend, for every call that takes optional arguments.
    pub(crate) opt_args: nixl_capi_opt_args_t,
    notifs: nixl_capi_notif_map_t,
    /// Set once the metadata (which carries every registration's remote keys) went to a peer.
    exported: Cell<bool>,
    /// Memory of registrations dropped after an export: a peer may still read or write it
    /// (over tcp UCX packs a READ's reply from it whenever the link lets it), so it is freed
    /// only with the agent, after `nixl_capi_destroy_agent` (fields drop after `drop`'s body).
    kept: RefCell<Vec<Buffer>>,
}

impl Drop for Inner {
    fn drop(&mut self) {
        let capi = &self.lib.capi;
        // SAFETY: (all four calls) each handle was created by the matching create call, is destroyed
        // exactly once here, and no registration or transfer refers to the agent any more (they
        // hold an `Rc` to this `Inner`). Errors at teardown are not actionable and are ignored.
        unsafe {
            if !self.notifs.is_null()
                && let Ok(f) = capi.nixl_capi_destroy_notif_map.as_ref()
            {
                f(self.notifs);
            }
            if !self.opt_args.is_null()
                && let Ok(f) = capi.nixl_capi_destroy_opt_args.as_ref()
            {
                f(self.opt_args);
            }
            if let Ok(f) = capi.nixl_capi_destroy_agent.as_ref() {
                f(self.raw);
            }
            if !self.backend.is_null()
                && let Ok(f) = capi.nixl_capi_destroy_backend.as_ref()
            {
                f(self.backend);
            }
        }
    }
}

/// One NIXL agent (single-threaded). Clones share the agent.
#[derive(Clone)]
pub struct Agent {
    pub(crate) inner: Rc<Inner>,
    name: String,
}

impl Agent {
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The backend plugins NIXL found.
    pub fn plugins(&self) -> Result<Vec<String>, NixlError> {
        let capi = &self.inner.lib.capi;
        let get = require(&capi.nixl_capi_get_available_plugins, "nixl_capi_get_available_plugins")?;
        let size = require(&capi.nixl_capi_string_list_size, "nixl_capi_string_list_size")?;
        let at = require(&capi.nixl_capi_string_list_get, "nixl_capi_string_list_get")?;
        let destroy = require(&capi.nixl_capi_destroy_string_list, "nixl_capi_destroy_string_list")?;
        let mut list: nixl_capi_string_list_t = std::ptr::null_mut();
        // SAFETY: the agent handle is live; `list` receives a new list owned by this function.
        check("get_available_plugins", unsafe { get(self.inner.raw, &mut list) })?;
        let mut n = 0usize;
        // SAFETY: `list` is the live list created above.
        let r = check("string_list_size", unsafe { size(list, &mut n) });
        let mut out = Vec::with_capacity(n);
        for i in 0..if r.is_ok() { n } else { 0 } {
            let mut s: *const c_char = std::ptr::null();
            // SAFETY: `i` < size; the returned string lives as long as `list` and is copied now.
            if unsafe { at(list, i, &mut s) } == 0 {
                // SAFETY: NULL or a NUL-terminated string owned by `list`.
                out.push(unsafe { nixl_sys::c_str_or_empty(s) });
            }
        }
        // SAFETY: destroys the list created above, once.
        unsafe { destroy(list) };
        r.map(|()| out)
    }

    /// Creates the agent's UCX backend from NIXL's defaults for the plugin, with `overrides`
    /// replacing or adding parameters. Returns the parameters the backend reports after init.
    pub fn create_ucx_backend(&mut self, overrides: &[(String, String)]) -> Result<Vec<(String, String)>, NixlError> {
        let plugins = self.plugins()?;
        if !plugins.iter().any(|p| p == "UCX") {
            return Err(NixlError::NoUcxPlugin {
                found: if plugins.is_empty() {
                    "none".into()
                } else {
                    plugins.join(", ")
                },
            });
        }
        let inner = Rc::get_mut(&mut self.inner).ok_or_else(|| NixlError::Input {
            call: "create_backend",
            detail: "create the backend before registering memory or cloning the agent".into(),
        })?;
        let capi = &inner.lib.capi;
        let get_params = require(&capi.nixl_capi_get_plugin_params, "nixl_capi_get_plugin_params")?;
        let destroy_mems = require(&capi.nixl_capi_destroy_mem_list, "nixl_capi_destroy_mem_list")?;
        let destroy_params = require(&capi.nixl_capi_destroy_params, "nixl_capi_destroy_params")?;
        let create_params = require(&capi.nixl_capi_create_params, "nixl_capi_create_params")?;
        let add = require(&capi.nixl_capi_params_add, "nixl_capi_params_add")?;
        let create_backend = require(&capi.nixl_capi_create_backend, "nixl_capi_create_backend")?;
        let ucx = c"UCX";

        let mut mems: nixl_capi_mem_list_t = std::ptr::null_mut();
        let mut defaults: nixl_capi_params_t = std::ptr::null_mut();
        // SAFETY: live agent; both out-pointers receive new objects destroyed below.
        check("get_plugin_params", unsafe {
            get_params(inner.raw, ucx.as_ptr(), &mut mems, &mut defaults)
        })?;
        let mut merged = params_to_vec(&inner.lib, defaults);
        // SAFETY: destroys the objects created above, once each.
        unsafe {
            destroy_mems(mems);
            destroy_params(defaults);
        }
        for (k, v) in overrides {
            match merged.iter_mut().find(|(mk, _)| mk == k) {
                Some(slot) => slot.1 = v.clone(),
                None => merged.push((k.clone(), v.clone())),
            }
        }
        let mut params: nixl_capi_params_t = std::ptr::null_mut();
        // SAFETY: `params` receives a new map destroyed below.
        check("create_params", unsafe { create_params(&mut params) })?;
        let mut result = Ok(());
        for (k, v) in &merged {
            let (ck, cv) = match (c_string("params_add", k), c_string("params_add", v)) {
                (Ok(a), Ok(b)) => (a, b),
                (Err(e), _) | (_, Err(e)) => {
                    result = Err(e);
                    break;
                }
            };
            // SAFETY: live params map; both strings are valid for the call (NIXL copies them).
            if let Err(e) = check("params_add", unsafe { add(params, ck.as_ptr(), cv.as_ptr()) }) {
                result = Err(e);
                break;
            }
        }
        if result.is_ok() {
            // SAFETY: live agent and params; `inner.backend` receives the new backend handle.
            result = check("create_backend UCX", unsafe {
                create_backend(inner.raw, ucx.as_ptr(), params, &mut inner.backend)
            });
        }
        // SAFETY: destroys the map created above, once (the backend copied what it needs).
        unsafe { destroy_params(params) };
        result?;

        let create_opt = require(&capi.nixl_capi_create_opt_args, "nixl_capi_create_opt_args")?;
        let add_backend = require(&capi.nixl_capi_opt_args_add_backend, "nixl_capi_opt_args_add_backend")?;
        // SAFETY: `inner.opt_args` receives a new handle owned by `inner` (destroyed in Drop).
        check("create_opt_args", unsafe { create_opt(&mut inner.opt_args) })?;
        // SAFETY: both handles are live; the opt args keep a reference to the backend handle,
        // which `inner` destroys only after them.
        check("opt_args_add_backend", unsafe {
            add_backend(inner.opt_args, inner.backend)
        })?;
        self.backend_params()
    }

    /// The UCX backend's parameters as NIXL reports them after initialisation.
    pub fn backend_params(&self) -> Result<Vec<(String, String)>, NixlError> {
        let inner = &self.inner;
        if inner.backend.is_null() {
            return Ok(Vec::new());
        }
        let capi = &inner.lib.capi;
        let get = require(&capi.nixl_capi_get_backend_params, "nixl_capi_get_backend_params")?;
        let destroy_mems = require(&capi.nixl_capi_destroy_mem_list, "nixl_capi_destroy_mem_list")?;
        let destroy_params = require(&capi.nixl_capi_destroy_params, "nixl_capi_destroy_params")?;
        let mut mems: nixl_capi_mem_list_t = std::ptr::null_mut();
        let mut params: nixl_capi_params_t = std::ptr::null_mut();
        // SAFETY: live agent and backend; both out-pointers receive new objects destroyed below.
        check("get_backend_params", unsafe {
            get(inner.raw, inner.backend, &mut mems, &mut params)
        })?;
        let out = params_to_vec(&inner.lib, params);
        // SAFETY: destroys the objects created above, once each.
        unsafe {
            destroy_mems(mems);
            destroy_params(params);
        }
        Ok(out)
    }

    /// Registers `memory` (host memory as DRAM, CUDA memory as VRAM on its device) with the UCX
    /// backend. The registration owns the memory, so it stays allocated for as long as NIXL may
    /// touch it: until the registration and every [`crate::Transfer`] using it are dropped.
    pub fn register(&self, memory: Buffer) -> Result<Registration, NixlError> {
        let (kind, dev_id) = match &memory {
            Buffer::Host(_) => (MemKind::Dram, 0u64),
            Buffer::Cuda(b) => (MemKind::Vram, b.device() as u64),
        };
        let (addr, len) = (memory.as_ptr() as usize, memory.len());
        let capi = &self.inner.lib.capi;
        let create = require(&capi.nixl_capi_create_reg_dlist, "nixl_capi_create_reg_dlist")?;
        let add = require(&capi.nixl_capi_reg_dlist_add_desc, "nixl_capi_reg_dlist_add_desc")?;
        let register = require(&capi.nixl_capi_register_mem, "nixl_capi_register_mem")?;
        let destroy = require(&capi.nixl_capi_destroy_reg_dlist, "nixl_capi_destroy_reg_dlist")?;
        let mut dlist: nixl_capi_reg_dlist_t = std::ptr::null_mut();
        // SAFETY: `dlist` receives a new list, owned by the Registration (or destroyed below).
        check("create_reg_dlist", unsafe { create(kind.raw(), &mut dlist) })?;
        // SAFETY: live list; the descriptor records the buffer's range (no access here) and no
        // per-descriptor metadata (NULL, 0).
        let added = check("reg_dlist_add_desc", unsafe {
            add(dlist, addr, len, dev_id, std::ptr::null(), 0)
        });
        let r = added.and_then(|()| {
            // SAFETY: live agent, list and opt args; the range is `memory`, which the returned
            // Registration owns, so it outlives the registration.
            check("register_mem", unsafe {
                register(self.inner.raw, dlist, self.inner.opt_args)
            })
        });
        if let Err(e) = r {
            // SAFETY: destroys the list created above, once.
            unsafe { destroy(dlist) };
            return Err(e);
        }
        Ok(Registration {
            inner: Rc::new(RegInner {
                agent: self.inner.clone(),
                dlist,
                kind,
                dev_id,
                memory: ManuallyDrop::new(RefCell::new(memory)),
                addr,
                len,
            }),
        })
    }

    /// How many dropped registrations' buffers the agent keeps because a peer got its metadata
    /// (freed with the agent).
    pub fn kept_buffers(&self) -> usize {
        self.inner.kept.borrow().len()
    }

    /// This agent's metadata blob (connection info and registered memory) for the peer.
    pub fn local_metadata(&self) -> Result<Vec<u8>, NixlError> {
        let get = require(&self.inner.lib.capi.nixl_capi_get_local_md, "nixl_capi_get_local_md")?;
        let mut data: *mut c_void = std::ptr::null_mut();
        let mut len = 0usize;
        // SAFETY: live agent; NIXL mallocs `len` bytes into `data`, freed below after copying.
        check("get_local_md", unsafe { get(self.inner.raw, &mut data, &mut len) })?;
        if data.is_null() {
            return Ok(Vec::new());
        }
        // SAFETY: `data` points at `len` initialised bytes allocated by NIXL with malloc.
        let out = unsafe { std::slice::from_raw_parts(data as *const u8, len) }.to_vec();
        // SAFETY: releases NIXL's malloc'd buffer once (the C API's documented ownership).
        unsafe { libc::free(data) };
        self.inner.exported.set(true);
        Ok(out)
    }

    /// Loads the peer's metadata; returns the peer agent's name.
    pub fn load_remote_metadata(&self, md: &[u8]) -> Result<String, NixlError> {
        let load = require(
            &self.inner.lib.capi.nixl_capi_load_remote_md,
            "nixl_capi_load_remote_md",
        )?;
        let mut name: *mut c_char = std::ptr::null_mut();
        // SAFETY: live agent; `md` is readable for its length; NIXL mallocs the name, freed below.
        check("load_remote_md", unsafe {
            load(self.inner.raw, md.as_ptr() as *const c_void, md.len(), &mut name)
        })?;
        // SAFETY: NULL or a NUL-terminated string allocated by NIXL.
        let out = unsafe { nixl_sys::c_str_or_empty(name) };
        if !name.is_null() {
            // SAFETY: releases NIXL's malloc'd string once.
            unsafe { libc::free(name as *mut c_void) };
        }
        Ok(out)
    }

    /// Forgets the peer's metadata (disconnects from it).
    pub fn invalidate_remote(&self, remote: &str) -> Result<(), NixlError> {
        let f = require(
            &self.inner.lib.capi.nixl_capi_invalidate_remote_md,
            "nixl_capi_invalidate_remote_md",
        )?;
        let c = c_string("invalidate_remote_md", remote)?;
        // SAFETY: live agent, valid C string for the call.
        check("invalidate_remote_md", unsafe { f(self.inner.raw, c.as_ptr()) })
    }

    /// Progresses the agent (its UCX worker) once by asking for notifications. The passive side
    /// of a transfer calls this in a loop: software transports (tcp) move bytes only when the
    /// target's worker is progressed.
    pub fn progress(&self) -> Result<(), NixlError> {
        let get = require(&self.inner.lib.capi.nixl_capi_get_notifs, "nixl_capi_get_notifs")?;
        // SAFETY: live agent, notification map and opt args owned by `inner`.
        check("get_notifs", unsafe {
            get(self.inner.raw, self.inner.notifs, self.inner.opt_args)
        })
    }
}

/// Memory registered with an agent; deregistered and freed when the last user drops it.
#[derive(Clone)]
pub struct Registration {
    pub(crate) inner: Rc<RegInner>,
}

pub(crate) struct RegInner {
    agent: Rc<Inner>,
    dlist: nixl_capi_reg_dlist_t,
    pub(crate) kind: MemKind,
    pub(crate) dev_id: u64,
    /// Taken out in `drop`: freed there, or kept by the agent once its metadata was exported.
    memory: ManuallyDrop<RefCell<Buffer>>,
    pub(crate) addr: usize,
    pub(crate) len: usize,
}

impl Registration {
    /// Start address of the registered memory (what the peer's descriptors name).
    pub fn addr(&self) -> u64 {
        self.inner.addr as u64
    }

    pub fn len(&self) -> usize {
        self.inner.len
    }

    pub fn is_empty(&self) -> bool {
        self.inner.len == 0
    }

    pub fn kind(&self) -> MemKind {
        self.inner.kind
    }

    /// GPU ordinal for VRAM, 0 for DRAM (the `dev_id` of descriptors into this memory).
    pub fn dev_id(&self) -> u64 {
        self.inner.dev_id
    }

    /// The registered buffer, to fill or verify while no transfer is in flight (transfers run
    /// only inside `Transfer::post`/`poll` on this same thread).
    pub fn with_memory<T>(&self, f: impl FnOnce(&mut Buffer) -> T) -> T {
        f(&mut self.inner.memory.borrow_mut())
    }
}

impl Drop for RegInner {
    fn drop(&mut self) {
        let capi = &self.agent.lib.capi;
        // SAFETY: the list was registered with this live agent and is deregistered and destroyed
        // exactly once; no transfer uses it any more (each holds an `Rc` to this). Teardown
        // errors are not actionable. The memory goes after this (see `Inner::kept`).
        unsafe {
            if let Ok(f) = capi.nixl_capi_deregister_mem.as_ref() {
                f(self.agent.raw, self.dlist, self.agent.opt_args);
            }
            if let Ok(f) = capi.nixl_capi_destroy_reg_dlist.as_ref() {
                f(self.dlist);
            }
        }
        // SAFETY: `memory` is taken exactly once, here, and never touched again.
        let memory = unsafe { ManuallyDrop::take(&mut self.memory) }.into_inner();
        if self.agent.exported.get() {
            self.agent.kept.borrow_mut().push(memory);
        }
    }
}

pub(crate) fn c_string(call: &'static str, s: &str) -> Result<CString, NixlError> {
    CString::new(s).map_err(|_| NixlError::Input {
        call,
        detail: format!("{s:?} contains a NUL byte"),
    })
}

/// Copies a NIXL parameter map into owned pairs (empty on any iteration error).
fn params_to_vec(lib: &Loaded, params: nixl_capi_params_t) -> Vec<(String, String)> {
    let capi = &lib.capi;
    let (Ok(is_empty), Ok(create), Ok(next), Ok(destroy)) = (
        capi.nixl_capi_params_is_empty.as_ref(),
        capi.nixl_capi_params_create_iterator.as_ref(),
        capi.nixl_capi_params_iterator_next.as_ref(),
        capi.nixl_capi_params_destroy_iterator.as_ref(),
    ) else {
        return Vec::new();
    };
    let mut empty = true;
    // SAFETY: `params` is a live map owned by the caller.
    if unsafe { is_empty(params, &mut empty) } != 0 || empty {
        return Vec::new();
    }
    let mut iter = std::ptr::null_mut();
    // SAFETY: live map; `iter` receives a new iterator destroyed below.
    if unsafe { create(params, &mut iter) } != 0 {
        return Vec::new();
    }
    let mut out = Vec::new();
    loop {
        let (mut k, mut v, mut more) = (std::ptr::null(), std::ptr::null(), false);
        // SAFETY: live iterator over a non-empty map; the strings live as long as the map.
        if unsafe { next(iter, &mut k, &mut v, &mut more) } != 0 {
            break;
        }
        // SAFETY: NULL or NUL-terminated strings owned by the map, copied now.
        out.push(unsafe { (nixl_sys::c_str_or_empty(k), nixl_sys::c_str_or_empty(v)) });
        if !more || out.len() > 4096 {
            break;
        }
    }
    // SAFETY: destroys the iterator created above, once.
    unsafe { destroy(iter) };
    out
}
