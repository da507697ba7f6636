//! Turns ic-bench results into what people and tools read.
//!
//! Every output format is one [`Exporter`] (the pattern hyperfine uses): it receives a finished
//! [`PairReport`] or [`ProbeReport`] and returns text. Exporters only read results; they never
//! measure, judge or touch UCX, so a saved JSON report can be re-rendered in any format later.
//!
//! Formats: a readable table fitted to the reader's terminal ([`View`]; `wide` lists everything), the JSON report as is (the versioned schema, `docs/schema.md`),
//! JUnit XML for CI (one testcase per case or check), Prometheus text exposition (gauges for
//! bandwidth, latency and verdicts) and an SVG chart of bandwidth against message size.
//!
//! `render_pair`/`render_probe` render a masked copy ([`masked_pair`], [`masked_probe`]): env
//! values and free text go through `icb_core::secrets` first, whatever the format.
#![forbid(unsafe_code)]

mod format;
mod json;
mod junit;
mod labels;
mod paths;
mod prometheus;
mod svg;
mod table;

pub use format::{
    ExportError, Exporter, Format, View, masked_pair, masked_probe, render_pair, render_pair_in, render_probe,
    render_probe_in,
};
pub use json::JsonExporter;
pub use junit::JunitExporter;
pub use prometheus::PrometheusExporter;
pub use svg::SvgExporter;
pub use table::TableExporter;

pub use icb_core::checks::ProbeReport;
pub use icb_core::model::PairReport;
