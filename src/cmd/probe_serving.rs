//! `ic-bench probe serving`: the engines' KV-transfer metrics beside ic-bench's own measurement
//! of the same path (issue 42). Flags here; the reading, translating and judging in icb-serving.

use icb_flags::output::OutputArgs;
use icb_serving::{KvSpec, Options, Source};
use std::path::PathBuf;
use std::time::Duration;

#[derive(clap::Args, Debug, Clone)]
pub struct ServingArgs {
    /// A worker's metrics saved in the Prometheus text format (`curl WORKER/metrics > FILE`); repeatable
    #[arg(long, value_name = "FILE")]
    pub metrics: Vec<PathBuf>,

    /// A worker's metrics endpoint, read once (http://HOST:PORT/metrics); repeatable
    #[arg(long, value_name = "URL")]
    pub endpoint: Vec<String>,

    /// The serving recipe: its prefill/decode workers' pods are listed through the API (read-only)
    /// and each pod's metrics endpoint (container port `metrics`, else the `prometheus.io/port`
    /// annotation) read once; repeatable
    #[arg(long, value_name = "FILE")]
    pub recipe: Vec<String>,

    #[command(flatten)]
    pub cluster: icb_flags::cluster::ClusterArgs,

    /// TensorRT-LLM's KV timing files (rank_R_send.csv / rank_R_recv.csv, or their directory:
    /// TRTLLM_KVCACHE_TIME_OUTPUT_PATH); all given are one deployment's ranks
    #[arg(long, value_name = "FILE|DIR")]
    pub trtllm_csv: Vec<PathBuf>,

    /// A Prometheus server scraping the workers (http://HOST:PORT)
    #[arg(long, value_name = "URL")]
    pub prometheus: Option<String>,

    /// With --prometheus: the window the figures are taken over (a PromQL duration)
    #[arg(long, value_name = "DURATION", default_value = "5m", value_parser = icb_serving::parse_window)]
    pub window: String,

    /// ic-bench's history (pair/gate/sweep --history FILE) holding `pair --kv-shape` runs of the pair
    #[arg(long, value_name = "FILE", requires_all = ["prefill", "decode"])]
    pub history: Option<PathBuf>,

    /// The prefill node, as the history names it
    #[arg(long, value_name = "NODE")]
    pub prefill: Option<String>,

    /// The decode node, as the history names it
    #[arg(long, value_name = "NODE")]
    pub decode: Option<String>,

    /// Ranks on the initiating side (vLLM: the decode worker's TP, whose transfers vLLM pools) [default: --decode-tp, else 1]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1024))]
    pub tp: Option<u32>,

    /// read (decode pulls: vLLM, NIXL) or write (prefill pushes: SGLang, TensorRT-LLM) [default: each engine's own]
    #[arg(long, value_name = "OP", value_parser = ["read", "write"])]
    pub kv_op: Option<String>,

    /// One rank's NIC line rate in Gb/s (e.g. 400): an engine figure above it is a metric bug
    #[arg(long, value_name = "GBITS", value_parser = icb_serving::parse_line_rate)]
    pub line_rate: Option<f64>,

    /// The model's KV geometry, as `pair --kv-shape` takes it: matches the history's runs exactly
    /// and gives the exact command for a missing baseline
    #[arg(long, value_name = "MODEL|CONFIG")]
    pub kv_shape: Option<String>,

    #[command(flatten)]
    pub geometry: icb_flags::kv::KvGeometryArgs,

    /// Deadline of each HTTP request and of the history's lock
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = icb_flags::common::parse_duration)]
    pub timeout: Duration,

    #[command(flatten)]
    pub output: OutputArgs,
}

impl ServingArgs {
    /// The geometry of `--kv-shape …`, through icb-kv (its errors are one line).
    fn kv(&self) -> anyhow::Result<Option<KvSpec>> {
        let Some(model) = &self.kv_shape else {
            return Ok(None);
        };
        let kv = icb_flags::kv::KvArgs {
            kv_shape: Some(model.clone()),
            geometry: self.geometry.clone(),
            ..Default::default()
        };
        let request = icb_kv::KvRequest::from_flags(&kv.flags(None)?)?;
        Ok(Some(KvSpec::of_request(model, &request)))
    }

    fn options(&self) -> anyhow::Result<Options> {
        let mut sources: Vec<Source> = self.metrics.iter().cloned().map(Source::MetricsFile).collect();
        sources.extend(self.endpoint.iter().cloned().map(Source::Endpoint));
        if !self.trtllm_csv.is_empty() {
            sources.push(Source::TrtllmCsv(self.trtllm_csv.clone()));
        }
        sources.extend(self.prometheus.iter().cloned().map(Source::Prometheus));
        if !self.recipe.is_empty() {
            let others_given = !sources.is_empty();
            // The recipe's worker pods (icb_serving::pods): read-only, through the API.
            let found = super::runtime()?.block_on(async {
                let cluster = self.cluster.connect().await?;
                Ok::<_, anyhow::Error>(icb_serving::pods::discover(&self.recipe, &cluster, others_given).await?)
            })?;
            sources.extend(found);
        }
        let kv = self.kv()?;
        let decode_tp = self.geometry.decode_tp.as_deref().and_then(|t| t.parse().ok());
        Ok(Options {
            sources,
            window: self.window.clone(),
            history: self.history.clone(),
            prefill: self.prefill.clone(),
            decode: self.decode.clone(),
            tp: self.tp.or(decode_tp).unwrap_or(1),
            op: self.kv_op.clone(),
            line_rate_gbit: self.line_rate,
            kv,
            deadline: self.timeout,
        })
    }
}

pub fn run(a: ServingArgs) -> anyhow::Result<i32> {
    let output = a.output.resolve(icb_report::ReportKind::Probe)?;
    let report = icb_serving::probe_serving(&a.options()?)?;
    super::probe::emit(&report, &output)
}
