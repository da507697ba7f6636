//! The preflight before a serving engine starts (issue 41 item 3), inside emulated worker pods
//! wired as manifests/examples/preflight-llm-d.yaml wires them: the decode worker's `ic-bench
//! serve` is a native sidecar (an init container with `restartPolicy: Always`), the prefill
//! worker's `ic-bench connect --within 10s` a real init container that the emulated kubelet runs
//! to completion before the engine container, both with the token from the Secret the example
//! names. Its exit code, read back through the API from the pod's `initContainerStatuses`, is the
//! contract: 0 a pass (the engine then starts), 1 a fabric that fails (TCP where shared memory was
//! due), 2 not known (nobody answering, or the deadline cut the cases short), each within its
//! budget; on 1 and 2 the engine never starts (`Init:Error`).

use crate::pair_kube_support as support;

use icb_kube::k8s_openapi::api::apps::v1::Deployment;
use icb_kube::k8s_openapi::api::core::v1::{ContainerStatus, EnvVar, Pod, PodSpec, Secret};
use icb_kube::k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use icb_kube::kube::Api;
use icb_kube::kube::api::{LogParams, PostParams};
use icb_testcluster::{ClusterConfig, Isolation, NodeConfig, TestCluster};
use std::time::{Duration, Instant};
use support::*;

const TOKEN: &str = "preflight-test-token-0123456789";
/// The example's names: the Secret, the containers, the Service the prefill side dials.
const SECRET: &str = "ic-bench-preflight";
const SIDECAR: &str = "ic-bench-serve";
const PREFLIGHT: &str = "ic-bench-preflight";
const ENGINE: &str = "vllm";
const SERVICE_ADDR: &str = "llama-decode-preflight:45150";
/// The preflight's own cases: small, so that a loaded CI machine still fits them in 10 s.
const CASES: &[&str] = &["--tests", "tag_bw,tag_lat", "--sizes", "8,1MiB"];

/// The pod template of the example's Deployment `name`.
fn example_pod_spec(name: &str) -> PodSpec {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("manifests/examples/preflight-llm-d.yaml");
    let text = std::fs::read_to_string(&path).unwrap();
    let docs = icb_kube::yaml::documents(&text).unwrap();
    docs.into_iter()
        .filter(|d| d["kind"] == "Deployment" && d["metadata"]["name"] == name)
        .map(|d| serde_json::from_value::<Deployment>(d).unwrap())
        .find_map(|d| d.spec.template.spec)
        .unwrap_or_else(|| panic!("{name} in {}", path.display()))
}

/// The engine container stands in for vLLM: it says so and stays up.
fn placeholder_engine(spec: &mut PodSpec) {
    let engine = spec.containers.iter_mut().find(|c| c.name == ENGINE).unwrap();
    engine.command = Some(vec!["sh".into(), "-c".into(), "echo engine up; exec sleep 300".into()]);
    engine.args = None;
}

/// `spec` as a pod on `node`.
fn pod(name: &str, node: &str, mut spec: PodSpec) -> Pod {
    spec.node_name = Some(node.into());
    Pod {
        metadata: ObjectMeta {
            name: Some(name.into()),
            ..Default::default()
        },
        spec: Some(spec),
        ..Default::default()
    }
}

fn init_status(p: &Pod, name: &str) -> Option<ContainerStatus> {
    p.status
        .as_ref()?
        .init_container_statuses
        .as_ref()?
        .iter()
        .find(|c| c.name == name)
        .cloned()
}

fn main_status(p: &Pod) -> Option<ContainerStatus> {
    p.status.as_ref()?.container_statuses.as_ref()?.first().cloned()
}

/// What a preflight pod came to, read through the API.
struct Outcome {
    code: i32,
    log: String,
    /// How long the init container ran.
    ran: Duration,
    pod: Pod,
}

struct Workers {
    /// Kept for its life: dropping it stops the emulated cluster and its pods.
    _cluster: TestCluster,
    rt: tokio::runtime::Runtime,
    api: icb_kube::Cluster,
    pods: Api<Pod>,
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
        let (api, pods, secrets) = {
            let _entered = rt.enter();
            let client = cluster.client().unwrap();
            let api = icb_kube::Cluster::from_client(client.clone(), cluster.namespace(), Duration::from_secs(10));
            let pods = Api::namespaced(client.clone(), cluster.namespace());
            let secrets: Api<Secret> = Api::namespaced(client, cluster.namespace());
            (api, pods, secrets)
        };
        // The Secret both sides read the token from (`kubectl create secret generic`).
        let secret = Secret {
            metadata: ObjectMeta {
                name: Some(SECRET.into()),
                ..Default::default()
            },
            string_data: Some([("token".to_string(), TOKEN.to_string())].into()),
            ..Default::default()
        };
        rt.block_on(secrets.create(&PostParams::default(), &secret)).unwrap();
        Workers {
            _cluster: cluster,
            rt,
            api,
            pods,
        }
    }

    fn create(&self, pod: &Pod) {
        self.rt
            .block_on(icb_kube::lifecycle::create_pod(&self.api, pod))
            .unwrap();
    }

    fn get(&self, name: &str) -> Pod {
        self.rt.block_on(self.pods.get(name)).unwrap()
    }

    fn log(&self, pod: &str, container: &str) -> String {
        let params = LogParams {
            container: Some(container.into()),
            ..Default::default()
        };
        self.rt.block_on(self.pods.logs(pod, &params)).unwrap_or_default()
    }

    /// The example's decode worker: its `ic-bench serve` sidecar on a free port (the example's
    /// 45150 could be taken on a shared test machine), then its engine.
    fn decode_worker(&self) -> String {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut spec = example_pod_spec("llama-8b-decode");
        let sidecar = &mut spec.init_containers.as_mut().unwrap()[0];
        assert_eq!(sidecar.name, SIDECAR);
        assert_eq!(sidecar.restart_policy.as_deref(), Some("Always"), "a native sidecar");
        for arg in sidecar.command.iter_mut().flatten() {
            if arg == "0.0.0.0:45150" {
                *arg = format!("0.0.0.0:{port}");
            }
        }
        placeholder_engine(&mut spec);
        let name = "decode-worker";
        self.create(&pod(name, "node-2", spec));
        // Running: the sidecar started, then the engine.
        let (_, ip) = self
            .rt
            .block_on(icb_kube::lifecycle::wait_running(
                &self.api,
                name,
                tokio::time::Instant::now() + Duration::from_secs(30),
            ))
            .unwrap();
        // Listening, not only started: the sidecar's log says so.
        let deadline = Instant::now() + Duration::from_secs(20);
        while !self.log(name, SIDECAR).contains("listening") {
            assert!(Instant::now() < deadline, "the sidecar never listened");
            std::thread::sleep(Duration::from_millis(50));
        }
        let p = self.get(name);
        let sidecar = init_status(&p, SIDECAR).and_then(|s| s.state?.running);
        assert!(sidecar.is_some(), "the sidecar runs beside the engine: {:#?}", p.status);
        format!("{ip}:{port}")
    }

    /// The example's prefill worker with its preflight dialing `peer` (for the Service) with
    /// `args` after the address and `env` added, run until its init container ends. The pod's
    /// restartPolicy is Never, so that a failing preflight stays failed (the example's Deployment
    /// would restart it: `Init:CrashLoopBackOff`, same exit code in lastState).
    fn preflight(&self, name: &str, peer: &str, within: &str, args: &[&str], env: &[(&str, &str)]) -> Outcome {
        let mut spec = example_pod_spec("llama-8b-prefill");
        let check = &mut spec.init_containers.as_mut().unwrap()[0];
        assert_eq!(check.name, PREFLIGHT);
        assert!(check.restart_policy.is_none(), "a plain init container, run to its end");
        let command = check.command.as_mut().unwrap();
        for arg in command.iter_mut() {
            match arg.as_str() {
                SERVICE_ADDR => *arg = peer.to_string(),
                "10s" => *arg = within.to_string(),
                _ => {}
            }
        }
        command.extend(args.iter().map(|a| a.to_string()));
        check
            .env
            .get_or_insert_with(Vec::new)
            .extend(env.iter().map(|(k, v)| EnvVar {
                name: k.to_string(),
                value: Some(v.to_string()),
                ..Default::default()
            }));
        placeholder_engine(&mut spec);
        spec.restart_policy = Some("Never".into());
        self.create(&pod(name, "node-1", spec));
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            let p = self.get(name);
            if let Some(t) = init_status(&p, PREFLIGHT).and_then(|s| s.state?.terminated) {
                let log = self.log(name, PREFLIGHT);
                let ran = match (t.started_at, t.finished_at) {
                    (Some(a), Some(b)) => b.0.duration_since(a.0).unsigned_abs(),
                    _ => panic!("no start or end time: {log}"),
                };
                return Outcome {
                    code: t.exit_code,
                    log,
                    ran,
                    pod: p,
                };
            }
            assert!(Instant::now() < deadline, "preflight pod {name} never ended");
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// The pod after a failing preflight: Failed, its engine never started.
    fn assert_engine_held(&self, name: &str) {
        let deadline = Instant::now() + Duration::from_secs(10);
        let p = loop {
            let p = self.get(name);
            if p.status.as_ref().and_then(|s| s.phase.as_deref()) == Some("Failed") {
                break p;
            }
            assert!(Instant::now() < deadline, "{name} not Failed: {:#?}", p.status);
            std::thread::sleep(Duration::from_millis(50));
        };
        let engine = main_status(&p).and_then(|s| s.state?.waiting?.reason);
        assert_eq!(engine.as_deref(), Some("PodInitializing"), "{:#?}", p.status);
    }

    /// The pod after a passing preflight: its engine starts, after the preflight ended.
    fn assert_engine_started(&self, name: &str) {
        let (p, _) = self
            .rt
            .block_on(icb_kube::lifecycle::wait_running(
                &self.api,
                name,
                tokio::time::Instant::now() + Duration::from_secs(20),
            ))
            .unwrap();
        let ended = init_status(&p, PREFLIGHT)
            .and_then(|s| s.state?.terminated?.finished_at)
            .unwrap();
        let started = main_status(&p).and_then(|s| s.state?.running?.started_at).unwrap();
        assert!(started.0 >= ended.0, "the engine started before the preflight ended");
        let initialized = p
            .status
            .and_then(|s| s.conditions)
            .unwrap_or_default()
            .into_iter()
            .find(|c| c.type_ == "Initialized")
            .map(|c| c.status);
        assert_eq!(initialized.as_deref(), Some("True"));
    }
}

#[test]
fn a_preflight_init_container_passes_fails_on_tcp_and_says_not_known_each_within_its_budget() {
    let w = Workers::start();
    let peer = w.decode_worker();

    let ok = w.preflight("prefill-ok", &peer, "10s", CASES, &[]);
    assert_eq!(ok.code, 0, "{}", ok.log);
    assert!(ok.ran <= Duration::from_secs(11), "ran {:?}: {}", ok.ran, ok.log);
    assert!(ok.log.contains("pass[verdict]"), "{}", ok.log);
    w.assert_engine_started("prefill-ok");
    assert!(w.log("prefill-ok", ENGINE).contains("engine up"));

    // The same pod with UCX told to use TCP only: two pods of one host over TCP fail.
    let tcp = w.preflight("prefill-tcp", &peer, "10s", CASES, &[("UCX_TLS", "tcp")]);
    assert_eq!(tcp.code, 1, "{}", tcp.log);
    assert!(tcp.ran <= Duration::from_secs(11), "ran {:?}: {}", tcp.ran, tcp.log);
    assert!(tcp.log.contains("fail"), "{}", tcp.log);
    let reason = init_status(&tcp.pod, PREFLIGHT).and_then(|s| s.state?.terminated?.reason);
    assert_eq!(reason.as_deref(), Some("Error"), "Init:Error");
    w.assert_engine_held("prefill-tcp");

    // Nobody on that port: not known (2), within the budget's connect share, never a pass.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let nobody = format!("{}:{port}", peer.rsplit_once(':').unwrap().0);
    let alone = w.preflight("prefill-alone", &nobody, "5s", &[], &[]);
    assert_eq!(alone.code, 2, "{}", alone.log);
    assert!(alone.log.contains("cannot reach ic-bench serve"), "{}", alone.log);
    assert!(
        alone.ran <= Duration::from_secs(5),
        "ran {:?}: {}",
        alone.ran,
        alone.log
    );
    w.assert_engine_held("prefill-alone");

    // A case the deadline cuts short: not known, never a pass. Each case is fitted into its share
    // of the budget (a long --warmup too), so the client is told to stall before its case
    // (test-only), as a side stuck in a slow start would; the watchdog must cut it at 3 s.
    let cut = w.preflight(
        "prefill-cut",
        &peer,
        "3s",
        &["--tests", "tag_bw", "--sizes", "64MiB"],
        &[(icb_engine::TEST_CASE_DELAY_ENV, "30000")],
    );
    assert_eq!(cut.code, 2, "{}", cut.log);
    assert!(
        cut.log.contains("only 0 of 1 cases measured within --within 3s"),
        "{}",
        cut.log
    );
    assert!(cut.ran <= Duration::from_secs(5), "ran {:?}: {}", cut.ran, cut.log);
    w.assert_engine_held("prefill-cut");
}
