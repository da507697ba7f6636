//! Issue 38 item 5, read at 80, 100 and 160 columns: the pair verdict is a diagnostic like the
//! probe's and the gate's findings (a header, then the reason and the fix at full width); a gate
//! finding names its check once; the case table gives the data path what it needs before the
//! headers of Bandwidth and Latency, so a data path wraps between its parts, not inside them.

use crate::common::*;
use icb_core::model::{GateReport, Lane, PairReport};
use icb_report::{Format, View, render_gate_in, render_pair_in};

const WIDTHS: [u16; 3] = [80, 100, 160];

fn fitted(width: u16) -> View {
    View { width, wide: false }
}

/// Every line within `width` columns but a line that is one token (a path longer than the
/// line gets a line of its own, whole).
fn assert_fits(out: &str, width: u16) {
    for line in out.lines() {
        let one_token = line.split_whitespace().count() == 1;
        assert!(
            line.chars().count() <= usize::from(width) || one_token,
            "{width}: a line wider than the terminal: {line:?}\n{out}"
        );
    }
}

/// The words of what was printed, table borders aside.
fn printed_words(out: &str) -> Vec<&str> {
    out.split(|c: char| c.is_whitespace() || c == '│' || c == '┆')
        .filter(|w| !w.is_empty())
        .collect()
}

/// Every word of `text` was printed whole: not split at a hyphen, a `/` or mid-name.
fn assert_words_whole(out: &str, text: &str, width: u16) {
    let printed = printed_words(out);
    for word in text.split_whitespace() {
        assert!(
            printed.contains(&word),
            "{width}: {word:?} is not printed whole:\n{out}"
        );
    }
}

/// The pair's cuda→cuda case over cuda_ipc, as on one host with two GPUs.
fn with_cuda_ipc() -> PairReport {
    let mut r = same_host_healthy();
    let mut ipc = r.cases[3].clone();
    ipc.memory = CC;
    let path = &mut ipc.transport.as_mut().expect("a measured case has evidence").data_path;
    path.transports = vec![Lane {
        transport: "cuda_ipc".into(),
        device: "cuda".into(),
    }];
    r.cases.push(ipc);
    r
}

/// Item 1: `verdict:` and `hint:` were wrapped prose after the table; the verdict is now a
/// diagnostic, `fail[verdict]: prefill A → decode B`, its reason and `fix:` at full width.
#[test]
fn the_pair_verdict_is_a_diagnostic_on_whole_words() {
    for r in [pods_same_node(), two_nodes_rdma(), same_host_healthy()] {
        let status = format!("{:?}", r.verdict.status).to_lowercase();
        let p = &r.placement;
        let header = format!(
            "{status}[verdict]: prefill {} → decode {}",
            p.prefill.host, p.decode.host
        );
        for width in WIDTHS {
            let out = render_pair_in(&r, Format::Table, fitted(width)).unwrap();
            assert_fits(&out, width);
            let lines: Vec<&str> = out.lines().collect();
            let at = lines
                .iter()
                .position(|l| *l == header)
                .unwrap_or_else(|| panic!("{width}: no {header:?}:\n{out}"));
            assert!(
                !lines
                    .iter()
                    .any(|l| l.starts_with("verdict:") || l.starts_with("hint:")),
                "{width}: the verdict is still prose:\n{out}"
            );
            // Under the header: the reason, then the fix, every line indented, no word split.
            let block = &lines[at + 1..];
            let end = block.iter().position(|l| !l.starts_with("  ")).unwrap_or(block.len());
            let said: Vec<&str> = block[..end].iter().flat_map(|l| l.split_whitespace()).collect();
            let mut want: Vec<&str> = r.verdict.reason.split_whitespace().collect();
            if let Some(h) = &r.verdict.hint {
                assert!(block[..end].iter().any(|l| l.starts_with("  fix: ")), "{width}:\n{out}");
                want.push("fix:");
                want.extend(h.split_whitespace());
            }
            assert_eq!(said, want, "{width}:\n{out}");
        }
    }
    // -o wide keeps its lines.
    let wide = render_pair_in(&pods_same_node(), Format::Wide, fitted(100)).unwrap();
    assert!(
        wide.contains("\nverdict: FAIL: tcp fallback") && wide.contains("\nhint: "),
        "{wide}"
    );
}

/// Item 2: the gate's finding said its check id twice, in its header and again at the start of
/// its detail (`fail[env.ucx_tls.tcp_only]: probe env` / `env.ucx_tls.tcp_only: UCX_TLS=tcp …`).
/// The gate report here is docs/schema.md's example, which is what the gate writes.
#[test]
fn a_gate_finding_names_its_check_once() {
    let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/schema.md")).unwrap();
    let example = doc
        .split("```json\n")
        .map(|block| block.split("\n```").next().unwrap_or(""))
        .find(|block| block.contains("\"ic-bench.gate/v1\""))
        .expect("docs/schema.md has a gate example");
    let gate: GateReport = serde_json::from_str(example).unwrap();
    assert!(
        gate.findings.iter().any(|f| f.check.is_some()),
        "the example has probe findings"
    );
    for width in WIDTHS {
        let out = render_gate_in(&gate, Format::Table, fitted(width)).unwrap();
        assert_fits(&out, width);
        // Each finding is a paragraph of its own (after a blank line).
        for f in &gate.findings {
            let id = f.check.as_deref().unwrap_or("");
            let head = format!("{}[{id}]: {}", f.status.as_str(), f.step);
            let block = out
                .split("\n\n")
                .find(|b| b.starts_with(&head))
                .unwrap_or_else(|| panic!("{width}: no {head:?}:\n{out}"));
            assert_eq!(
                block.matches(id).count(),
                1,
                "{width}: {id} said more than once:\n{block}"
            );
            assert_words_whole(block, &f.detail, width);
            assert_words_whole(block, f.hint.as_deref().unwrap_or(""), width);
        }
    }
}

/// The lines of each row's data path cell (column 5), rows told apart by their memory column.
fn data_path_cells(out: &str) -> Vec<Vec<String>> {
    let mut cells: Vec<Vec<String>> = Vec::new();
    for line in out.lines().filter(|l| l.starts_with('│')) {
        let columns: Vec<&str> = line.split(['│', '┆']).map(str::trim).collect();
        let (memory, path) = (columns[2], columns[6]);
        if memory == "Memory" || (memory.is_empty() && cells.is_empty()) {
            continue;
        }
        if memory.is_empty() {
            cells.last_mut().expect("a row").push(path.to_string());
        } else {
            cells.push(vec![path.to_string()]);
        }
    }
    cells.into_iter().filter(|c| c[0] != "Data path").collect()
}

/// Item 3: at 100 columns the data path had ~12 columns (`rendezvous` / `zero-copy` / `read,`
/// / `cma/memory`) while Bandwidth and Latency kept their headers on one line. Now a data path
/// wraps only between its protocol and its lanes (at its commas), is whole on one line at 160,
/// and no lane is split at 80.
#[test]
fn the_data_path_gets_what_it_needs_before_the_headers() {
    // pods_same_node has a row of skipped cases, whose reason is prose in the same column, and
    // a part no 100-column table holds: `rendezvous zero-copy fenced write,` is 34 columns, and
    // with every other column at its longest word 100 columns leave the data path 33.
    let reports = [
        (two_nodes_rdma(), true),
        (same_host_healthy(), true),
        (with_cuda_ipc(), true),
        (pods_same_node(), false),
    ];
    for (r, parts_fit) in reports {
        let measured = r.cases.iter().filter(|c| c.measurement.is_some()).count();
        for width in WIDTHS {
            let out = render_pair_in(&r, Format::Table, fitted(width)).unwrap();
            assert_fits(&out, width);
            assert!(!out.contains('\u{a0}'), "{width}: a no-break space was printed:\n{out}");
            let cells: Vec<Vec<String>> = data_path_cells(&out)
                .into_iter()
                .filter(|lines| lines.iter().any(|l| l.contains('/')))
                .collect();
            assert_eq!(cells.len(), measured, "{width}: {cells:?}\n{out}");
            for lines in &cells {
                let text = lines.join(" ");
                for lane in [
                    "rc_mlx5/mlx5_0:1",
                    "cuda_copy/cuda",
                    "cuda_ipc/cuda",
                    "sysv/memory",
                    "cma/memory",
                ] {
                    let printed = printed_words(&out).iter().any(|w| w.trim_end_matches(',') == lane);
                    if width >= 100 && text.contains(lane) {
                        assert!(printed, "{width}: {lane} is not whole:\n{out}");
                    }
                }
                if width >= 100 && parts_fit {
                    let inside = lines[..lines.len() - 1].iter().find(|l| !l.ends_with(','));
                    assert!(inside.is_none(), "{width}: {lines:?} wraps inside a part:\n{out}");
                }
                if width == 160 {
                    assert_eq!(lines.len(), 1, "{width}: {lines:?}\n{out}");
                }
            }
            // 80 columns: a lane breaks after its `/` at most, never mid-name.
            for word in printed_words(&out) {
                assert!(
                    !word.starts_with("lx5") && !word.ends_with("mlx5_"),
                    "{width}: {word}\n{out}"
                );
            }
        }
    }
}
