//! The negative controls' part of the verdict (issue 35): a control is judged from its own run's
//! report ([`judge_tcp_control`]), then the main run's verdict takes the controls into account
//! ([`apply`]): a control the run did not catch makes it inconclusive (the detector was not shown
//! to work here), a fast path no faster than forced TCP warns.

use crate::model::*;

/// The one case shape a control measures, from the main run: its largest measured bandwidth
/// case (host memory first: a TCP control of GPU memory measures staging, not the wire), one the
/// main run measured at most 4 MiB first (so that the control has the main row to compare with),
/// else capped at 4 MiB, so that the control stays short. A run that measured no bandwidth case
/// (a latency-only profile) gets its smallest latency case: the transport that carried it is
/// classified the same way, so the detector is still shown to work; only the fast path's margin
/// over TCP, a bandwidth comparison, is then not judged.
pub fn tcp_control_shape(main: &PairReport) -> Option<(CaseShape, MemoryPair)> {
    let measured = main.cases.iter().filter(|c| c.status == CaseStatus::Measured);
    let pick = measured.max_by_key(|c| {
        let bandwidth = c.test.is_bandwidth();
        let fits = c.size <= CONTROL_MAX_SIZE;
        let capped = c.size.min(CONTROL_MAX_SIZE);
        // Bandwidth: the largest that fits; latency: the smallest.
        let size_rank = if bandwidth { capped } else { CONTROL_MAX_SIZE - capped };
        (bandwidth, !c.memory.uses_cuda(), fits, size_rank)
    })?;
    let mut shape = CaseShape::new(pick.test, pick.size.min(CONTROL_MAX_SIZE));
    shape.blocks = pick.blocks;
    Some((shape, pick.memory))
}

/// The largest message a control moves: 4 MiB, where the verdict's floors apply.
pub const CONTROL_MAX_SIZE: u64 = 4 << 20;

fn carried_by_tcp(path: &DataPath) -> bool {
    path.class == TransportClass::Tcp || (path.class == TransportClass::RmaEmulated && super::rules::has_tcp(path))
}

/// The measured cases of a control's run, the first of them (or its first case) as the case it
/// names, its bandwidth, and the main run's bandwidth for the same shape.
struct ControlRows<'a> {
    measured: Vec<&'a CaseResult>,
    case: String,
    bandwidth_bps: Option<f64>,
    main_bandwidth_bps: Option<f64>,
    /// The data path of the main run's row of the same shape (where it has one).
    main_class: Option<TransportClass>,
}

fn control_rows<'a>(control: &'a PairReport, main: &PairReport) -> ControlRows<'a> {
    let measured: Vec<&CaseResult> = control
        .cases
        .iter()
        .filter(|c| c.status == CaseStatus::Measured)
        .collect();
    let first = measured.first().copied().or(control.cases.first());
    let case = first.map_or_else(
        || "no case".to_string(),
        |c| format!("{} {} {}", c.test, crate::units::format_size(c.size), c.memory),
    );
    let bandwidth_bps = measured.iter().find_map(|c| c.measurement.as_ref()?.bandwidth_bps);
    let main_row = first.and_then(|f| {
        main.cases
            .iter()
            .filter(|c| c.status == CaseStatus::Measured && c.test == f.test && c.memory == f.memory)
            .find(|c| {
                c.size == f.size
                    && c.blocks == f.blocks
                    && c.measurement.as_ref().is_some_and(|m| m.bandwidth_bps.is_some())
            })
    });
    ControlRows {
        measured,
        case,
        bandwidth_bps,
        main_bandwidth_bps: main_row.and_then(|c| c.measurement.as_ref()?.bandwidth_bps),
        main_class: main_row.and_then(|c| Some(c.transport.as_ref()?.data_path.class)),
    }
}

/// Judges a TCP control from the report of its run: caught when every case it measured was
/// classified as carried by TCP. `main` gives the same shape's bandwidth for the comparison.
pub fn judge_tcp_control(control: &PairReport, main: &PairReport) -> ControlResult {
    tcp_control_result(control, control_rows(control, main))
}

/// [`judge_tcp_control`] for a control whose figure is not one case's bandwidth: every case it
/// measured is classified the same way, but the control is named `case` and compared on the
/// figures given (`pair --kv-shape`: a whole request's rate, the control's and the main run's).
pub fn judge_tcp_control_as(
    control: &PairReport,
    case: String,
    bandwidth_bps: Option<f64>,
    main_bandwidth_bps: Option<f64>,
) -> ControlResult {
    let measured = control
        .cases
        .iter()
        .filter(|c| c.status == CaseStatus::Measured)
        .collect();
    let rows = ControlRows {
        measured,
        case,
        bandwidth_bps,
        main_bandwidth_bps,
        main_class: None,
    };
    tcp_control_result(control, rows)
}

fn tcp_control_result(control: &PairReport, rows: ControlRows<'_>) -> ControlResult {
    let measured = &rows.measured;
    let paths: Vec<&DataPath> = measured
        .iter()
        .filter_map(|c| c.transport.as_ref().map(|t| &t.data_path))
        .collect();
    let mut seen_as: Vec<TransportClass> = Vec::new();
    for p in &paths {
        if !seen_as.contains(&p.class) {
            seen_as.push(p.class);
        }
    }
    let caught = !measured.is_empty() && paths.len() == measured.len() && paths.iter().all(|p| carried_by_tcp(p));
    let case = rows.case;
    let names: Vec<&str> = seen_as.iter().map(|c| c.as_str()).collect();
    let detail = if measured.is_empty() {
        format!("the forced-TCP control measured nothing: {}", control.verdict.reason)
    } else if caught {
        format!("a forced TCP fallback ({case}) was seen as tcp")
    } else {
        format!(
            "transport detection could not see a forced TCP fallback on this pair: the control ({case}) was seen as {}",
            if names.is_empty() {
                "nothing".to_string()
            } else {
                names.join(", ")
            }
        )
    };
    ControlResult {
        kind: ControlKind::Tcp,
        caught,
        seen_as,
        case,
        bandwidth_bps: rows.bandwidth_bps,
        main_bandwidth_bps: rows.main_bandwidth_bps,
        detail,
        removed: Vec::new(),
        effect: None,
    }
}

/// Judges a knobs-off control (the main run's shape again, without the recipe's `removed`
/// variables): "caught" when both rows have a figure; its effect says whether the recipe's env
/// was slower, no different or faster than UCX's defaults beyond [`KNOBS_OFF_MARGIN`].
pub fn judge_knobs_off_control(control: &PairReport, main: &PairReport, removed: &[String]) -> ControlResult {
    let rows = control_rows(control, main);
    let seen_as = rows
        .measured
        .iter()
        .filter_map(|c| Some(c.transport.as_ref()?.data_path.class))
        .fold(Vec::new(), |mut v, class| {
            if !v.contains(&class) {
                v.push(class);
            }
            v
        });
    // Another data path with the recipe's env than without it (both classes known) is a typed
    // difference: judged at the fast-path margin, not the same-path noise margin.
    let path_moved = match (rows.main_class, seen_as.as_slice()) {
        (Some(main), [control]) => {
            main != *control && main != TransportClass::Unknown && *control != TransportClass::Unknown
        }
        _ => false,
    };
    let effect = match (rows.main_bandwidth_bps, rows.bandwidth_bps) {
        (Some(recipe), Some(defaults)) => KnobsEffect::of_paths(recipe, defaults, !path_moved),
        _ => None,
    };
    let margin = if path_moved { FAST_PATH_MARGIN } else { KNOBS_OFF_MARGIN };
    let paths = match (path_moved, rows.main_class, seen_as.first()) {
        (true, Some(main), Some(control)) => format!(" ({} with them, {} without)", main.as_str(), control.as_str()),
        _ => String::new(),
    };
    let vars = removed.join(", ");
    let unit = main.settings.unit;
    let bw = |b: Option<f64>| crate::units::format_bandwidth(b.unwrap_or_default(), unit);
    let (recipe, defaults) = (bw(rows.main_bandwidth_bps), bw(rows.bandwidth_bps));
    let case = &rows.case;
    let detail = match effect {
        None if rows.measured.is_empty() => {
            format!("the knobs-off control measured nothing: {}", control.verdict.reason)
        }
        None => format!("the knobs-off control ({case}) has no figure to compare with the main run's"),
        Some(KnobsEffect::Slower) => format!(
            "the recipe's {vars} made {case} slower than UCX's defaults: {recipe} with them, {defaults} without \
             (over {margin}x){paths}"
        ),
        Some(KnobsEffect::Unchanged) => format!(
            "the recipe's {vars} changed nothing here: {case} {recipe} with them, {defaults} without (within \
             {margin}x){paths}"
        ),
        Some(KnobsEffect::Faster) => format!(
            "the recipe's {vars} made {case} faster than UCX's defaults: {recipe} with them, {defaults} without"
        ),
    };
    ControlResult {
        kind: ControlKind::KnobsOff,
        caught: effect.is_some(),
        seen_as,
        case: rows.case,
        bandwidth_bps: rows.bandwidth_bps,
        main_bandwidth_bps: rows.main_bandwidth_bps,
        detail,
        removed: removed.to_vec(),
        effect,
    }
}

/// A control that could not run at all: not caught, so the run cannot claim its detector works.
pub fn control_not_run(kind: ControlKind, why: &str) -> ControlResult {
    ControlResult {
        kind,
        caught: false,
        seen_as: Vec::new(),
        case: "no case".into(),
        bandwidth_bps: None,
        main_bandwidth_bps: None,
        detail: format!("the {kind} control could not run: {why}"),
        removed: Vec::new(),
        effect: None,
    }
}

fn fast(class: TransportClass) -> bool {
    matches!(
        class,
        TransportClass::SharedMemory | TransportClass::Cma | TransportClass::CudaIpc | TransportClass::Rdma
    )
}

/// The main verdict with the controls (also for a rails report, whose verdict is the rails' own):
/// an uncaught detector control makes a pass or warn inconclusive (a fail stays a fail, with the
/// control noted); a caught TCP control whose main path, judged fast, was not
/// [`FAST_PATH_MARGIN`] faster than it turns a pass into a warning, and so does a knobs-off
/// control that found the recipe's env slower than UCX's defaults.
pub fn apply(report: &mut PairReport) {
    if report.controls.is_empty() || report.verdict.status == VerdictStatus::Interrupted {
        return;
    }
    if let Some(missed) = report
        .controls
        .iter()
        .find(|c| c.kind.tests_the_detector() && !c.caught)
    {
        let detail = missed.detail.clone();
        if report.verdict.status == VerdictStatus::Fail {
            report.verdict.reason = format!("{}; and {detail}", report.verdict.reason);
        } else {
            report.verdict.status = VerdictStatus::Inconclusive;
            report.verdict.reason = format!("inconclusive: {detail}");
            report.verdict.hint = Some(
                "a PASS here would rest on a detector that did not work on this pair: check that UCX reports its \
                 protocols (UCX 1.14 or newer; for NIXL leave UCX_PROTO_INFO unset) and that the sides can run \
                 over TCP at all"
                    .into(),
            );
        }
        return;
    }
    warn_on_slow_fast_path(report);
    warn_on_slow_knobs(report);
}

fn warn_on_slow_fast_path(report: &mut PairReport) {
    if report.verdict.status != VerdictStatus::Pass {
        return;
    }
    if let Some((reason, hint)) = fast_path_no_faster_than_tcp(report) {
        report.verdict.status = VerdictStatus::Warn;
        report.verdict.reason = reason;
        report.verdict.hint = Some(hint);
    }
}

/// A main run whose data paths are all fast but whose caught TCP control's case was not
/// [`FAST_PATH_MARGIN`] slower than the main run's: the reason and the fix (the pair's verdict
/// warns with them; the gate lists them as a finding).
pub fn fast_path_no_faster_than_tcp(report: &PairReport) -> Option<(String, String)> {
    let paths = &report.verdict.data_paths;
    if paths.is_empty() || !paths.iter().all(|c| fast(*c)) {
        return None;
    }
    let unit = report.settings.unit;
    let c = report
        .controls
        .iter()
        .find(|c| c.kind == ControlKind::Tcp && c.speedup().is_some_and(|s| s < FAST_PATH_MARGIN))?;
    let names: Vec<&str> = paths.iter().map(|p| p.as_str()).collect();
    let reason = format!(
        "the {} path is no faster than forced TCP: {} at {} against {} for the TCP control (under {FAST_PATH_MARGIN}x)",
        names.join(", "),
        c.case,
        crate::units::format_bandwidth(c.main_bandwidth_bps.unwrap_or_default(), unit),
        crate::units::format_bandwidth(c.bandwidth_bps.unwrap_or_default(), unit),
    );
    let hint = "the right transport carried the bytes but no faster than TCP would: check NUMA and PCIe placement, \
                link speed and the machine's load (`ic-bench probe node`)"
        .to_string();
    Some((reason, hint))
}

/// A pass whose recipe env was slower than UCX's defaults warns, naming the variables; a run
/// that already warns or fails keeps its status and hint, the variables added to its reason.
fn warn_on_slow_knobs(report: &mut PairReport) {
    let Some(c) = report
        .controls
        .iter()
        .find(|c| c.kind == ControlKind::KnobsOff && c.effect == Some(KnobsEffect::Slower))
    else {
        return;
    };
    if report.verdict.status != VerdictStatus::Pass {
        report.verdict.reason = format!("{}; and {}", report.verdict.reason, c.detail);
        return;
    }
    report.verdict.status = VerdictStatus::Warn;
    report.verdict.reason = c.detail.clone();
    report.verdict.hint = Some(format!(
        "drop or re-tune {} in the recipe: UCX's own choice was faster on this pair",
        c.removed.join(", ")
    ));
}
