//! Reading UCX and NCCL variable values (`UCX_TLS` and transport names are read with
//! `icb_core::fabric`).

/// `UCX_NET_DEVICES` entries that are not `device:port` (or `all`, or a bare netdev name).
pub fn net_device_problems(value: &str) -> Vec<String> {
    let v = value.trim();
    if v.eq_ignore_ascii_case("all") {
        return Vec::new();
    }
    let mut problems = Vec::new();
    for entry in v.split(',') {
        let e = entry.trim();
        if e.is_empty() {
            problems.push("empty entry".to_string());
            continue;
        }
        if e != entry && !entry.is_empty() {
            problems.push(format!("`{entry}` has spaces"));
            continue;
        }
        let name_ok = |n: &str| !n.is_empty() && n.chars().all(|c| c.is_ascii_alphanumeric() || "_-.".contains(c));
        match e.split_once(':') {
            Some((dev, port)) => {
                if !name_ok(dev) {
                    problems.push(format!("`{e}`: bad device name"));
                } else if !port.parse::<u32>().is_ok_and(|p| p >= 1) {
                    problems.push(format!("`{e}`: port must be a number from 1"));
                }
            }
            None => {
                let rdma_dev = [
                    "mlx4_", "mlx5_", "bnxt_re", "irdma", "efa_", "rocep", "qedr", "hfi1_", "erdma",
                ]
                .iter()
                .any(|p| e.starts_with(p));
                if !name_ok(e) {
                    problems.push(format!("`{e}`: bad device name"));
                } else if rdma_dev {
                    problems.push(format!("`{e}`: an RDMA device needs its port (`{e}:1`)"));
                }
            }
        }
    }
    problems
}

pub fn is_truthy(v: &str) -> bool {
    matches!(
        v.trim().to_ascii_lowercase().as_str(),
        "1" | "y" | "yes" | "true" | "on"
    )
}

pub fn is_falsy(v: &str) -> bool {
    matches!(
        v.trim().to_ascii_lowercase().as_str(),
        "0" | "n" | "no" | "false" | "off" | ""
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn net_devices() {
        assert!(net_device_problems("mlx5_0:1,mlx5_1:1").is_empty());
        assert!(net_device_problems("all").is_empty());
        assert!(net_device_problems("eth0").is_empty());
        assert_eq!(net_device_problems("mlx5_0").len(), 1);
        assert_eq!(net_device_problems("mlx5_0:x").len(), 1);
        assert_eq!(net_device_problems("mlx5_0:1,,mlx5_1:1").len(), 1);
        assert_eq!(net_device_problems("mlx5_0:1; mlx5_1:1").len(), 1);
    }
}
