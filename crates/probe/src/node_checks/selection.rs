//! What the transport variables select: `UCX_NET_DEVICES`, `NCCL_SOCKET_IFNAME`, the RoCE GID.

use super::*;

pub(super) fn net_devices(f: &NodeFacts, x: &NodeExpectations) -> Check {
    let id = "node.net_devices";
    let ucx = x.env.get("UCX_NET_DEVICES");
    let nccl = x.env.get("NCCL_IB_HCA");
    if ucx.is_none() && nccl.is_none() {
        return check(
            id,
            Status::Skipped,
            "UCX_NET_DEVICES and NCCL_IB_HCA are unset: UCX and NCCL pick devices themselves",
        )
        .scope(&x.env.origin);
    }
    let mut problems: Vec<String> = Vec::new();
    let mut warnings: Vec<String> = Vec::new();
    let mut chosen: Vec<&PortFacts> = Vec::new();
    let mut shown: Vec<String> = Vec::new();
    if let Some(v) = ucx {
        shown.push(format!("UCX_NET_DEVICES={v}"));
        match parse_ucx_net_devices(v) {
            Err(e) => problems.push(e),
            Ok(None) => chosen.extend(f.up_ports()),
            Ok(Some(entries)) => {
                for e in entries {
                    if e.port.is_none() && f.devices.contains(&e.device) {
                        // UCX names RDMA devices `dev:port`; a bare name matches nothing.
                        problems.push(format!("{e} lacks :PORT (UCX calls it {e}:1)"));
                        continue;
                    }
                    let ports: Vec<&PortFacts> = f
                        .ports
                        .iter()
                        .filter(|p| p.device == e.device && e.port.is_none_or(|n| n == p.port))
                        .collect();
                    if ports.is_empty() {
                        if f.devices.contains(&e.device) {
                            problems.push(format!("{e}: no such port"));
                        } else if f.netdevs.as_ref().is_some_and(|n| n.contains(&e.device)) {
                            warnings.push(format!("{e} is a network interface (TCP), not an RDMA device"));
                        } else {
                            problems.push(format!("{e}: no such device"));
                        }
                    } else {
                        for p in ports {
                            if p.is_up() {
                                chosen.push(p);
                            } else {
                                problems.push(format!("{} is {}", p.name(), p.state_text()));
                            }
                        }
                    }
                }
            }
        }
    }
    if let Some(v) = nccl {
        shown.push(format!("NCCL_IB_HCA={v}"));
        let spec = parse_nccl_ib_hca(v);
        if !spec.exclude {
            for e in &spec.entries {
                let one = crate::envspec::HcaSpec {
                    exclude: false,
                    exact: spec.exact,
                    entries: vec![e.clone()],
                };
                let matched: Vec<&PortFacts> = f.ports.iter().filter(|p| one.selects(&p.device, p.port)).collect();
                if matched.is_empty() {
                    problems.push(format!("NCCL_IB_HCA entry {e} matches no device"));
                } else if !matched.iter().any(|p| p.is_up()) {
                    problems.push(format!(
                        "NCCL_IB_HCA entry {e}: {}",
                        matched
                            .iter()
                            .map(|p| format!("{} is {}", p.name(), p.state_text()))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ));
                }
                let spill = spec.prefix_spill(e, &f.devices);
                if !spill.is_empty() {
                    warnings.push(format!(
                        "NCCL_IB_HCA entry {} also selects {} (prefix match; start the list with '=' for exact names)",
                        e.device,
                        spill.join(", ")
                    ));
                }
            }
        }
        let selected: Vec<&PortFacts> = f.up_ports().filter(|p| spec.selects(&p.device, p.port)).collect();
        if selected.is_empty() && !f.ports.is_empty() {
            problems.push("NCCL_IB_HCA selects no ACTIVE port".into());
        }
        chosen.extend(selected);
    }
    let layers: BTreeSet<&str> = chosen
        .iter()
        .filter_map(|p| p.link_layer.as_ref().map(LinkLayer::as_str))
        .collect();
    let scope = x.env.origin.clone();
    let shown = shown.join(" ");
    if !problems.is_empty() {
        return check(id, Status::Fail, format!("{shown}: {}", list(&problems, 3)))
            .hint("name only ports that are ACTIVE+LinkUp on this node (ic-bench detect-env prints them)")
            .scope(scope);
    }
    if layers.len() > 1 {
        warnings.push(format!(
            "mixes link layers ({})",
            layers.iter().copied().collect::<Vec<_>>().join(" + ")
        ));
    }
    if !warnings.is_empty() {
        return check(id, Status::Warn, format!("{shown}: {}", list(&warnings, 3)))
            .hint("pin devices of one fabric: mixing InfiniBand and RoCE gives NIXL_ERR_REMOTE_DISCONNECT")
            .scope(scope);
    }
    let layer = layers.iter().next().copied().unwrap_or("unknown link layer");
    check(
        id,
        Status::Ok,
        format!("{shown}: all named ports exist and are ACTIVE+LinkUp ({layer})"),
    )
    .scope(scope)
}

pub(super) fn socket_ifname(f: &NodeFacts, x: &NodeExpectations) -> Check {
    let id = "node.socket_ifname";
    let Some(v) = x.env.get("NCCL_SOCKET_IFNAME") else {
        return check(
            id,
            Status::Skipped,
            "NCCL_SOCKET_IFNAME unset (NCCL picks an interface)",
        )
        .scope(&x.env.origin);
    };
    let Some(netdevs) = &f.netdevs else {
        return check(id, Status::Skipped, "/sys/class/net not readable").scope(&x.env.origin);
    };
    let hits: Vec<String> = netdevs
        .iter()
        .filter(|n| socket_ifname_matches(v, n))
        .cloned()
        .collect();
    if hits.is_empty() {
        check(
            id,
            Status::Fail,
            format!(
                "NCCL_SOCKET_IFNAME={v} matches no interface here ({})",
                list(netdevs, 6)
            ),
        )
        .hint("NCCL bootstrap will fail with 'no socket interface found': name an interface that exists in the pod")
        .scope(&x.env.origin)
    } else {
        check(
            id,
            Status::Ok,
            format!("NCCL_SOCKET_IFNAME={v} matches {}", list(&hits, 4)),
        )
        .scope(&x.env.origin)
    }
}

pub(super) fn gid(f: &NodeFacts, x: &NodeExpectations) -> Check {
    let id = "node.gid";
    let up: Vec<&PortFacts> = f.up_ports().collect();
    if up.is_empty() {
        return check(id, Status::Skipped, "no up RDMA port");
    }
    let forced = x.env.forced_gid_index();
    let roce: Vec<&PortFacts> = up.iter().copied().filter(|p| p.is_ethernet()).collect();
    if roce.is_empty() {
        return match forced {
            Some((k, v)) => check(id, Status::Warn, format!("{k}={v} is set on an InfiniBand fabric"))
                .hint("InfiniBand routes by LID: leave the GID index unset"),
            None => check(id, Status::Ok, "InfiniBand: no GID index needed"),
        };
    }
    if roce.iter().all(|p| p.gids.is_empty()) {
        return check(
            id,
            Status::Skipped,
            "RoCE ports but no readable GID table (gid_attrs/types)",
        );
    }
    let none: Vec<String> = roce
        .iter()
        .filter(|p| p.roce_v2_ipv4_indices().is_empty())
        .map(|p| p.name())
        .collect();
    if let Some((k, v)) = forced {
        let bad: Vec<String> = roce
            .iter()
            .filter(|p| !p.roce_v2_ipv4_indices().contains(&(v as u32)) || v > u32::MAX as i64)
            .map(|p| {
                let what = p
                    .gids
                    .iter()
                    .find(|g| i64::from(g.index) == v)
                    .map_or("empty".to_string(), |g| {
                        format!("{} {}", g.gid_type.as_ref().map_or("?", |t| t.as_str()), g.gid)
                    });
                format!("{} [{v}]={what}", p.name())
            })
            .collect();
        if !bad.is_empty() {
            return check(
                id,
                Status::Fail,
                format!("{k}={v} is not RoCE v2 + IPv4-mapped on {}", list(&bad, 3)),
            )
            .hint("unset the GID index (NCCL auto-selects per HCA) or force one that is RoCE v2 IPv4 on every HCA");
        }
        return check(
            id,
            Status::Ok,
            format!("{k}={v} is RoCE v2 + IPv4-mapped on all {} RoCE port(s)", roce.len()),
        );
    }
    if !none.is_empty() {
        return check(
            id,
            Status::Fail,
            format!("no RoCE v2 IPv4-mapped GID on {}", list(&none, 4)),
        )
        .hint("give the port's netdev an IPv4 address (the RoCE v2 GID appears with it)");
    }
    let firsts: BTreeMap<String, u32> = roce
        .iter()
        .filter_map(|p| p.roce_v2_ipv4_indices().first().map(|i| (p.name(), *i)))
        .collect();
    let distinct: BTreeSet<u32> = firsts.values().copied().collect();
    if distinct.len() > 1 {
        let per: Vec<String> = firsts.iter().map(|(p, i)| format!("{p}→{i}")).collect();
        return check(
            id,
            Status::Warn,
            format!("HCAs disagree on the RoCE v2 IPv4 GID index: {}", list(&per, 4)),
        )
        .hint("leave NCCL_IB_GID_INDEX unset (auto per HCA); one forced index would break the others");
    }
    let i = distinct.into_iter().next().unwrap_or_default();
    check(
        id,
        Status::Ok,
        format!(
            "RoCE v2 IPv4-mapped GID at index {i} on all {} RoCE port(s)",
            roce.len()
        ),
    )
}
