//! From what sysfs showed to the rail map: which ports are left out, then which port each GPU
//! takes. Pure, so the choice can be tested on hand-made nodes.

use super::{GpuSeen, PortSeen, pci_order, pcie};
use icb_core::rails::{GpuRef, LeftOutNic, LeftOutReason, PcieRelation, Rail, RailMap};

/// Ports slower than this share of the fastest up port are front-end NICs.
const SLOW_SHARE: f64 = 0.5;

pub(super) fn build(gpus: &[GpuSeen], ports: &[PortSeen], notes: Vec<String>) -> RailMap {
    let mut map = RailMap {
        notes,
        ..Default::default()
    };
    let fastest = ports
        .iter()
        .filter(|p| p.up)
        .filter_map(|p| p.nic.rate_gbps)
        .fold(None, |m: Option<f64>, r| Some(m.map_or(r, |m| m.max(r))));
    let mut kept: Vec<&PortSeen> = Vec::new();
    for p in ports {
        let reasons = left_out_reasons(p, fastest);
        if reasons.is_empty() {
            kept.push(p);
        } else {
            map.left_out.push(LeftOutNic {
                nic: p.nic.clone(),
                reasons,
            });
        }
    }
    // NIC PCI order (by name where the PCI address is unknown), then port.
    kept.sort_by(|a, b| {
        let key = |p: &PortSeen| {
            (
                p.nic.pci.is_none(),
                p.nic.pci.as_deref().map(pci_order),
                p.nic.name.clone(),
            )
        };
        key(a)
            .cmp(&key(b))
            .then_with(|| crate::source::natural_cmp(&a.nic.name, &b.nic.name))
            .then(a.nic.port.cmp(&b.nic.port))
    });
    if kept.is_empty() {
        let why = if ports.is_empty() {
            "no RDMA port in /sys/class/infiniband: no rails"
        } else {
            "no active, non-bonded RDMA port at full rate: no rails"
        };
        map.notes.push(why.to_string());
        return map;
    }
    if gpus.is_empty() {
        map.rails = kept
            .iter()
            .enumerate()
            .map(|(index, p)| Rail {
                index,
                gpu: None,
                nic: p.nic.clone(),
                relation: None,
            })
            .collect();
        return map;
    }
    assign(gpus, &kept, &mut map);
    map
}

fn left_out_reasons(p: &PortSeen, fastest: Option<f64>) -> Vec<LeftOutReason> {
    let mut reasons: Vec<LeftOutReason> = p.bond.iter().cloned().collect();
    if !p.up {
        reasons.push(LeftOutReason::PortDown);
    } else if let (Some(rate), Some(fastest)) = (p.nic.rate_gbps, fastest)
        && rate < fastest * SLOW_SHARE
    {
        // A down port's rate means nothing: only up ports are judged slow.
        reasons.push(LeftOutReason::Slow { fastest_gbps: fastest });
    }
    reasons
}

/// Each GPU, in order, takes its nearest port (best relation); among equally near ports it
/// prefers one no GPU took yet, then fewer PCI hops, then PCI order. Two GPUs and two NICs on
/// one switch therefore pair up in order, and a GPU shares a NIC only when the other ports are
/// farther away.
fn assign(gpus: &[GpuSeen], kept: &[&PortSeen], map: &mut RailMap) {
    let mut uses = vec![0usize; kept.len()];
    let mut unknown: Vec<String> = Vec::new();
    for (ordinal, gpu) in gpus.iter().enumerate() {
        let near: Vec<Option<(PcieRelation, usize)>> = kept
            .iter()
            .map(|p| match (&gpu.path, &p.path) {
                (Some(g), Some(n)) => pcie::relation(g, gpu.numa, n, p.nic.numa_node),
                _ => None,
            })
            .collect();
        let Some(best) = (0..kept.len()).min_by_key(|&i| {
            let (rel, hops) = near[i].map_or((None, usize::MAX), |(r, h)| (Some(r), h));
            // `None` (unknown) sorts after every relation.
            (rel.is_none(), rel, uses[i], hops, i)
        }) else {
            continue;
        };
        uses[best] += 1;
        let relation = near[best].map(|(r, _)| r);
        if relation.is_none() {
            unknown.push(format!("GPU{ordinal}"));
        }
        map.rails.push(Rail {
            index: map.rails.len(),
            gpu: Some(GpuRef {
                ordinal,
                pci: gpu.pci.clone(),
                numa_node: gpu.numa,
            }),
            nic: kept[best].nic.clone(),
            relation,
        });
    }
    if !unknown.is_empty() {
        map.notes.push(format!(
            "{}: no PCIe relation to the chosen port could be computed (PCI path or NUMA node unknown); that pairing is PCI order, not topology",
            unknown.join(", ")
        ));
    }
    second_ports(gpus, kept, &mut uses, map);
    usage_notes(kept, &uses, map);
}

/// A node with two NICs per GPU (16 NICs, 8 GPUs) uses both: a port no GPU took that is as near
/// to a GPU (behind the same PCIe switch) as that GPU's own port is a second rail of that GPU, so
/// every NIC is tested with its GPU's memory, one rank each. Rails are then ordered by GPU, then
/// NIC PCI order.
fn second_ports(gpus: &[GpuSeen], kept: &[&PortSeen], uses: &mut [usize], map: &mut RailMap) {
    let mut added = false;
    for (i, p) in kept.iter().enumerate() {
        if uses[i] != 0 {
            continue;
        }
        let best = gpus
            .iter()
            .enumerate()
            .filter_map(|(ordinal, g)| {
                let (rel, hops) = pcie::relation(g.path.as_ref()?, g.numa, p.path.as_ref()?, p.nic.numa_node)?;
                let own = map
                    .rails
                    .iter()
                    .find(|r| r.gpu.as_ref().is_some_and(|x| x.ordinal == ordinal))?;
                // Only as near as the GPU's own port, and on its switch: a farther port would
                // measure the host bridge, not a rail.
                (Some(rel) == own.relation && rel <= PcieRelation::Pxb).then_some((rel, hops, ordinal))
            })
            .min();
        let Some((rel, _, ordinal)) = best else { continue };
        uses[i] += 1;
        added = true;
        map.rails.push(Rail {
            index: 0,
            gpu: Some(GpuRef {
                ordinal,
                pci: gpus[ordinal].pci.clone(),
                numa_node: gpus[ordinal].numa,
            }),
            nic: p.nic.clone(),
            relation: Some(rel),
        });
    }
    if added {
        let order = |r: &Rail| {
            let nic = kept
                .iter()
                .position(|p| p.nic.port_name() == r.nic.port_name() && p.nic.pci == r.nic.pci);
            (r.gpu.as_ref().map(|g| g.ordinal), nic)
        };
        map.rails.sort_by_key(order);
        for (i, r) in map.rails.iter_mut().enumerate() {
            r.index = i;
        }
    }
}

/// A port two GPUs share halves each one's bandwidth; a port no GPU took carries nothing.
fn usage_notes(kept: &[&PortSeen], uses: &[usize], map: &mut RailMap) {
    for (i, p) in kept.iter().enumerate() {
        let who = || describe(&p.nic.port_name(), p.nic.pci.as_deref());
        match uses[i] {
            0 => map
                .notes
                .push(format!("{} is no GPU's nearest port: not a rail", who())),
            1 => {}
            n => {
                let gpus: Vec<String> = map
                    .rails
                    .iter()
                    .filter(|r| r.nic.port_name() == p.nic.port_name() && r.nic.pci == p.nic.pci)
                    .filter_map(|r| r.gpu.as_ref().map(|g| format!("GPU{}", g.ordinal)))
                    .collect();
                let rate = p.nic.rate_gbps.map(|r| format!(" of {r} Gb/s")).unwrap_or_default();
                map.notes.push(format!(
                    "{} share {}: each gets 1/{n} of its bandwidth{rate}",
                    gpus.join(" and "),
                    who()
                ));
            }
        }
    }
}

fn describe(port: &str, pci: Option<&str>) -> String {
    match pci {
        Some(pci) => format!("{port} ({pci})"),
        None => port.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use icb_core::rails::NicRef;

    fn gpu(path: &str) -> GpuSeen {
        let path = pcie::PciPath::parse(path);
        GpuSeen {
            pci: path.as_ref().map(|p| p.address().to_string()).unwrap_or_default(),
            path,
            numa: Some(0),
        }
    }

    fn port(name: &str, path: &str, rate: f64, up: bool) -> PortSeen {
        let path = pcie::PciPath::parse(path);
        PortSeen {
            nic: NicRef {
                name: name.into(),
                pci: path.as_ref().map(|p| p.address().to_string()),
                port: 1,
                state: if up { "ACTIVE/LinkUp" } else { "DOWN/Disabled" }.into(),
                rate_gbps: Some(rate),
                link_layer: Some("InfiniBand".into()),
                netdevs: vec![],
                numa_node: Some(0),
            },
            path,
            up,
            bond: None,
        }
    }

    const SW: &str = "/sys/devices/pci0000:16/0000:16:02.0/0000:17:00.0";

    #[test]
    fn two_gpus_two_nics_on_one_switch_pair_up_in_order() {
        let gpus = [
            gpu(&format!("{SW}/0000:18:00.0/0000:19:00.0")),
            gpu(&format!("{SW}/0000:18:02.0/0000:1b:00.0")),
        ];
        // Listed out of order: the map still pairs by PCI order.
        let ports = [
            port("mlx5_1", &format!("{SW}/0000:18:03.0/0000:1c:00.0"), 400.0, true),
            port("mlx5_0", &format!("{SW}/0000:18:01.0/0000:1a:00.0"), 400.0, true),
        ];
        let map = build(&gpus, &ports, vec![]);
        let names: Vec<&str> = map.rails.iter().map(|r| r.nic.name.as_str()).collect();
        assert_eq!(names, vec!["mlx5_0", "mlx5_1"]);
        assert!(map.rails.iter().all(|r| r.relation == Some(PcieRelation::Pix)));
        assert!(map.notes.is_empty(), "{:?}", map.notes);
    }

    #[test]
    fn two_nics_per_gpu_give_each_gpu_two_rails() {
        // Two GPUs, four NICs, each GPU with two NICs behind its own switch (a 16-NIC HGX, cut
        // down): every NIC is a rail, each with its GPU.
        const SW2: &str = "/sys/devices/pci0000:36/0000:36:02.0/0000:37:00.0";
        let gpus = [
            gpu(&format!("{SW}/0000:18:00.0/0000:19:00.0")),
            gpu(&format!("{SW2}/0000:38:00.0/0000:39:00.0")),
        ];
        let ports = [
            port("mlx5_0", &format!("{SW}/0000:18:01.0/0000:1a:00.0"), 400.0, true),
            port("mlx5_1", &format!("{SW}/0000:18:02.0/0000:1b:00.0"), 400.0, true),
            port("mlx5_2", &format!("{SW2}/0000:38:01.0/0000:3a:00.0"), 400.0, true),
            port("mlx5_3", &format!("{SW2}/0000:38:02.0/0000:3b:00.0"), 400.0, true),
        ];
        let map = build(&gpus, &ports, vec![]);
        let rails: Vec<(usize, usize, &str)> = map
            .rails
            .iter()
            .map(|r| (r.index, r.gpu.as_ref().unwrap().ordinal, r.nic.name.as_str()))
            .collect();
        assert_eq!(
            rails,
            vec![(0, 0, "mlx5_0"), (1, 0, "mlx5_1"), (2, 1, "mlx5_2"), (3, 1, "mlx5_3")]
        );
        assert!(map.rails.iter().all(|r| r.relation == Some(PcieRelation::Pix)));
        assert!(map.notes.is_empty(), "no port is left unused: {:?}", map.notes);
    }

    #[test]
    fn a_far_port_is_not_a_second_rail() {
        const FAR: &str = "/sys/devices/pci0000:80/0000:80:01.0";
        let gpus = [gpu(&format!("{SW}/0000:18:00.0/0000:19:00.0"))];
        let ports = [
            port("mlx5_0", &format!("{SW}/0000:18:01.0/0000:1a:00.0"), 400.0, true),
            port("mlx5_1", &format!("{FAR}/0000:81:00.0"), 400.0, true),
        ];
        let map = build(&gpus, &ports, vec![]);
        assert_eq!(map.rails.len(), 1);
        assert!(
            map.notes
                .iter()
                .any(|n| n.contains("mlx5_1:1") && n.contains("not a rail")),
            "{:?}",
            map.notes
        );
    }

    #[test]
    fn without_usable_ports_there_are_no_rails_and_a_note() {
        let gpus = [gpu(&format!("{SW}/0000:18:00.0/0000:19:00.0"))];
        let ports = [port("mlx5_0", &format!("{SW}/0000:18:01.0/0000:1a:00.0"), 400.0, false)];
        let map = build(&gpus, &ports, vec![]);
        assert!(map.rails.is_empty());
        assert_eq!(map.left_out[0].reasons, vec![LeftOutReason::PortDown]);
        assert!(map.notes[0].contains("no rails"), "{:?}", map.notes);
    }

    #[test]
    fn unknown_paths_pair_in_order_and_say_so() {
        let gpus = [GpuSeen {
            pci: "0000:19:00.0".into(),
            path: None,
            numa: None,
        }];
        let ports = [port("mlx5_0", "not a path", 400.0, true)];
        let map = build(&gpus, &ports, vec![]);
        assert_eq!(map.rails.len(), 1);
        assert_eq!(map.rails[0].relation, None);
        assert!(
            map.notes.iter().any(|n| n.contains("GPU0: no PCIe relation")),
            "{:?}",
            map.notes
        );
    }
}
