//! `ic-bench sweep`: many node pairs through the pair pipeline (one `run_pair` with its own
//! `KubeLauncher` and run id per pair, the pairs of a round concurrently), the results file
//! rewritten atomically after every pair, a second pass on suspects, and node verdicts.
//! Scheduling and scoring are `icb_sweep`'s (pure, tested without a cluster).

use super::interrupt::Interrupt;
use super::kube_args::ClusterArgs;
use super::sweep_run::{PairJob, Sweeper};
use anyhow::Context as _;
use icb_core::model::{MemoryPair, TestKind};
use icb_kube::k8s_openapi::api::core::v1::Node;
use icb_kube::kube::api::ListParams;
use icb_sweep::results::{SWEEP_SCHEMA, SweepResults, write_atomic};
use icb_sweep::schedule::Schedule;
use icb_sweep::score::{self, NodeStatus};
use std::path::PathBuf;
use std::time::Duration;

#[derive(clap::Args, Debug, Clone)]
pub struct Args {
    #[command(flatten)]
    pub cluster: ClusterArgs,

    #[command(flatten)]
    pub devices: super::devices::DeviceArgs,

    /// Nodes to qualify, by label selector [default: every Ready, schedulable node]
    #[arg(short = 'l', long = "selector", value_name = "SELECTOR", conflicts_with = "nodes")]
    pub selector: Option<String>,

    /// Nodes to qualify, by name (comma-separated)
    #[arg(long, value_delimiter = ',', value_name = "A,B,C")]
    pub nodes: Vec<String>,

    /// Prefill pool (label selector); with --decode-pool, pairs every prefill node with every decode node
    #[arg(long, value_name = "SELECTOR", requires = "decode_pool")]
    pub prefill_pool: Option<String>,

    /// Decode pool (label selector)
    #[arg(long, value_name = "SELECTOR", requires = "prefill_pool")]
    pub decode_pool: Option<String>,

    /// all-pairs, ring, bipartite, intra-node, or linear (ring + --matchings random perfect matchings) [default: all-pairs; bipartite with pools]
    #[arg(long, value_parser = ["all-pairs", "ring", "bipartite", "intra-node", "linear"])]
    pub schedule: Option<String>,

    /// Random perfect matchings on top of the ring for --schedule linear
    #[arg(long, default_value_t = 2)]
    pub matchings: usize,

    /// Seed of the linear schedule's matchings (the plan is written to the results file)
    #[arg(long, default_value_t = 1)]
    pub seed: u64,

    /// At most this many pairs at once (0: a whole round)
    #[arg(long, default_value_t = 0)]
    pub max_concurrent: usize,

    /// Time budget of one pair: scheduling, start, transfer
    #[arg(long, value_name = "DURATION", default_value = "120s", value_parser = super::common::parse_duration)]
    pub pair_timeout: Duration,

    /// Tests per pair (the short default profile: RMA put/get + tag latency)
    #[arg(long, value_delimiter = ',', default_value = "put_bw,get_bw,tag_lat")]
    pub tests: Vec<TestKind>,

    /// Message sizes per pair
    #[arg(long, value_delimiter = ',', default_value = "64KiB,1MiB", value_parser = super::common::parse_size_arg)]
    pub sizes: Vec<u64>,

    /// Memory pairs per pair (cuda-cuda on GPU nodes)
    #[arg(long, value_delimiter = ',', default_value = "host-host")]
    pub memory: Vec<MemoryPair>,

    /// Longest measurement of one case, seconds
    #[arg(long, default_value_t = 1.0)]
    pub max_time: f64,

    #[command(flatten)]
    pub expect: super::common::ExpectArgs,

    /// Bench image [default: ghcr.io/ic-bench/ic-bench:<this version>]
    #[arg(long, value_name = "IMAGE")]
    pub image: Option<String>,

    /// Give the bench pods the host's IPC namespace (intra-node shared memory)
    #[arg(long)]
    pub host_ipc: bool,

    /// Results file, rewritten atomically after every pair [default: ic-bench-sweep-<ID>.json]
    #[arg(long, value_name = "FILE", conflicts_with = "resume")]
    pub results: Option<PathBuf>,

    /// Continue the sweep in FILE: run only the pairs it does not have yet
    #[arg(long, value_name = "FILE")]
    pub resume: Option<PathBuf>,

    /// Also write the results as JUnit XML, one test case per pair and per node (rewritten after every pair; repeatable)
    #[arg(long, value_name = "FILE")]
    pub export_junit: Vec<PathBuf>,

    /// Also write a self-contained HTML report (heatmap, node table, second pass, per-pair plots), rewritten after every pair; repeatable
    #[arg(long, value_name = "FILE")]
    pub export_html: Vec<PathBuf>,

    /// Also write the results JSON here (rewritten after every pair; repeatable)
    #[arg(long, value_name = "FILE")]
    pub export_json: Vec<PathBuf>,

    /// Also write Prometheus text: per-pair bandwidth and latency gauges, node health, run metadata (rewritten after every pair; repeatable)
    #[arg(long, value_name = "FILE")]
    pub export_prometheus: Vec<PathBuf>,

    /// Print the plan (rounds, pairs, pods at once, estimated wall) and run nothing
    #[arg(long)]
    pub dry_run: bool,

    /// At the end, label each node with a verdict ic-bench.dev/fabric=pass|fail and annotate time, sweep id and reason (needs manifests/clusterrole-label-nodes.yaml; never taints)
    #[arg(long)]
    pub label_nodes: bool,

    /// stdout at the end: table (node verdicts), wide (with all evidence), json, junit or prometheus
    #[arg(short = 'o', long = "output", default_value = "table", value_parser = clap::value_parser!(icb_report::Format))]
    pub output: icb_report::Format,
}

impl Args {
    fn settings(&self) -> anyhow::Result<icb_core::RunSettings> {
        if self.tests.is_empty() || self.sizes.is_empty() || self.memory.is_empty() {
            anyhow::bail!("nothing to run: give at least one --tests, --sizes and --memory value");
        }
        let settings = icb_core::RunSettings {
            tests: self.tests.clone(),
            sizes: self.sizes.clone(),
            memory: self.memory.clone(),
            warmup_iterations: 4,
            min_iterations: 8,
            min_time_s: 0.05_f64.min(self.max_time),
            max_time_s: self.max_time,
            window: 16,
            unit: icb_core::BandwidthUnit::GBps,
            require_cuda: false,
            stop: Some(icb_core::StopRule::DEFAULT),
            plan: Vec::new(),
            blocks: None,
            window_candidates: Vec::new(),
            untouched_buffers: false,
        };
        icb_engine::validate_settings(&settings)?;
        Ok(settings)
    }

    /// Every `--export-*` file with the exporter that writes it.
    fn exports(&self) -> Vec<(PathBuf, Box<dyn icb_report::Exporter>)> {
        use icb_report::Format;
        let mut out: Vec<(PathBuf, Box<dyn icb_report::Exporter>)> = Vec::new();
        for p in &self.export_json {
            out.push((p.clone(), Format::Json.exporter()));
        }
        for p in &self.export_junit {
            out.push((p.clone(), Format::Junit.exporter()));
        }
        for p in &self.export_prometheus {
            out.push((p.clone(), Format::Prometheus.exporter()));
        }
        for p in &self.export_html {
            out.push((p.clone(), Box::new(icb_report::HtmlExporter)));
        }
        out
    }

    fn schedule(&self, pools: Option<(Vec<String>, Vec<String>)>) -> anyhow::Result<Schedule> {
        Ok(match (self.schedule.as_deref(), pools) {
            (None | Some("bipartite"), Some((prefill, decode))) => Schedule::Bipartite { prefill, decode },
            (Some("bipartite"), None) => anyhow::bail!("--schedule bipartite needs --prefill-pool and --decode-pool"),
            (Some(other), Some(_)) => {
                anyhow::bail!("--prefill-pool/--decode-pool go with --schedule bipartite, not {other}")
            }
            (None | Some("all-pairs"), None) => Schedule::AllPairs,
            (Some("ring"), None) => Schedule::Ring,
            (Some("intra-node"), None) => Schedule::IntraNode,
            (Some("linear"), None) => Schedule::Linear {
                matchings: self.matchings,
                seed: self.seed,
            },
            (Some(other), None) => anyhow::bail!("unknown --schedule {other}"),
        })
    }
}

pub fn run(args: Args) -> anyhow::Result<i32> {
    let settings = args.settings()?;
    check_output(args.output)?;
    let expectation = args.expect.input()?;
    let interrupt = Interrupt::install()?;
    let rt = super::common::runtime()?;
    rt.block_on(async {
        let cluster = tokio::select! {
            c = args.cluster.connect() => c?,
            _ = interrupt.token().cancelled() => return Ok(interrupt.report("nothing was started")),
        };
        let mut results = match &args.resume {
            Some(path) => SweepResults::load(path).map_err(anyhow::Error::msg)?,
            None => {
                let (nodes, pools) = select_nodes(&cluster, &args).await?;
                let schedule = args.schedule(pools)?;
                let rounds = schedule
                    .rounds(&nodes, args.max_concurrent)
                    .map_err(anyhow::Error::msg)?;
                let now = jiff::Timestamp::now().to_string();
                SweepResults {
                    schema: SWEEP_SCHEMA.into(),
                    tool_version: env!("CARGO_PKG_VERSION").into(),
                    sweep_id: format!("sw{}", &icb_kube::podspec::new_run_id()[..6]),
                    started_at: now.clone(),
                    updated_at: now,
                    complete: false,
                    schedule,
                    nodes,
                    pair_budget_s: args.pair_timeout.as_secs_f64(),
                    rounds,
                    pairs: vec![],
                    node_verdicts: vec![],
                }
            }
        };
        if args.dry_run {
            print!("{}", plan_text(&results));
            return Ok(icb_core::exit::OK);
        }
        if args.label_nodes
            && let Some(first) = results.nodes.first()
        {
            // Before hours of pairs, not after: may this account patch nodes at all?
            icb_kube::node_labels::check_access(&cluster, first).await?;
        }
        let path = args
            .resume
            .clone()
            .or_else(|| args.results.clone())
            .unwrap_or_else(|| PathBuf::from(format!("ic-bench-sweep-{}.json", results.sweep_id)));
        let sweeper = Sweeper {
            cluster,
            job: PairJob {
                settings,
                expectation,
                image: args.image.clone().unwrap_or_else(icb_kube::podspec::default_image),
                host_ipc: args.host_ipc,
                devices: args.devices.request(),
                budget: Duration::from_secs_f64(results.pair_budget_s.max(1.0)),
            },
            token: interrupt.token().clone(),
        };
        let exports = args.exports();
        let mut save = |r: &SweepResults| -> anyhow::Result<()> {
            write_atomic(&path, &r.to_json()).with_context(|| format!("cannot write {}", path.display()))?;
            for (p, exporter) in &exports {
                let text = exporter.sweep(&icb_report::masked_sweep(r))?;
                write_atomic(p, &text).with_context(|| format!("cannot write {}", p.display()))?;
            }
            Ok(())
        };
        eprintln!(
            "ic-bench: sweep {}: {} nodes, {} pairs in {} rounds ({} done); results in {}",
            results.sweep_id,
            results.nodes.len(),
            results.planned(),
            results.rounds.len(),
            results.pairs.iter().filter(|p| p.pass == 1).count(),
            path.display()
        );
        save(&results)?;
        // First pass: only what the file does not have yet.
        let missing = results.missing();
        if !sweeper.run_rounds(&missing, 1, &mut results, &mut save).await? {
            save(&results)?;
            return Ok(interrupt.report(&format!(
                "no bench pods left; results so far in {} (--resume it)",
                path.display()
            )));
        }
        // Second pass: each suspect with two nodes that passed (intra-node: its own pair again).
        let first = score::first_pass_verdicts(&results.nodes, &results.pairs);
        let intra_node = results.schedule == Schedule::IntraNode;
        let second: Vec<_> = score::second_pass_plan(&first, args.max_concurrent, intra_node)
            .into_iter()
            .map(|r| r.into_iter().filter(|p| !results.has(p, 2)).collect::<Vec<_>>())
            .filter(|r| !r.is_empty())
            .collect();
        if !second.is_empty() {
            eprintln!(
                "ic-bench: second pass: {} suspect(s) re-paired with nodes that passed ({} pairs)",
                first.iter().filter(|v| v.status == NodeStatus::Suspect).count(),
                second.iter().map(Vec::len).sum::<usize>()
            );
        }
        if !sweeper.run_rounds(&second, 2, &mut results, &mut save).await? {
            save(&results)?;
            return Ok(interrupt.report(&format!(
                "no bench pods left; results so far in {} (--resume it)",
                path.display()
            )));
        }
        results.node_verdicts = score::final_verdicts(&results.nodes, &results.pairs);
        results.complete = true;
        results.updated_at = jiff::Timestamp::now().to_string();
        save(&results)?;
        print!(
            "{}",
            icb_report::render_sweep_in(&results, args.output, stdout_view(args.output))?
        );
        if args.label_nodes {
            super::sweep_labels::apply(&sweeper.cluster, &results).await?;
        }
        let measured = results
            .pairs
            .iter()
            .any(|p| matches!(p.outcome, icb_sweep::Outcome::Measured { .. }));
        Ok(if !measured {
            icb_core::exit::USAGE_OR_SETUP
        } else if results
            .node_verdicts
            .iter()
            .any(|v| matches!(v.status, NodeStatus::Fail | NodeStatus::Suspect))
        {
            icb_core::exit::VERDICT_FAILED
        } else {
            icb_core::exit::OK
        })
    })
}

/// The nodes to qualify (sorted) and, with pools, the two pools.
async fn select_nodes(
    cluster: &icb_kube::Cluster,
    args: &Args,
) -> anyhow::Result<(Vec<String>, Option<(Vec<String>, Vec<String>)>)> {
    let list = |sel: Option<String>| async move {
        let api: icb_kube::kube::Api<Node> = icb_kube::kube::Api::all(cluster.client().clone());
        let mut lp = ListParams::default();
        if let Some(s) = &sel {
            lp = lp.labels(s);
        }
        let nodes = cluster.call("list nodes", || api.list(&lp)).await?.items;
        let mut names: Vec<String> = nodes
            .into_iter()
            .filter(usable)
            .filter_map(|n| n.metadata.name)
            .collect();
        names.sort();
        Ok::<_, anyhow::Error>(names)
    };
    if let (Some(p), Some(d)) = (&args.prefill_pool, &args.decode_pool) {
        let prefill = list(Some(p.clone())).await?;
        let decode = list(Some(d.clone())).await?;
        let mut all: Vec<String> = prefill.iter().chain(&decode).cloned().collect();
        all.sort();
        all.dedup();
        return Ok((all, Some((prefill, decode))));
    }
    if !args.nodes.is_empty() {
        let known = list(None).await?;
        let mut nodes = args.nodes.clone();
        nodes.sort();
        nodes.dedup();
        if let Some(missing) = nodes.iter().find(|n| !known.contains(n)) {
            anyhow::bail!(
                "--nodes: node {missing} is not a Ready, schedulable node of this cluster (kubectl get nodes)"
            );
        }
        return Ok((nodes, None));
    }
    let nodes = list(args.selector.clone()).await?;
    if nodes.is_empty() {
        anyhow::bail!("no Ready, schedulable node matches: check -l SELECTOR (kubectl get nodes)");
    }
    Ok((nodes, None))
}

/// Ready and not cordoned.
fn usable(node: &Node) -> bool {
    let cordoned = node.spec.as_ref().and_then(|s| s.unschedulable).unwrap_or(false);
    let ready = node
        .status
        .as_ref()
        .and_then(|s| s.conditions.as_ref())
        .into_iter()
        .flatten()
        .any(|c| c.type_ == "Ready" && c.status == "True");
    ready && !cordoned
}

fn plan_text(r: &SweepResults) -> String {
    let pairs = r.planned();
    let widest = r.rounds.iter().map(Vec::len).max().unwrap_or(0);
    let mut out = format!(
        "sweep plan: schedule {}, {} nodes, {} pairs in {} rounds, up to {} pairs ({} pods) at once\n\
         estimated wall: {} rounds × {:.0} s per-pair budget = at most {:.0} s (plus a second pass on suspects)\n",
        r.schedule.name(),
        r.nodes.len(),
        pairs,
        r.rounds.len(),
        widest,
        widest * 2,
        r.rounds.len(),
        r.pair_budget_s,
        r.rounds.len() as f64 * r.pair_budget_s
    );
    for (i, round) in r.rounds.iter().enumerate() {
        let list: Vec<String> = round.iter().map(ToString::to_string).collect();
        out.push_str(&format!("round {}: {}\n", i + 1, list.join("  ")));
    }
    out
}

/// Refuses an `-o` format that cannot show a sweep (svg) before anything connects: the
/// exporter itself says so, on empty results.
fn check_output(format: icb_report::Format) -> anyhow::Result<()> {
    let empty = SweepResults {
        schema: SWEEP_SCHEMA.into(),
        tool_version: String::new(),
        sweep_id: String::new(),
        started_at: String::new(),
        updated_at: String::new(),
        complete: false,
        schedule: Schedule::AllPairs,
        nodes: vec![],
        pair_budget_s: 0.0,
        rounds: vec![],
        pairs: vec![],
        node_verdicts: vec![],
    };
    icb_report::render_sweep_in(&empty, format, icb_report::View::default())?;
    Ok(())
}

/// The table fitted to the terminal stdout goes to (`COLUMNS` first), 80 columns otherwise.
fn stdout_view(format: icb_report::Format) -> icb_report::View {
    use std::io::IsTerminal as _;
    let width = std::env::var("COLUMNS")
        .ok()
        .and_then(|c| c.trim().parse::<u16>().ok())
        .filter(|w| *w >= 20)
        .or_else(|| {
            let out = std::io::stdout();
            out.is_terminal()
                .then(|| terminal_size::terminal_size_of(out).map(|(w, _)| w.0))
                .flatten()
        })
        .unwrap_or(80);
    icb_report::View {
        width,
        wide: format == icb_report::Format::Wide,
    }
}
