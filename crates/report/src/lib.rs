//! Turns ic-bench results into what people and tools read.
//!
//! Every output format is one [`Exporter`] (the pattern hyperfine uses): it receives a finished
//! [`PairReport`], a [`ProbeReport`] or a sweep's [`SweepResults`] (finished or still running)
//! and returns text, or [`ExportError::Unsupported`] when the format has nothing to show for that
//! kind. Exporters only read results; they never measure, judge or touch UCX, so a saved JSON
//! report or sweep results file can be re-rendered in any format later.
//!
//! Formats: a readable table fitted to the reader's terminal ([`View`]; `wide` lists everything), the JSON report as is (the versioned schema, `docs/schema.md`),
//! JUnit XML for CI (one testcase per case or check; per pair and per node for a sweep),
//! Prometheus text exposition (gauges for bandwidth, latency and verdicts; per-pair gauges and
//! node health for a sweep), an SVG chart of bandwidth against message size (pairs), and a
//! self-contained HTML report of a sweep (heatmap, node table, second pass, per-pair plots).
//!
//! `render_pair`/`render_probe`/`render_sweep_in` render a masked copy ([`masked_pair`],
//! [`masked_probe`], [`masked_sweep`]): env values and free text go through `icb_core::secrets`
//! first, whatever the format.
#![forbid(unsafe_code)]

mod baseline;
mod case_health;
mod collectivex;
mod column_fit;
mod diagnostic;
mod exports;
mod format;
mod gate;
mod json;
mod junit;
mod kv_table;
mod labels;
pub mod live;
pub mod logging;
pub mod output;
mod paths;
mod probe_text;
mod prometheus;
mod rail_export;
mod rail_table;
mod rails;
pub mod run_history;
mod serving_table;
mod svg;
mod sweep;
pub mod sweep_progress;
mod table;
pub mod text;
mod verdict_text;
mod wrap;

pub use collectivex::CollectivexExporter;
pub use exports::{ExportFileError, Exports, FileFormat, Report, ReportKind, render_primary};
pub use format::{
    ExportError, Exporter, Format, View, masked_gate, masked_pair, masked_probe, masked_sweep, render_gate_in,
    render_pair, render_pair_in, render_probe, render_probe_in, render_sweep_in,
};
pub use json::JsonExporter;
pub use junit::JunitExporter;
pub use labels::bw_value;
pub use prometheus::PrometheusExporter;
pub use run_history::{PushTo, RunHistory, RunHistoryError};
pub use svg::SvgExporter;
pub use sweep::html::HtmlExporter;
pub use table::TableExporter;

pub use icb_core::checks::ProbeReport;
pub use icb_core::model::PairReport;
pub use icb_sweep::SweepResults;
