//! What an operator's terminal shows: a live progress line on stderr when it is a terminal
//! (checked in a real pseudo-terminal made by `script`), output no wider than the terminal, and
//! nothing of the progress line when the output is a pipe.

mod pair_local_support;

use pair_local_support::{SMALL, ic_bench, serial};
use std::process::{Command, Stdio};
use std::time::Duration;

/// The bytes a terminal of `cols` columns would receive from `ic-bench ARGS` run in it.
fn in_terminal(cols: u16, args: &[&str]) -> (i32, String) {
    let quoted: Vec<String> = args.iter().map(|a| format!("'{a}'")).collect();
    let inner = format!(
        "stty cols {cols} rows 50; exec '{}' {}",
        env!("CARGO_BIN_EXE_ic-bench"),
        quoted.join(" ")
    );
    let mut child = Command::new("script")
        .args(["-q", "-e", "-c", &inner, "/dev/null"])
        .env_remove("COLUMNS")
        .env("TERM", "xterm-256color")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("script(1) from util-linux must be installed");
    let deadline = std::time::Instant::now() + Duration::from_secs(180);
    loop {
        if child.try_wait().expect("waiting for script").is_some() {
            break;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("ic-bench {args:?} in a terminal did not finish within 180 s");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().expect("script output");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// What a terminal shows of `raw`, line by line: escape sequences dropped, each `\r`-separated
/// redraw a line of its own (a redraw wider than the terminal would wrap there too).
fn screen_lines(raw: &str) -> Vec<String> {
    let ansi = regex::Regex::new(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07").expect("regex");
    ansi.replace_all(raw, "")
        .split(['\n', '\r'])
        .map(str::to_string)
        .collect()
}

fn pair_args() -> Vec<&'static str> {
    let mut args = vec!["pair", "--local"];
    args.extend(SMALL);
    args
}

#[test]
fn a_terminal_gets_a_progress_line_and_output_that_fits() {
    let _one = serial();
    for cols in [80u16, 100] {
        let (code, raw) = in_terminal(cols, &pair_args());
        assert_eq!(code, 0, "{raw}");
        let lines = screen_lines(&raw);
        assert!(
            lines.iter().any(|l| l.contains("case ") && l.contains("/12")),
            "no progress line in:\n{raw}"
        );
        assert!(lines.iter().any(|l| l.starts_with("PASS: ")), "no summary in:\n{raw}");
        for line in &lines {
            assert!(
                line.chars().count() <= usize::from(cols),
                "{cols} columns: {line:?} ({} wide) is too wide",
                line.chars().count()
            );
        }
    }
}

#[test]
fn quiet_silences_the_progress_line() {
    let _one = serial();
    let mut args = pair_args();
    args.push("-q");
    let (code, raw) = in_terminal(100, &args);
    assert_eq!(code, 0, "{raw}");
    assert!(
        !screen_lines(&raw)
            .iter()
            .any(|l| l.contains("case ") && l.contains("/12")),
        "-q still drew progress:\n{raw}"
    );
}

#[test]
fn a_pipe_gets_no_progress_bytes() {
    let _one = serial();
    let mut args = pair_args();
    args.extend(["-o", "json"]);
    let ran = ic_bench(&args, &[]);
    assert_eq!(ran.code, 0, "{}", ran.stderr);
    ran.report();
    for (name, text) in [("stdout", &ran.stdout), ("stderr", &ran.stderr)] {
        assert!(!text.contains('\u{1b}'), "escape bytes on {name}: {text:?}");
        assert!(!text.contains('\r'), "carriage returns on {name}: {text:?}");
        assert!(!text.contains("case 1/"), "progress on {name}: {text}");
    }
}

/// Issue 38 item 5: `probe env` on a real recipe in an 80- and a 100-column terminal: each
/// finding a header (status, check id, where) and its detail and fix at full width, no line
/// wider than the terminal, and no flag, transport list or file position broken mid-way (the
/// five-column table wrapped them into 20-column cells).
#[test]
fn probe_env_findings_fit_the_terminal_on_whole_words() {
    let recipe = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/fixtures/recipes/fail/ucx-tls-tcp-only.yaml"
    );
    for cols in [80u16, 100] {
        let (code, raw) = in_terminal(cols, &["probe", "env", recipe]);
        assert_eq!(code, 1, "a failing recipe exits 1:\n{raw}");
        let lines = screen_lines(&raw);
        for line in &lines {
            assert!(
                line.chars().count() <= usize::from(cols),
                "{cols} columns: {line:?} is too wide:\n{raw}"
            );
        }
        assert!(!lines.iter().any(|l| l.starts_with('│')), "findings in a table:\n{raw}");
        for header in [
            "fail[env.ucx_tls.tcp_only]: prefill (sglang-prefill, ucx-tls-tcp-only.yaml)",
            "fail[env.ucx_tls.cuda]: decode (sglang-decode, ucx-tls-tcp-only.yaml)",
        ] {
            assert!(
                lines.iter().any(|l| l == header),
                "{cols} columns: no {header:?}:\n{raw}"
            );
        }
        let tokens: Vec<&str> = lines.iter().flat_map(|l| l.split_whitespace()).collect();
        for whole in [
            "[spec.containers[engine].env",
            "(ucx-tls-tcp-only.yaml:19)]",
            "(rc/dc/ud/srd):",
            "UCX_TLS=rc_x,rc,dc_x,dc,cuda_copy,cuda_ipc",
            "cuda_copy/cuda_ipc:",
        ] {
            assert!(tokens.contains(&whole), "{cols} columns: {whole:?} broken:\n{raw}");
        }
        assert!(
            lines.iter().any(|l| l.starts_with("  fix: use UCX_TLS=")),
            "{cols} columns: no fix line:\n{raw}"
        );
    }
}
