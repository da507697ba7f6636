//! `UCX_NET_DEVICES`, `NCCL_IB_HCA`, `NCCL_SOCKET_IFNAME` syntaxes.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    use icb_probe::envspec::*;
    let _ = parse_ucx_net_devices(&text);
    let _ = parse_nccl_ib_hca(&text).selects("mlx5_1", 1);
    let _ = socket_ifname_matches(&text, "eth0");
});
