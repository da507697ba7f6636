//! The RDMA devices and ports themselves: present, up, at what rate, how healthy.

use super::*;

pub(super) fn rdma_devs(f: &NodeFacts, x: &NodeExpectations) -> Check {
    let id = "node.rdma_devs";
    let bad = if x.expects_rdma() { Status::Fail } else { Status::Warn };
    let uverbs: Vec<String> = f
        .dev_infiniband
        .iter()
        .flatten()
        .filter(|n| n.starts_with("uverbs"))
        .cloned()
        .collect();
    if f.devices.is_empty() {
        let seen = match &f.device_list {
            Some(DeviceList::NoDevices) => "; ibv_devinfo: No IB devices found",
            _ => "",
        };
        return check(
            id,
            bad,
            format!("no RDMA devices in /sys/class/infiniband{seen}: cross-node KV transfer would use TCP"),
        )
        .hint("request an RDMA resource (rdma/ib, SR-IOV VF, vpc.amazonaws.com/efa) or check the device plugin");
    }
    let devs = list(&f.devices, 4);
    if uverbs.is_empty() {
        return check(id, bad, format!("{devs} in sysfs but no /dev/infiniband/uverbs*: this container cannot open them"))
            .hint("request the RDMA device resource in the pod (rdma/ib or the SR-IOV resource) so /dev/infiniband is mounted");
    }
    if let Some(DeviceList::Devices(v)) = &f.device_list {
        let missing: Vec<String> = f.devices.iter().filter(|d| !v.contains(d)).cloned().collect();
        if !missing.is_empty() {
            return check(
                id,
                Status::Warn,
                format!("{devs} in sysfs, but ibv_devinfo does not list {}", list(&missing, 4)),
            );
        }
    }
    check(
        id,
        Status::Ok,
        format!(
            "{} RDMA device(s): {devs}; {} uverbs node(s)",
            f.devices.len(),
            uverbs.len()
        ),
    )
}

pub(super) fn port_state(f: &NodeFacts) -> Check {
    let id = "node.port_state";
    if f.ports.is_empty() {
        let why = if f.devices.is_empty() {
            "no RDMA devices"
        } else {
            "RDMA devices show no ports"
        };
        return check(id, Status::Skipped, why);
    }
    let from = if f.ports.iter().all(|p| p.from == "ibstat") {
        " (from ibstat)"
    } else {
        ""
    };
    let up: Vec<String> = f.up_ports().map(PortFacts::name).collect();
    let down: Vec<String> = f
        .ports
        .iter()
        .filter(|p| !p.is_up())
        .map(|p| format!("{} {}", p.name(), p.state_text()))
        .collect();
    let init_linkup = f.ports.iter().any(|p| {
        !p.is_up()
            && p.state == Some(crate::parse::PortState::Init)
            && p.phys_state == Some(crate::parse::PhysState::LinkUp)
    });
    let hint = if init_linkup {
        "INIT with LinkUp: the cable is fine but no subnet manager configured the port (check opensm/UFM)"
    } else {
        "check cabling, switch port and subnet manager; only ACTIVE + LinkUp carries traffic"
    };
    if down.is_empty() {
        check(
            id,
            Status::Ok,
            format!(
                "{}/{} port(s) ACTIVE+LinkUp{from}: {}",
                up.len(),
                f.ports.len(),
                list(&up, 4)
            ),
        )
    } else if up.is_empty() {
        check(
            id,
            Status::Fail,
            format!("no port is ACTIVE+LinkUp{from}: {}", list(&down, 4)),
        )
        .hint(hint)
    } else {
        check(
            id,
            Status::Warn,
            format!(
                "{}/{} port(s) up{from}; not up: {}",
                up.len(),
                f.ports.len(),
                list(&down, 4)
            ),
        )
        .hint(hint)
    }
}

pub(super) fn port_rate(f: &NodeFacts) -> Check {
    let id = "node.port_rate";
    let rated: Vec<(&PortFacts, f64)> = f
        .up_ports()
        .filter_map(|p| p.rate.as_ref().map(|r| (p, r.gbps)))
        .collect();
    if rated.is_empty() {
        return check(id, Status::Skipped, "no up port with a readable rate");
    }
    // The most common rate is what this node's ports should all run at.
    let mut counts: BTreeMap<u64, usize> = BTreeMap::new();
    for (_, r) in &rated {
        *counts.entry((r * 10.0) as u64).or_default() += 1;
    }
    let mode = counts
        .iter()
        .max_by_key(|(rate, n)| (**n, **rate))
        .map(|(r, _)| *r as f64 / 10.0)
        .unwrap_or(0.0);
    let slow: Vec<String> = rated
        .iter()
        .filter(|(_, r)| *r < mode)
        .map(|(p, r)| format!("{} {r} Gb/s", p.name()))
        .collect();
    if slow.is_empty() {
        check(id, Status::Ok, format!("{} up port(s) at {mode} Gb/s", rated.len()))
    } else {
        check(
            id,
            Status::Warn,
            format!("below the node's {mode} Gb/s: {}", list(&slow, 4)),
        )
        .hint("a port that trained at a lower speed: reseat or replace the cable/transceiver")
    }
}

pub(super) fn link_errors(f: &NodeFacts) -> Check {
    let id = "node.link_errors";
    let ports: Vec<&PortFacts> = f.up_ports().filter(|p| !p.counters.is_empty()).collect();
    if ports.is_empty() {
        return check(id, Status::Skipped, "no error counters on up ports");
    }
    let totals: Vec<String> = ports
        .iter()
        .flat_map(|p| {
            p.counters
                .iter()
                .filter(|(_, v)| **v > 0)
                .map(move |(c, v)| format!("{} {}={v}", p.name(), short(c)))
        })
        .collect();
    let Some(later) = &f.counters_later else {
        let since = if totals.is_empty() {
            "all zero".to_string()
        } else {
            format!("since reset: {}", list(&totals, 3))
        };
        return check(
            id,
            Status::Ok,
            format!("{} port(s), one reading ({since}); not sampled twice", ports.len()),
        );
    };
    let mut rising = Vec::new();
    for p in &ports {
        let Some(l) = later.get(&p.name()) else { continue };
        for (c, v) in &p.counters {
            if let Some(v2) = l.get(c)
                && v2 > v
            {
                rising.push(format!("{} {} +{}", p.name(), short(c), v2 - v));
            }
        }
    }
    if rising.is_empty() {
        check(
            id,
            Status::Ok,
            format!("stable over {} s on {} port(s)", f.counter_interval_s, ports.len()),
        )
    } else {
        check(
            id,
            Status::Warn,
            format!("rising over {} s: {}", f.counter_interval_s, list(&rising, 3)),
        )
        .hint("a flapping or dirty link: check the cable, transceiver and switch port")
    }
}

pub(super) fn short(counter: &str) -> &str {
    counter.rsplit('/').next().unwrap_or(counter)
}

pub(super) fn efa_kernel(f: &NodeFacts, x: &NodeExpectations) -> Check {
    let id = "node.efa_kernel";
    if !f.has_efa() {
        return check(id, Status::Skipped, "no EFA device");
    }
    let k = f.kernel_release.clone().unwrap_or_else(|| "unknown".into());
    let scheme = x.env.get("UCX_RNDV_SCHEME");
    let thresh0 = x.env.get("UCX_RNDV_THRESH") == Some("0");
    let get_zcopy = scheme == Some("get_zcopy") || thresh0;
    let new_kernel = f.kernel().is_some_and(|v| v >= (6, 8));
    if new_kernel && get_zcopy {
        let what = if scheme == Some("get_zcopy") {
            "UCX_RNDV_SCHEME=get_zcopy"
        } else {
            "UCX_RNDV_THRESH=0"
        };
        return check(
            id,
            Status::Fail,
            format!("EFA on kernel {k} with {what}: 'remote invalid RD request' / NIXL_ERR_BACKEND"),
        )
        .hint("on EFA use UCX_RNDV_SCHEME=put_zcopy (or leave it unset) and no RNDV_THRESH=0")
        .scope(&x.env.origin);
    }
    check(
        id,
        Status::Ok,
        format!("EFA on kernel {k}; rendezvous scheme {}", scheme.unwrap_or("default")),
    )
    .scope(&x.env.origin)
}
