//! The preflight before a serving engine starts (issue 41 item 3), inside emulated worker pods:
//! a decode worker's `ic-bench serve` sidecar and a prefill worker's `ic-bench connect --within
//! 10s` (what docs/kubernetes.md wires as an init container; the emulated kubelet runs it as the
//! pod's container, which ends with the same exit code an init container would). Its exit code is
//! the contract: 0 a pass, 1 a fabric that fails (TCP where shared memory was due), 2 not known
//! (nobody answering, or the deadline cut the cases short); each within its budget.

use crate::pair_kube_support as support;

use icb_kube::k8s_openapi::api::core::v1::{Container, EnvVar, Pod, PodSpec};
use icb_kube::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use icb_testcluster::{ClusterConfig, Isolation, NodeConfig, TestCluster};
use std::time::{Duration, Instant};
use support::*;

const TOKEN: &str = "preflight-test-token-0123456789";
/// The preflight's own cases: small, so that a loaded CI machine still fits them in 10 s.
const CASES: &[&str] = &[
    "--tests",
    "tag_bw,tag_lat",
    "--sizes",
    "8,1MiB",
    "--memory",
    "host-host",
];

fn pod(name: &str, node: &str, args: &[&str], env: &[(&str, &str)]) -> Pod {
    let mut vars = vec![EnvVar {
        name: "IC_BENCH_TOKEN".into(),
        value: Some(TOKEN.into()),
        ..Default::default()
    }];
    vars.extend(env.iter().map(|(k, v)| EnvVar {
        name: k.to_string(),
        value: Some(v.to_string()),
        ..Default::default()
    }));
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        spec: Some(PodSpec {
            node_name: Some(node.into()),
            restart_policy: Some("Never".into()),
            containers: vec![Container {
                name: "main".into(),
                image: Some("ic-bench:test".into()),
                command: Some(
                    std::iter::once("ic-bench")
                        .chain(args.iter().copied())
                        .map(String::from)
                        .collect(),
                ),
                env: Some(vars),
                ..Default::default()
            }],
            ..Default::default()
        }),
        ..Default::default()
    }
}

struct Workers {
    cluster: TestCluster,
    rt: tokio::runtime::Runtime,
    api: icb_kube::Cluster,
}

impl Workers {
    fn start() -> Workers {
        let config = ClusterConfig::new()
            .node(NodeConfig::new("node-1"))
            .node(NodeConfig::new("node-2"))
            .program(BIN)
            .isolation(Isolation::Host);
        let cluster = TestCluster::start_blocking(config).unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        // The client's worker task lives on this runtime (it runs while `block_on` does).
        let api = {
            let _entered = rt.enter();
            icb_kube::Cluster::from_client(cluster.client().unwrap(), cluster.namespace(), Duration::from_secs(10))
        };
        Workers { cluster, rt, api }
    }

    fn create(&self, pod: &Pod) {
        self.rt
            .block_on(icb_kube::lifecycle::create_pod(&self.api, pod))
            .unwrap();
    }

    /// The decode worker's sidecar: `ic-bench serve` on a free port, as long as the test runs.
    fn decode_sidecar(&self) -> String {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let listen = format!("0.0.0.0:{port}");
        self.create(&pod(
            "decode-worker",
            "node-2",
            &["serve", "--listen", &listen, "--idle-timeout", "120s"],
            &[],
        ));
        let name = "decode-worker";
        self.rt
            .block_on(icb_kube::lifecycle::wait_running(
                &self.api,
                name,
                tokio::time::Instant::now() + Duration::from_secs(30),
            ))
            .unwrap();
        let ip = self
            .cluster
            .pod(self.cluster.namespace(), name)
            .unwrap()
            .status
            .unwrap()
            .pod_ip
            .unwrap();
        // Listening, not only started: the log says so.
        let deadline = Instant::now() + Duration::from_secs(20);
        while !self
            .cluster
            .pod_log(self.cluster.namespace(), name, "main")
            .unwrap_or_default()
            .contains("listening")
        {
            assert!(Instant::now() < deadline, "the sidecar never listened");
            std::thread::sleep(Duration::from_millis(50));
        }
        format!("{ip}:{port}")
    }

    /// Runs a preflight pod to its end: (exit code, its log, how long its container ran).
    fn preflight(&self, name: &str, args: &[&str], env: &[(&str, &str)]) -> (i32, String, Duration) {
        let mut all = vec!["connect"];
        all.extend_from_slice(args);
        self.create(&pod(name, "node-1", &all, env));
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let p = self.cluster.pod(self.cluster.namespace(), name).unwrap();
            let terminated = p
                .status
                .as_ref()
                .and_then(|s| s.container_statuses.as_ref())
                .and_then(|cs| cs.first())
                .and_then(|c| c.state.as_ref())
                .and_then(|s| s.terminated.clone());
            if let Some(t) = terminated {
                let log = self
                    .cluster
                    .pod_log(self.cluster.namespace(), name, "main")
                    .unwrap_or_default();
                let ran = match (t.started_at, t.finished_at) {
                    (Some(a), Some(b)) => b.0.duration_since(a.0).unsigned_abs(),
                    _ => panic!("no start or end time: {log}"),
                };
                return (t.exit_code, log, ran);
            }
            assert!(Instant::now() < deadline, "preflight pod {name} never ended");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

#[test]
fn a_preflight_pod_passes_fails_on_tcp_and_says_not_known_each_within_its_budget() {
    let w = Workers::start();
    let peer = w.decode_sidecar();
    let preflight = |extra: &[&str]| -> Vec<String> {
        ["--within", "10s", peer.as_str()]
            .iter()
            .chain(extra)
            .chain(CASES)
            .map(|s| s.to_string())
            .collect()
    };
    let args = preflight(&[]);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();

    let (code, log, ran) = w.preflight("prefill-ok", &args, &[]);
    assert_eq!(code, 0, "{log}");
    assert!(ran <= Duration::from_secs(11), "ran {ran:?}: {log}");
    assert!(log.contains("pass[verdict]"), "{log}");

    // The same pod with UCX told to use TCP only: two pods of one host over TCP fail.
    let (code, log, ran) = w.preflight("prefill-tcp", &args, &[("UCX_TLS", "tcp")]);
    assert_eq!(code, 1, "{log}");
    assert!(ran <= Duration::from_secs(11), "ran {ran:?}: {log}");
    assert!(log.contains("fail"), "{log}");

    // Nobody on that port: not known (2), within the budget's connect share, never a pass.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let nobody = format!("{}:{port}", peer.rsplit_once(':').unwrap().0);
    let started = Instant::now();
    let (code, log, ran) = w.preflight("prefill-alone", &["--within", "5s", &nobody], &[]);
    assert_eq!(code, 2, "{log}");
    assert!(log.contains("cannot reach ic-bench serve"), "{log}");
    assert!(
        ran <= Duration::from_secs(5),
        "ran {ran:?} ({:?} in all): {log}",
        started.elapsed()
    );

    // Cases the deadline cuts short (a warmup that cannot end in 3 s): not known, never a pass.
    let (code, log, ran) = w.preflight(
        "prefill-cut",
        &[
            "--within",
            "3s",
            &peer,
            "--tests",
            "tag_bw",
            "--sizes",
            "64MiB",
            "--memory",
            "host-host",
            "--warmup",
            "100000",
        ],
        &[],
    );
    assert_eq!(code, 2, "{log}");
    assert!(log.contains("only 0 of 1 cases measured within --within 3s"), "{log}");
    assert!(ran <= Duration::from_secs(5), "ran {ran:?}: {log}");
}
