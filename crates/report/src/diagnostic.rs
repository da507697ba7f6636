//! Prose findings said the way a compiler says its diagnostics (issue 38): one header line with
//! the status, the id and where (`fail[env.ucx_tls.tcp_only]: prefill (sglang-prefill, r.yaml)`),
//! then what was seen and the fix as full-width text. Probe checks, a pair's case findings and
//! the gate's findings all go through [`push_diagnostic`]; in a table a sentence wrapped into a
//! 20-column cell broke words and file names mid-way.

use crate::wrap::fill;
use std::fmt::Write as _;

/// What is seen under a header is indented this much; its continuation lines too.
const BODY: &str = "  ";

/// One prose finding.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Diagnostic<'a> {
    /// `fail`, `warn`, `skipped`: the status as the JSON spells it.
    pub status: &'a str,
    /// The check's id, when the finding has one.
    pub id: Option<&'a str>,
    /// Where it applies: a role and file, a node, a gate step, the cases it was seen in.
    pub place: Option<&'a str>,
    /// What was seen.
    pub seen: &'a str,
    /// How to fix it, with what that line is called (`fix`, `hint`).
    pub fix: Option<(&'a str, &'a str)>,
}

/// Appends `d` fitted to `width` columns: every line within it but a token longer than the
/// line, which gets a line of its own whole.
pub(crate) fn push_diagnostic(out: &mut String, d: &Diagnostic<'_>, width: usize) {
    let mut header = d.status.to_string();
    if let Some(id) = d.id {
        let _ = write!(header, "[{id}]");
    }
    if let Some(place) = d.place {
        let _ = write!(header, ": {place}");
    }
    // A place too long for the line goes on under the header, indented past the body text.
    let deeper = format!("{BODY}  ");
    for line in fill(&header, width, "", &deeper) {
        let _ = writeln!(out, "{line}");
    }
    for line in fill(d.seen, width, BODY, BODY) {
        let _ = writeln!(out, "{line}");
    }
    if let Some((label, fix)) = d.fix {
        // `fix: ` then the text, its continuations lined up under the text.
        let first = format!("{BODY}{label}: ");
        let rest = " ".repeat(first.chars().count());
        for line in fill(fix, width, &first, &rest) {
            let _ = writeln!(out, "{line}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn render(d: &Diagnostic<'_>, width: usize) -> String {
        let mut out = String::new();
        push_diagnostic(&mut out, d, width);
        out
    }

    #[test]
    fn the_header_says_status_id_and_where_then_the_text_and_fix_follow() {
        let d = Diagnostic {
            status: "fail",
            id: Some("env.ucx_tls.tcp_only"),
            place: Some("prefill (sglang-prefill, ucx-tls-tcp-only.yaml)"),
            seen: "UCX_TLS=tcp lists no RDMA transport",
            fix: Some((
                "fix",
                "use UCX_TLS=rc_x,rc,dc_x,dc,cuda_copy,cuda_ipc and request the RDMA device",
            )),
        };
        let out = render(&d, 60);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], "fail[env.ucx_tls.tcp_only]: prefill (sglang-prefill,");
        assert_eq!(lines[1], "    ucx-tls-tcp-only.yaml)");
        assert_eq!(lines[2], "  UCX_TLS=tcp lists no RDMA transport");
        assert_eq!(lines[3], "  fix: use UCX_TLS=rc_x,rc,dc_x,dc,cuda_copy,cuda_ipc and");
        assert_eq!(lines[4], "       request the RDMA device");
        assert_eq!(lines.len(), 5, "{out}");
    }

    #[test]
    fn without_an_id_or_a_place_the_header_is_the_status() {
        let d = Diagnostic {
            status: "warn",
            id: None,
            place: None,
            seen: "seen",
            fix: None,
        };
        assert_eq!(render(&d, 80), "warn\n  seen\n");
    }
}
