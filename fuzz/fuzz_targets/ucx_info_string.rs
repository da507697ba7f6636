//! UCX's protocol info string (`ucp_request_query`'s text, both UCX formats) and UCX_PROTO_INFO
//! table rows, through the classifier the UCX engine uses: `parse_protocol_info`,
//! `strip_estimates`, `classify`, `describe`. Property: the stripped text is no longer than the
//! input; the classification's lanes come from the text.
#![no_main]

use icb_core::classify::{classify, describe, join_lanes, parse_protocol_info, strip_estimates};
use icb_core::{MemoryPair, TestKind};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    for line in text.lines().take(16) {
        assert!(
            strip_estimates(line).len() <= line.len(),
            "strip_estimates grew '{line}'"
        );
        let info = parse_protocol_info(line);
        if let Some(p) = &info {
            let _ = join_lanes(&p.transports);
        }
        for mem in MemoryPair::ALL {
            let ev = classify(Some(line), &[], mem);
            for lane in &ev.data_path.transports {
                assert!(line.contains(&lane.transport), "lane {lane} not in '{line}'");
            }
            for test in TestKind::ALL {
                let _ = describe(test, mem, 4096, &ev.data_path);
            }
        }
    }
});
