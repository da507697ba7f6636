//! The pod probe script output, through gather, the node checks and detect-env.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    // What a pod printed, all the way to checks and detect-env.
    if let Ok(snap) = icb_probe::remote::parse_snapshot("pod/fuzz", &text) {
        let opts = icb_probe::GatherOptions {
            tool_timeout: std::time::Duration::from_millis(1),
            counter_interval: std::time::Duration::from_millis(1),
        };
        let facts = icb_probe::gather(&snap, &opts);
        let env = icb_probe::TransportEnv::new("fuzz", snap.env.clone());
        let x = icb_probe::NodeExpectations {
            env: env.clone(),
            rdma_required: true,
        };
        let _ = icb_probe::node_checks(&facts, &x);
        let _ = icb_probe::detect_env(&snap, &env);
    }
});
