//! Unit tests of the control messages: round trips, bounds, older peers' replies.

use super::*;

#[test]
fn hex_round_trip_and_rejections() {
    let h = HexBytes(vec![0, 1, 0xab, 0xff]);
    let s = serde_json::to_string(&h).unwrap();
    assert_eq!(s, "\"0001abff\"");
    assert_eq!(serde_json::from_str::<HexBytes>(&s).unwrap(), h);
    assert!(serde_json::from_str::<HexBytes>("\"abc\"").is_err());
    assert!(serde_json::from_str::<HexBytes>("\"zz\"").is_err());
}

#[test]
fn bounds_peer_controlled_values() {
    let setup = |size, window| {
        Message::Setup(CaseSetup {
            test: TestKind::TagBw,
            memory: MemoryPair::HOST_HOST,
            size,
            window,
            seed: 1,
            blocks: 1,
            untouched: false,
            kv: None,
            cuda_alloc: Default::default(),
        })
    };
    assert!(setup(8, 32).validate().is_ok());
    assert!(setup(0, 32).validate().is_err());
    assert!(setup(MAX_MESSAGE_SIZE + 1, 32).validate().is_err());
    assert!(setup(8, 0).validate().is_err());
    assert!(setup(8, MAX_WINDOW + 1).validate().is_err());
    let phase = |n| Message::Phase {
        kind: PhaseKind::Measure,
        iterations: n,
        timeout_s: 10.0,
        window: None,
    };
    let blocks = |test, size, blocks| {
        Message::Setup(CaseSetup {
            test,
            memory: MemoryPair::HOST_HOST,
            size,
            window: 1,
            seed: 1,
            blocks,
            untouched: false,
            kv: None,
            cuda_alloc: Default::default(),
        })
    };
    assert!(blocks(TestKind::PutBw, 16 << 10, 64).validate().is_ok());
    assert!(blocks(TestKind::PutBw, 16 << 10, 0).validate().is_err());
    assert!(blocks(TestKind::GetBw, 8, MAX_BLOCKS + 1).validate().is_err());
    assert!(
        blocks(TestKind::TagBw, 8, 2).validate().is_err(),
        "tag cases have one block"
    );
    assert!(
        blocks(TestKind::PutBw, 1 << 30, 64).validate().is_err(),
        "span over 16 GiB"
    );
    let windowed = |w| Message::Phase {
        kind: PhaseKind::Measure,
        iterations: 1,
        timeout_s: 10.0,
        window: Some(w),
    };
    assert!(windowed(128).validate().is_ok());
    assert!(windowed(0).validate().is_err() && windowed(MAX_WINDOW + 1).validate().is_err());
    assert!(phase(0).validate().is_err());
    assert!(phase(MAX_PHASE_ITERATIONS + 1).validate().is_err());
    let bad_timeout = Message::Phase {
        kind: PhaseKind::Warmup,
        iterations: 1,
        timeout_s: f64::NAN,
        window: None,
    };
    assert!(bad_timeout.validate().is_err());
    assert_eq!(
        Message::Error {
            message: "x".repeat(MAX_TEXT + 1)
        }
        .validate(),
        Err(OutOfBounds::TooLong {
            what: "error message",
            len: MAX_TEXT + 1,
            max: MAX_TEXT
        })
    );
}

#[test]
fn a_kv_request_is_bounded_in_descriptors_not_only_in_bytes() {
    let kv = |len, count| {
        Message::Setup(CaseSetup {
            test: TestKind::GetBw,
            memory: MemoryPair::HOST_HOST,
            size: len,
            window: 1,
            seed: 1,
            blocks: 1,
            untouched: false,
            kv: Some(icb_core::KvLayout::spaced(len, count)),
            cuda_alloc: Default::default(),
        })
    };
    assert!(kv(16 << 10, 65_536).validate().is_ok());
    assert!(kv(1, MAX_KV_DESCRIPTORS).validate().is_ok());
    // 1-byte descriptors fitting 16 GiB buffers: bounded by count before anything is built.
    let err = kv(1, MAX_KV_DESCRIPTORS + 1).validate().unwrap_err().to_string();
    assert!(err.contains("KV descriptors (limit 4194304)"), "{err}");
}

#[test]
fn a_receive_view_travels_in_finished_and_is_bounded() {
    let view = icb_core::ProtocolView {
        side: icb_core::ProtocolSide::Target,
        protocol: "rendezvous zero-copy flushed write".into(),
        transports: vec![icb_core::Lane {
            transport: "cma".into(),
            device: "memory".into(),
        }],
        class: icb_core::TransportClass::Cma,
        depends_on_peer: true,
    };
    let sent = Message::Finished {
        verified: true,
        detail: None,
        receive: Some(view.clone()),
        health: None,
    };
    let back: Message = serde_json::from_str(&serde_json::to_string(&sent).unwrap()).unwrap();
    assert!(matches!(&back, Message::Finished { receive: Some(v), .. } if *v == view));
    assert!(back.validate().is_ok());
    // An older server's reply has no view.
    let old: Message = serde_json::from_str(r#"{"type":"finished","verified":true,"detail":null}"#).unwrap();
    assert!(matches!(old, Message::Finished { receive: None, .. }));
    let long = icb_core::ProtocolView {
        protocol: "x".repeat(MAX_TEXT + 1),
        ..view.clone()
    };
    let too_many = icb_core::ProtocolView {
        transports: vec![view.transports[0].clone(); MAX_VIEW_LANES + 1],
        ..view
    };
    for bad in [long, too_many] {
        let m = Message::Finished {
            verified: true,
            detail: None,
            receive: Some(bad),
            health: None,
        };
        assert!(m.validate().is_err());
    }
}

#[test]
fn unknown_enum_values_are_rejected() {
    let bad = r#"{"type":"setup","test":"tag_sync","memory":{"initiator":"host","target":"host"},"size":8,"window":1,"seed":0}"#;
    assert!(serde_json::from_str::<Message>(bad).is_err());
    let good = bad.replace("tag_sync", "tag_bw");
    assert!(serde_json::from_str::<Message>(&good).is_ok());
}

#[test]
fn the_allocation_mode_is_additive_on_the_wire() {
    let setup = |cuda_alloc| {
        Message::Setup(CaseSetup {
            test: TestKind::GetBw,
            memory: MemoryPair {
                initiator: icb_core::MemoryType::Cuda,
                target: icb_core::MemoryType::Cuda,
            },
            size: 8,
            window: 1,
            seed: 1,
            blocks: 1,
            untouched: false,
            kv: None,
            cuda_alloc,
        })
    };
    // Legacy (the default) stays off the wire, so an older server sees the frames it knows.
    let legacy = serde_json::to_string(&setup(icb_core::CudaAllocMode::Legacy)).unwrap();
    assert!(!legacy.contains("cuda_alloc"), "{legacy}");
    let vmm = serde_json::to_string(&setup(icb_core::CudaAllocMode::Vmm)).unwrap();
    assert!(vmm.contains(r#""cuda_alloc":"vmm""#), "{vmm}");
    assert_eq!(
        serde_json::from_str::<Message>(&vmm).unwrap(),
        setup(icb_core::CudaAllocMode::Vmm)
    );
    // An older server's ready carries no allocation: read as not said, never as legacy memory.
    let ready: Message = serde_json::from_str(r#"{"type":"ready","remote_addr":0,"rkey":""}"#).unwrap();
    assert!(matches!(ready, Message::Ready(CaseReady { cuda_alloc: None, .. })));
    let newer: Message = serde_json::from_str(
        r#"{"type":"ready","remote_addr":0,"rkey":"","cuda_alloc":{"mode":"vmm","legacy_ipc":"no"}}"#,
    )
    .unwrap();
    let Message::Ready(r) = newer else { panic!("a ready") };
    assert_eq!(r.cuda_alloc.map(|a| a.legacy_ipc), Some(icb_core::LegacyIpc::No));
}

#[test]
fn a_health_reading_is_additive_on_the_wire_and_bounded() {
    use icb_core::rails::nic_health::{HealthSnapshot, PortHealth};
    let port = |n: usize| PortHealth {
        device: "mlx5_0:1".into(),
        values: (0..n).map(|i| (format!("c{i}"), i as u64)).collect(),
        ..Default::default()
    };
    let ready = |health| {
        Message::Ready(CaseReady {
            health,
            ..CaseReady::default()
        })
    };
    let read = HealthSnapshot {
        ports: vec![port(3)],
        unreadable: None,
    };
    let sent = ready(Some(read.clone()));
    let back: Message = serde_json::from_str(&serde_json::to_string(&sent).unwrap()).unwrap();
    assert_eq!(back, sent);
    assert!(back.validate().is_ok());
    // Without a reading nothing new goes on the wire (an older client reads the frame it knows).
    assert!(!serde_json::to_string(&ready(None)).unwrap().contains("health"));
    let finished = |health| Message::Finished {
        verified: true,
        detail: None,
        receive: None,
        health,
    };
    assert!(finished(Some(read)).validate().is_ok());
    let many_ports = HealthSnapshot {
        ports: vec![port(1); MAX_HEALTH_PORTS + 1],
        unreadable: None,
    };
    let many_counters = HealthSnapshot {
        ports: vec![port(MAX_HEALTH_COUNTERS + 1)],
        unreadable: None,
    };
    let long_reason = HealthSnapshot::unread("x".repeat(MAX_TEXT + 1));
    for bad in [many_ports, many_counters, long_reason] {
        assert!(ready(Some(bad.clone())).validate().is_err());
        assert!(finished(Some(bad)).validate().is_err());
    }
}
