//! Plain-text rendering of a [`ProbeReport`] (JSON is serde's rendering of the same struct).

use icb_core::checks::ProbeReport;

/// A fixed-width table: id, status, detail (scope in brackets), hints on their own line.
pub fn table(r: &ProbeReport) -> String {
    let w = r.checks.iter().map(|c| c.id.len()).max().unwrap_or(5).max(5);
    let mut out = format!("ic-bench probe {} — {}\n", r.kind, r.target);
    out.push_str(&format!("{:<w$}  {:<7}  DETAIL\n", "CHECK", "STATUS"));
    for c in &r.checks {
        let scope = c.scope.as_deref().map(|s| format!(" [{s}]")).unwrap_or_default();
        out.push_str(&format!(
            "{:<w$}  {:<7}  {}{scope}\n",
            c.id,
            c.status.as_str(),
            c.detail
        ));
        if let Some(h) = &c.hint
            && c.status != icb_core::Status::Ok
        {
            out.push_str(&format!("{:<w$}  {:<7}  ↳ {h}\n", "", ""));
        }
    }
    let k = &r.counts;
    out.push_str(&format!(
        "\n{} ok, {} warn, {} fail, {} skipped (skipped is not a pass)\nverdict: {}\n",
        k.ok, k.warn, k.fail, k.skipped, r.verdict
    ));
    for n in &r.next_steps {
        out.push_str(&format!("next: {n}\n"));
    }
    out
}
