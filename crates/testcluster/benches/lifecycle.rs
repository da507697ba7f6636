//! Orchestration overhead of the emulated cluster: how long a pod takes from create to Running,
//! to its exit verdict, and to being deleted, with host processes and with namespaces (root).
//! Prints milliseconds; no thresholds (ic-bench's own benchmark holds the 3 s pair target).

use std::time::{Duration, Instant};

use icb_testcluster::{ClusterConfig, Isolation, TestCluster};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::{DeleteParams, PostParams};
use kube::runtime::wait::await_condition;

fn pod(name: &str, script: &str) -> Pod {
    serde_json::from_value(serde_json::json!({
        "metadata": {"name": name},
        "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "x", "command": ["sh", "-c", script]}]}
    }))
    .expect("static pod")
}

fn phase(p: Option<&Pod>) -> String {
    p.and_then(|p| p.status.as_ref())
        .and_then(|s| s.phase.clone())
        .unwrap_or_default()
}

async fn one_round(pods: &Api<Pod>, name: &str) -> Result<[Duration; 3], String> {
    let t0 = Instant::now();
    pods.create(&PostParams::default(), &pod(name, "sleep 0.2"))
        .await
        .map_err(|e| e.to_string())?;
    let wait = |cond: fn(Option<&Pod>) -> bool| {
        tokio::time::timeout(Duration::from_secs(20), await_condition(pods.clone(), name, cond))
    };
    wait(|p| phase(p) == "Running")
        .await
        .map_err(|_| "no Running in 20 s")?
        .map_err(|e| e.to_string())?;
    let running = t0.elapsed();
    wait(|p| matches!(phase(p).as_str(), "Succeeded" | "Failed"))
        .await
        .map_err(|_| "no exit in 20 s")?
        .map_err(|e| e.to_string())?;
    let done = t0.elapsed();
    pods.delete(
        name,
        &DeleteParams {
            grace_period_seconds: Some(0),
            ..Default::default()
        },
    )
    .await
    .map_err(|e| e.to_string())?;
    Ok([running, done, t0.elapsed()])
}

async fn bench(isolation: Isolation) -> Result<(), String> {
    let cluster = TestCluster::start(ClusterConfig::two_gpu_nodes().isolation(isolation))
        .await
        .map_err(|e| e.to_string())?;
    let pods: Api<Pod> = Api::default_namespaced(cluster.client().map_err(|e| e.to_string())?);
    let mut rows = Vec::new();
    for i in 0..5 {
        rows.push(one_round(&pods, &format!("bench-{i}")).await?);
    }
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let avg = |k: usize| rows.iter().map(|r| ms(r[k])).sum::<f64>() / rows.len() as f64;
    println!(
        "{isolation:?}: create->Running {:.1} ms, ->exit verdict {:.1} ms (incl. 200 ms sleep), ->deleted {:.1} ms (mean of {})",
        avg(0),
        avg(1),
        avg(2),
        rows.len()
    );
    let t = Instant::now();
    cluster.shutdown().await;
    println!("{isolation:?}: shutdown {:.1} ms", ms(t.elapsed()));
    Ok(())
}

#[tokio::main]
async fn main() {
    if let Err(e) = bench(Isolation::Host).await {
        eprintln!("host bench failed: {e}");
        std::process::exit(1);
    }
    if nix::unistd::geteuid().is_root() {
        if let Err(e) = bench(Isolation::Namespaces).await {
            eprintln!("namespace bench failed: {e}");
            std::process::exit(1);
        }
    } else {
        println!("Namespaces: skipped (needs root)");
    }
}
