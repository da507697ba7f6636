//! The exporter trait and the `-o FORMAT` choice.

use icb_core::checks::ProbeReport;
use icb_core::model::{GateReport, PairReport};
use icb_sweep::SweepResults;
use std::fmt;
use std::str::FromStr;

/// Why a report could not be rendered.
#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    /// The format has nothing meaningful to show for this kind of report.
    #[error("-o {format} cannot show {what}: use {instead}")]
    Unsupported {
        format: &'static str,
        what: &'static str,
        instead: &'static str,
    },
    /// A serializer failed (a bug, or a value the format cannot carry).
    #[error("cannot write {format} output: {detail}")]
    Serialize { format: &'static str, detail: String },
}

/// One output format. Implementations are pure: same report in, same text out. A format that
/// has nothing meaningful to show for a kind of report says so ([`ExportError::Unsupported`])
/// rather than printing something empty.
pub trait Exporter {
    fn pair(&self, report: &PairReport) -> Result<String, ExportError>;
    fn probe(&self, report: &ProbeReport) -> Result<String, ExportError>;
    /// A sweep's results (`ic-bench.sweep/v1`), complete or still running: `ic-bench sweep`
    /// re-renders every export after every pair.
    fn sweep(&self, results: &SweepResults) -> Result<String, ExportError>;
    /// A gate's report (`ic-bench.gate/v1`), on every path it ends by.
    fn gate(&self, _report: &GateReport) -> Result<String, ExportError> {
        Err(ExportError::Unsupported {
            format: "this format",
            what: "a gate report",
            instead: "-o table, json or junit",
        })
    }
}

/// The reader's side of a table: how wide the terminal is and whether everything is wanted.
/// Only the table formats use it; machine formats never depend on the terminal.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct View {
    /// Columns available; tables and long lines are fitted to it.
    pub width: u16,
    /// `-o wide`: every row (ok checks too) at natural width, nothing collapsed.
    pub wide: bool,
}

impl Default for View {
    /// 80 columns: what a terminal of unknown width most likely has.
    fn default() -> Self {
        View { width: 80, wide: false }
    }
}

/// The values `-o` accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Format {
    Table,
    /// The table with every row, no width limit, and for `probe env` the transport variables
    /// of every role.
    Wide,
    Json,
    Junit,
    Prometheus,
    Svg,
    /// A `pair --kv-shape` report as CollectiveX `kv-transfer` rows ([`crate::collectivex`]).
    Collectivex,
}

impl Format {
    pub const ALL: [Format; 7] = [
        Format::Table,
        Format::Wide,
        Format::Json,
        Format::Junit,
        Format::Prometheus,
        Format::Svg,
        Format::Collectivex,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Format::Table => "table",
            Format::Wide => "wide",
            Format::Json => "json",
            Format::Junit => "junit",
            Format::Prometheus => "prometheus",
            Format::Svg => "svg",
            Format::Collectivex => "collectivex",
        }
    }

    pub fn exporter(self) -> Box<dyn Exporter> {
        self.exporter_in(View::default())
    }

    /// The exporter for a reader with this `view` (used by the table formats only).
    pub fn exporter_in(self, view: View) -> Box<dyn Exporter> {
        match self {
            Format::Table => Box::new(crate::TableExporter { view }),
            Format::Wide => Box::new(crate::TableExporter {
                view: View { wide: true, ..view },
            }),
            Format::Json => Box::new(crate::JsonExporter),
            Format::Junit => Box::new(crate::JunitExporter),
            Format::Prometheus => Box::new(crate::PrometheusExporter),
            Format::Svg => Box::new(crate::SvgExporter),
            Format::Collectivex => Box::new(crate::CollectivexExporter),
        }
    }
}

impl fmt::Display for Format {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for Format {
    type Err = icb_core::ParseError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let wanted = s.trim().to_ascii_lowercase();
        Format::ALL.into_iter().find(|f| f.as_str() == wanted).ok_or_else(|| {
            icb_core::ParseError::new(format!(
                "unknown output format '{s}': use table, wide, json, junit, prometheus, svg or collectivex"
            ))
        })
    }
}

/// Renders a pair report in `format` for an 80-column reader.
pub fn render_pair(report: &PairReport, format: Format) -> Result<String, ExportError> {
    format.exporter().pair(&masked_pair(report))
}

/// Renders a probe report in `format` for an 80-column reader.
pub fn render_probe(report: &ProbeReport, format: Format) -> Result<String, ExportError> {
    format.exporter().probe(&masked_probe(report))
}

/// Renders a gate report in `format` for a reader with this `view`, its free text masked.
pub fn render_gate_in(report: &GateReport, format: Format, view: View) -> Result<String, ExportError> {
    format.exporter_in(view).gate(&masked_gate(report))
}

/// The gate report as it may be printed: findings, notes and the pair report masked.
pub fn masked_gate(report: &GateReport) -> GateReport {
    use icb_core::secrets::mask_text;
    let mut r = report.clone();
    r.reason = mask_text(&r.reason);
    for f in &mut r.findings {
        f.detail = mask_text(&f.detail);
        f.hint = f.hint.as_deref().map(mask_text);
    }
    r.notes = r.notes.iter().map(|n| mask_text(n)).collect();
    r.pair = r.pair.as_ref().map(masked_pair);
    r
}

/// The report as it may be printed: every value of every env block and every free-text line
/// passed through `icb_core::secrets` (URL userinfo, bearer tokens, query credentials,
/// secret-named variables, token-shaped words). Every format renders from this copy, so no
/// exporter can print what another one masks.
pub fn masked_pair(report: &PairReport) -> PairReport {
    use icb_core::secrets::{mask_text, mask_value};
    let mut r = report.clone();
    for peer in [&mut r.server, &mut r.client] {
        for (k, v) in peer.env.iter_mut() {
            *v = mask_value(k, v);
        }
        peer.hostname = mask_text(&peer.hostname);
        peer.cuda.detail = mask_text(&peer.cuda.detail);
    }
    for e in [&mut r.placement.prefill, &mut r.placement.decode] {
        e.address = e.address.as_deref().map(mask_text);
        e.modelled_on = e.modelled_on.as_deref().map(mask_text);
    }
    for c in &mut r.cases {
        c.reason = c.reason.as_deref().map(mask_text);
    }
    r.verdict.reason = mask_text(&r.verdict.reason);
    r.verdict.hint = r.verdict.hint.as_deref().map(mask_text);
    r.expectation.source = mask_text(&r.expectation.source);
    for w in &mut r.warnings {
        *w = mask_text(w);
    }
    r
}

/// A probe report as it may be printed (see [`masked_pair`]).
pub fn masked_probe(report: &ProbeReport) -> ProbeReport {
    use icb_core::secrets::{mask_text, mask_value};
    let mut r = report.clone();
    r.target = mask_text(&r.target);
    r.verdict = mask_text(&r.verdict);
    for c in &mut r.checks {
        c.detail = mask_text(&c.detail);
        c.hint = c.hint.as_deref().map(mask_text);
        c.scope = c.scope.as_deref().map(mask_text);
    }
    for s in &mut r.next_steps {
        *s = mask_text(s);
    }
    for rv in &mut r.recipes {
        rv.recipe = mask_text(&rv.recipe);
        rv.verdict = mask_text(&rv.verdict);
    }
    if let Some(serving) = &mut r.serving {
        // A Prometheus or endpoint URL may carry credentials.
        for s in &mut serving.sources {
            *s = mask_text(s);
        }
    }
    for role in &mut r.transport_vars {
        role.scope = mask_text(&role.scope);
        for v in &mut role.vars {
            v.value = mask_value(&v.name, &v.value);
            v.source = mask_text(&v.source);
        }
    }
    r
}

/// Sweep results as they may be printed (see [`masked_pair`]): the free text of every outcome
/// (error messages quote commands and URLs) and of every node's evidence.
pub fn masked_sweep(results: &SweepResults) -> SweepResults {
    use icb_core::secrets::mask_text;
    use icb_sweep::Outcome;
    let mut r = results.clone();
    for p in &mut r.pairs {
        match &mut p.outcome {
            Outcome::Measured { reason, .. }
            | Outcome::Unschedulable { reason, .. }
            | Outcome::Error { reason }
            | Outcome::Disrupted { reason } => {
                *reason = mask_text(reason);
            }
        }
    }
    for v in &mut r.node_verdicts {
        for e in &mut v.evidence {
            *e = mask_text(e);
        }
    }
    if let Some(stop) = &mut r.stopped {
        stop.detail = mask_text(&stop.detail);
    }
    r
}

/// Renders sweep results in `format` for a reader with this `view`.
pub fn render_sweep_in(results: &SweepResults, format: Format, view: View) -> Result<String, ExportError> {
    format.exporter_in(view).sweep(&masked_sweep(results))
}

/// Renders a pair report in `format` for a reader with this `view`.
pub fn render_pair_in(report: &PairReport, format: Format, view: View) -> Result<String, ExportError> {
    format.exporter_in(view).pair(&masked_pair(report))
}

/// Renders a probe report in `format` for a reader with this `view`.
pub fn render_probe_in(report: &ProbeReport, format: Format, view: View) -> Result<String, ExportError> {
    format.exporter_in(view).probe(&masked_probe(report))
}
