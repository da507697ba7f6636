//! `nvidia-smi topo -m` output.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let t = icb_probe::parse::parse_topo(&text);
    for g in t.gpus() {
        for n in t.nics() {
            let _ = t.link(g, n);
            let _ = t.nic_device(n);
        }
    }
});
