//! UCX transport names: what class each is ([`transport_class`]), which RDMA family, and what a
//! `UCX_TLS` value lets UCX use ([`UcxTls`]), `^` exclusion and aliases included.

use crate::model::TransportClass;

/// The RDMA transport families UCX has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RdmaFamily {
    /// Reliable connected (`rc`, `rc_v`/`rc_verbs`, `rc_x`/`rc_mlx5`).
    Rc,
    /// Dynamically connected, mlx5 only (`dc`, `dc_x`/`dc_mlx5`).
    Dc,
    /// Unreliable datagram (`ud`, `ud_v`/`ud_verbs`, `ud_x`/`ud_mlx5`): UCX's wireup and
    /// keepalive transport; it carries bulk data only when nothing reliable is there.
    Ud,
    /// Scalable reliable datagram: EFA (`srd`; `efa` as some tools spell it).
    Srd,
    /// mlx5 GGA (`gga`, `gga_mlx5`): the NIC's memory-to-memory copy engine.
    Gga,
}

impl RdmaFamily {
    /// Reliable families carry the bulk data of a transfer between hosts.
    pub fn is_reliable(self) -> bool {
        matches!(self, RdmaFamily::Rc | RdmaFamily::Dc | RdmaFamily::Srd)
    }
}

/// The RDMA family of a transport name (UCX_TLS spelling or `ucx_info -d` spelling).
pub fn rdma_family(name: &str) -> Option<RdmaFamily> {
    let n = name.trim().to_ascii_lowercase();
    if n == "srd" || n == "efa" {
        return Some(RdmaFamily::Srd);
    }
    let (base, flavour) = n.split_once('_').unwrap_or((n.as_str(), ""));
    let family = match base {
        "rc" => RdmaFamily::Rc,
        "dc" => RdmaFamily::Dc,
        "ud" => RdmaFamily::Ud,
        "gga" => RdmaFamily::Gga,
        _ => return None,
    };
    let flavour_ok = match family {
        RdmaFamily::Rc | RdmaFamily::Ud => matches!(flavour, "" | "v" | "verbs" | "x" | "mlx5"),
        RdmaFamily::Dc => matches!(flavour, "" | "x" | "mlx5"),
        _ => matches!(flavour, "" | "mlx5"),
    };
    flavour_ok.then_some(family)
}

/// Maps a UCX transport (UCT component) name, or a `UCX_TLS` alias naming one kind of transport,
/// to the class the verdict rules reason about.
pub fn transport_class(name: &str) -> TransportClass {
    let n = name.trim().to_ascii_lowercase();
    if rdma_family(&n).is_some() {
        return TransportClass::Rdma;
    }
    match n.as_str() {
        "tcp" | "sockcm" => TransportClass::Tcp,
        "sysv" | "posix" | "xpmem" | "knem" | "mm" | "sm" | "shm" => TransportClass::SharedMemory,
        "cma" => TransportClass::Cma,
        // `ib` is UCX_TLS's alias for every InfiniBand/RoCE transport; `rdmacm` is the RDMA
        // connection manager, named only where RDMA is meant to be used.
        "ib" | "rdmacm" => TransportClass::Rdma,
        "cuda_ipc" => TransportClass::CudaIpc,
        "cuda_copy" | "gdr_copy" => TransportClass::CudaCopyStaging,
        "self" => TransportClass::SelfLoop,
        "rma_am" => TransportClass::RmaEmulated,
        _ => TransportClass::Unknown,
    }
}

/// Any RDMA transport (IB, RoCE, EFA).
pub fn is_rdma_transport(name: &str) -> bool {
    transport_class(name) == TransportClass::Rdma
}

/// The concrete transports UCX_TLS selects among, as `ucx_info -d` names them.
pub const CONCRETE_TRANSPORTS: &[&str] = &[
    "tcp",
    "sysv",
    "posix",
    "cma",
    "knem",
    "xpmem",
    "self",
    "rc_verbs",
    "rc_mlx5",
    "dc_mlx5",
    "ud_verbs",
    "ud_mlx5",
    "srd",
    "gga_mlx5",
    "cuda_copy",
    "cuda_ipc",
    "gdr_copy",
    "rocm_copy",
    "rocm_ipc",
];

/// The concrete transports one `UCX_TLS` item stands for: UCX's aliases (`ucp_tl_aliases` in
/// ucp_context.c, UCX 1.1x; the `:aux` wireup helpers left out) expanded.
pub fn tls_item_transports(item: &str) -> Vec<&'static str> {
    let n = item.trim().to_ascii_lowercase();
    let pick = |names: &[&'static str]| names.to_vec();
    match n.as_str() {
        "all" => pick(CONCRETE_TRANSPORTS),
        "sm" | "shm" => pick(&["sysv", "posix", "cma", "knem", "xpmem"]),
        "mm" => pick(&["sysv", "posix", "xpmem"]),
        "ib" => pick(&["rc_verbs", "rc_mlx5", "dc_mlx5", "ud_verbs", "ud_mlx5"]),
        "rc" => pick(&["rc_verbs", "rc_mlx5"]),
        "rc_v" | "rc_verbs" => pick(&["rc_verbs"]),
        "rc_x" | "rc_mlx5" => pick(&["rc_mlx5"]),
        "dc" | "dc_x" | "dc_mlx5" => pick(&["dc_mlx5"]),
        "ud" => pick(&["ud_verbs", "ud_mlx5"]),
        "ud_v" | "ud_verbs" => pick(&["ud_verbs"]),
        "ud_x" | "ud_mlx5" => pick(&["ud_mlx5"]),
        "gga" | "gga_mlx5" => pick(&["gga_mlx5"]),
        "srd" | "efa" => pick(&["srd"]),
        "cuda" => pick(&["cuda_copy", "cuda_ipc", "gdr_copy"]),
        "rocm" => pick(&["rocm_copy", "rocm_ipc", "rocm_gdr"]),
        other => CONCRETE_TRANSPORTS.iter().copied().filter(|t| *t == other).collect(),
    }
}

/// A parsed `UCX_TLS`: `a,b,c` (only these) or `^a,b` (all but these).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UcxTls {
    /// `^a,b`: every transport except those listed.
    pub exclude: bool,
    /// Lower-cased items, in order, empty ones dropped.
    pub items: Vec<String>,
}

impl UcxTls {
    pub fn parse(value: &str) -> UcxTls {
        let v = value.trim();
        let (exclude, rest) = match v.strip_prefix('^') {
            Some(r) => (true, r),
            None => (false, v),
        };
        let items = rest
            .split(',')
            .map(|t| t.trim().to_ascii_lowercase())
            .filter(|t| !t.is_empty())
            .collect();
        UcxTls { exclude, items }
    }

    fn covers(&self, transport: &str) -> bool {
        self.items.iter().any(|i| tls_item_transports(i).contains(&transport))
    }

    /// UCX may use this concrete transport (`ucx_info -d` spelling, e.g. `cuda_copy`).
    pub fn allows(&self, transport: &str) -> bool {
        self.covers(transport) != self.exclude
    }

    /// UCX may use some transport this item or alias stands for (`allows_item("ib")`: some
    /// InfiniBand/RoCE transport is left).
    pub fn allows_item(&self, item: &str) -> bool {
        tls_item_transports(item).iter().any(|t| self.allows(t))
    }

    /// UCX may use some transport of this class.
    pub fn allows_class(&self, class: TransportClass) -> bool {
        CONCRETE_TRANSPORTS
            .iter()
            .any(|t| transport_class(t) == class && self.allows(t))
    }

    /// Names this transport on purpose: the include form, by name or alias (`all` does not count:
    /// whoever writes `all` does not count on any one transport).
    pub fn names(&self, transport: &str) -> bool {
        !self.exclude
            && self
                .items
                .iter()
                .any(|i| i != "all" && tls_item_transports(i).contains(&transport))
    }
}
