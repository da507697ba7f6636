//! The rail map and the NIC counters on a real emulated node with rails (icb_isolate; root only,
//! CI runs as root): the recorded tree names the NICs, the node's own sysfs counts their bytes.

use icb_isolate::{Fabric, FabricOptions, RunTag, privileged_tests_enabled, run_in_netns};
use icb_probe::counters::{counter_device, snapshot};
use icb_probe::{GatherOptions, LocalSource, gather};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::Duration;

#[test]
fn bytes_over_an_emulated_rail_are_attributed_to_that_rails_nic() {
    if !privileged_tests_enabled("bytes_over_an_emulated_rail_are_attributed_to_that_rails_nic") {
        return;
    }
    let tag = RunTag::new("icbpr").unwrap();
    let opts = FabricOptions {
        rails: 2,
        ..Default::default()
    };
    let fabric = Fabric::create_with(tag, &["a", "b"], opts).unwrap();
    let tree = fabric.rail_tree("a").expect("a tree");
    let src = LocalSource::replay(&tree);
    let gather_opts = GatherOptions {
        tool_timeout: Duration::from_secs(5),
        counter_interval: Duration::ZERO,
    };
    let map = icb_probe::rails::rail_map(&src, &gather(&src, &gather_opts)).expect("a rail map");
    assert_eq!(map.rails.len(), 2);
    let sys_a = fabric.sys_root("a").unwrap();
    // mlx5_k has no RDMA counters in the node's real sysfs: its netdev carries the bytes.
    let devices: Vec<Option<String>> = map.rails.iter().map(|r| counter_device(&sys_a, &r.nic)).collect();
    assert_eq!(devices, vec![Some("rail0".to_string()), Some("rail1".to_string())]);

    const BYTES: usize = 2 << 20;
    let before = snapshot(&sys_a);
    assert!(before.unreadable.is_empty(), "{:?}", before.unreadable);
    let to = fabric.rail_ip("b", 1).unwrap();
    let listener = run_in_netns(fabric.netns("b").unwrap(), || TcpListener::bind((to, 0)))
        .unwrap()
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let mut out = run_in_netns(fabric.netns("a").unwrap(), || {
        TcpStream::connect_timeout(&addr, Duration::from_secs(2))
    })
    .unwrap()
    .unwrap();
    let (mut conn, _) = listener.accept().unwrap();
    conn.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let writer = std::thread::spawn(move || out.write_all(&vec![1u8; BYTES]).unwrap());
    let (mut got, mut buf) = (0, vec![0u8; 64 * 1024]);
    while got < BYTES {
        let n = conn.read(&mut buf).unwrap();
        assert!(n > 0, "closed after {got} B");
        got += n;
    }
    writer.join().unwrap();
    let traffic = before.traffic_until(&snapshot(&sys_a));
    let bytes = |dev: &str| traffic.iter().find(|t| t.device == dev).map_or(0, |t| t.tx_bytes);
    assert!(bytes("rail1") >= BYTES as u64, "{traffic:?}");
    assert!(bytes("rail0") + bytes("eth0") < 64 * 1024, "{traffic:?}");
    fabric.teardown().unwrap();
}
