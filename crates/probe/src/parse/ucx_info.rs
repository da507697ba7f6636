//! `ucx_info -d` (openucx `src/tools/info/tl_info.c`): `# Memory domain:` sections with their
//! component, memory types and transports. Keys are matched case-insensitively because older UCX
//! prints `component:` in lower case.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UcxInfo {
    pub memory_domains: Vec<MemoryDomain>,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemoryDomain {
    pub name: String,
    pub component: Option<String>,
    /// `host`, `cuda`, `cuda-managed`, … (the access flags in parentheses dropped).
    pub memory_types: Vec<String>,
    pub transports: Vec<UcxTransport>,
    /// `< no supported devices found >`.
    pub no_devices: bool,
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct UcxTransport {
    pub name: String,
    /// `mlx5_0:1`, `cuda`, `eth0`.
    pub device: Option<String>,
    pub dev_type: Option<String>,
}

impl UcxInfo {
    pub fn transports(&self) -> impl Iterator<Item = &UcxTransport> {
        self.memory_domains.iter().flat_map(|m| m.transports.iter())
    }

    pub fn has_transport(&self, pred: impl Fn(&str) -> bool) -> bool {
        self.transports().any(|t| pred(&t.name))
    }
}

/// Splits `host (access,reg), cuda (access,alloc)` into `["host", "cuda"]`.
fn memory_type_names(value: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut depth = 0usize;
    let mut current = String::new();
    for c in value.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                push_name(&mut out, &current);
                current.clear();
            }
            _ if depth == 0 => current.push(c),
            _ => {}
        }
    }
    push_name(&mut out, &current);
    out
}

fn push_name(out: &mut Vec<String>, s: &str) {
    let s = s.trim();
    if !s.is_empty() {
        out.push(s.to_string());
    }
}

pub fn parse_ucx_info(text: &str) -> UcxInfo {
    let mut info = UcxInfo::default();
    // A `Connection manager:` section is not a memory domain; its lines must not land in the
    // previous one.
    let mut in_md = false;
    for raw in text.lines() {
        let line = raw.trim_start().trim_start_matches('#').trim();
        if line.contains("no supported devices found") {
            if let (true, Some(md)) = (in_md, info.memory_domains.last_mut()) {
                md.no_devices = true;
            }
            continue;
        }
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let key = key.trim().to_ascii_lowercase();
        let value = value.trim();
        match key.as_str() {
            "memory domain" => {
                info.memory_domains.push(MemoryDomain {
                    name: value.to_string(),
                    ..Default::default()
                });
                in_md = true;
                continue;
            }
            "connection manager" => {
                in_md = false;
                continue;
            }
            _ => {}
        }
        if !in_md {
            continue;
        }
        let Some(md) = info.memory_domains.last_mut() else {
            continue;
        };
        match key.as_str() {
            "component" => md.component = Some(value.to_string()),
            "memory types" => md.memory_types = memory_type_names(value),
            "transport" => md.transports.push(UcxTransport {
                name: value.to_string(),
                ..Default::default()
            }),
            "device" => {
                if let Some(t) = md.transports.last_mut() {
                    t.device = Some(value.to_string());
                }
            }
            "type" => {
                if let Some(t) = md.transports.last_mut() {
                    t.dev_type = Some(value.to_string());
                }
            }
            _ => {}
        }
    }
    info
}

#[cfg(test)]
mod tests {
    use super::*;

    const EXCERPT: &str = "# Memory domain: mlx5_0\n#     Component: ib\n#             register: unlimited, cost: 16000 + 0.060 * N nsec\n#           remote key: 8 bytes\n#         memory types: host (access,reg,cache)\n#\n#      Transport: rc_mlx5\n#         Device: mlx5_0:1\n#           Type: network\n#  System device: mlx5_0 (1)\n#\n#      Transport: dc_mlx5\n#         Device: mlx5_0:1\n# Memory domain: cuda_cpy\n#     Component: cuda_cpy\n#         memory types: host (reg), cuda (access,alloc,reg,detect,dmabuf), cuda-managed (access,alloc,reg,cache,detect)\n#      Transport: cuda_copy\n#         Device: cuda\n#           Type: accelerator\n# Memory domain: mlx5_1\n#     Component: ib\n#   < no supported devices found >\n#\n# Connection manager: rdmacm\n#      max_conn_priv: 54 bytes\n";

    #[test]
    fn domains_transports_memory_types() {
        let u = parse_ucx_info(EXCERPT);
        assert_eq!(u.memory_domains.len(), 3);
        let ib = &u.memory_domains[0];
        assert_eq!(ib.component.as_deref(), Some("ib"));
        assert_eq!(ib.memory_types, vec!["host"]);
        assert_eq!(ib.transports.len(), 2);
        assert_eq!(ib.transports[0].name, "rc_mlx5");
        assert_eq!(ib.transports[0].device.as_deref(), Some("mlx5_0:1"));
        assert_eq!(ib.transports[0].dev_type.as_deref(), Some("network"));
        let cuda = &u.memory_domains[1];
        assert_eq!(cuda.memory_types, vec!["host", "cuda", "cuda-managed"]);
        assert!(u.has_transport(|t| t == "cuda_copy"));
        assert!(u.memory_domains[2].no_devices);
        assert!(u.memory_domains[2].transports.is_empty());
    }

    #[test]
    fn lowercase_component_of_older_ucx() {
        let u = parse_ucx_info("# Memory domain: mlx5_0\n#            component: ib\n");
        assert_eq!(u.memory_domains[0].component.as_deref(), Some("ib"));
        assert!(parse_ucx_info("ucx_info: command not found").memory_domains.is_empty());
    }
}
