//! `scripts/fuzz-campaign` without a fuzzer: its arguments are checked before anything is built,
//! and with `--bin-dir` pointing at stand-in targets (shell scripts that print what libFuzzer
//! prints) each target's row is recorded as soon as that target ends, the cumulative ledger is
//! regenerated from the rows, and a SIGTERM or SIGINT mid-campaign still records what ran.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/fuzz-campaign")
}

/// The script through `env --default-signal=INT`: a shell started with SIGINT ignored (a test
/// run in the background) could not trap it, as a terminal's script can.
fn campaign(dir: &Path, args: &[&str]) -> Command {
    let mut c = Command::new("env");
    c.args(["--default-signal=INT", "bash"])
        .arg(script())
        .args(args)
        .current_dir(dir);
    c
}

fn run(dir: &Path, args: &[&str]) -> Output {
    campaign(dir, args).output().expect("bash runs")
}

/// Ends at once, as a finished libFuzzer run: one new input in its corpus (the last argument),
/// its final stats.
const DONE: &str = r##"#!/usr/bin/env bash
echo new >"${@: -1}/0123456789abcdef0123456789abcdef01234567"
echo "#2 INITED cov: 10 ft: 20 corp: 1/1b exec/s: 0 rss: 30Mb"
echo "#4321 DONE cov: 12 ft: 24 corp: 2/2b exec/s: 500 rss: 30Mb"
echo "stat::number_of_executed_units: 4321"
echo "stat::average_exec_per_sec: 500"
"##;
/// Runs until a signal, then prints its stats and exits 72, as libFuzzer does (handle_term).
const UNTIL_SIGNAL: &str = r##"#!/usr/bin/env bash
trap 'echo "==1== libFuzzer: run interrupted; exiting"; echo "stat::number_of_executed_units: 777"; echo "stat::average_exec_per_sec: 7"; exit 72' TERM INT
echo "#2 INITED cov: 10 ft: 20 corp: 1/1b exec/s: 0 rss: 30Mb"
while :; do sleep 0.05; done
"##;
/// A crash: a panic and its input left under -artifact_prefix.
const PANIC: &str = r##"#!/usr/bin/env bash
for a; do case "$a" in -artifact_prefix=*) p=${a#-artifact_prefix=} ;; esac; done
echo "thread '<unnamed>' panicked at fuzz_targets/x.rs:1:1:"
echo "row range 9..1 | min > max"
echo "==1== ERROR: libFuzzer: deadly signal"
echo x >"${p}crash-1"
exit 77
"##;

fn stand_ins(dir: &Path, targets: &[(&str, &str)]) -> PathBuf {
    let bin = dir.join("bin");
    fs::create_dir_all(&bin).unwrap();
    for (name, body) in targets {
        let p = bin.join(name);
        fs::write(&p, body).unwrap();
        fs::set_permissions(&p, fs::Permissions::from_mode(0o755)).unwrap();
    }
    bin
}

/// The campaign table's head, as a record starts before any campaign.
const TABLE_HEAD: &str = "| campaign (UTC) | target | limit | executions | exec/s | seconds | cov | ft | corpus | findings |\n|---|---|---|---:|---:|---:|---:|---:|---:|---|\n";

fn table_rows(text: &str) -> Vec<&str> {
    let sep = "|---|---|---|---:|---:|---:|---:|---:|---:|---|\n";
    let (_, rows) = text.split_once(sep).expect("the campaign table");
    rows.lines().take_while(|l| l.starts_with('|')).collect()
}

fn ledger_line<'a>(text: &'a str, target: &str) -> &'a str {
    let start = text.find("<!-- fuzz-ledger").expect("a ledger");
    let end = text.find("<!-- end fuzz-ledger -->").expect("the ledger's end");
    text[start..end]
        .lines()
        .find(|l| l.starts_with(&format!("| {target} |")))
        .unwrap_or_else(|| panic!("no ledger line for {target}:\n{text}"))
}

#[test]
fn bad_arguments_are_one_line_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let cases: &[(&[&str], &str)] = &[
        (&["--runs", "ten"], "take a whole number, not 'ten'"),
        (&["--jobs", "-1", "--smoke"], "take a whole number, not '-1'"),
        (&["--max-time"], "--max-time needs a value"),
        (&["topo"], "give --runs N, --max-time S or --smoke"),
        (&["--smoke", "--bogus"], "unknown flag --bogus"),
        (
            &["--smoke", "no_such_target"],
            "no target matches 'no_such_target' (targets: ibstat",
        ),
        (&["--smoke", "--record", "x.md", "--no-record"], "contradict"),
        (&["--smoke", "--bin-dir", "missing"], "is not a directory"),
        (
            &["--smoke", "--sanitizer", "thread"],
            "--sanitizer takes address, leak or none, not 'thread'",
        ),
        (
            &["--build-only", "--smoke"],
            "--build-only runs no target: drop --runs, --max-time and --smoke",
        ),
        (&["--build-only", "--runs", "5"], "--build-only runs no target"),
        (
            &["--build-only", "--bin-dir", "."],
            "--build-only builds the targets; --bin-dir names targets already built",
        ),
        (
            &["--build-only", "--opt-level", "fast"],
            "--opt-level takes 0, 1, 2 or 3, not 'fast'",
        ),
        (
            &["--smoke", "--opt-level", "1", "--bin-dir", "."],
            "--opt-level is how the targets are built; --bin-dir names targets already built",
        ),
    ];
    for (args, want) in cases {
        let out = run(dir.path(), args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{args:?}: {err}");
        assert!(
            err.starts_with("fuzz-campaign: ") && err.contains(want),
            "{args:?}: {err}"
        );
    }
    assert_eq!(
        fs::read_dir(dir.path()).unwrap().count(),
        0,
        "a refused campaign wrote files"
    );
}

#[test]
fn a_target_missing_from_the_bin_dir_is_named() {
    let dir = tempfile::tempdir().unwrap();
    stand_ins(dir.path(), &[("ibstat", DONE)]);
    let out = run(
        dir.path(),
        &["--runs", "5", "--bin-dir", "bin", "--work-dir", "w", "topo"],
    );
    assert!(!dir.path().join("w").exists(), "a refused campaign made its work dir");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("no fuzz target topo in "), "{err}");
}

/// A campaign's row says when its targets ran without AddressSanitizer (the default's rows say
/// nothing: see the next test's exact row).
#[test]
fn a_campaign_without_a_sanitizer_says_so_in_its_row() {
    let dir = tempfile::tempdir().unwrap();
    stand_ins(dir.path(), &[("ibstat", DONE)]);
    let record = dir.path().join("FUZZING.md");
    fs::write(&record, format!("# Campaigns\n\n{TABLE_HEAD}")).unwrap();
    let args = "--runs 5 --sanitizer none --bin-dir bin --work-dir w --record FUZZING.md ibstat";
    let out = run(dir.path(), &args.split(' ').collect::<Vec<_>>());
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let text = fs::read_to_string(&record).unwrap();
    let rows = table_rows(&text);
    assert_eq!(rows.len(), 1, "{text}");
    assert!(
        rows[0].contains("| ibstat | -runs=5 -s none [new corpus] | 4321 |"),
        "{}",
        rows[0]
    );
}

#[test]
fn each_row_and_the_ledger_are_recorded_and_the_old_rows_kept() {
    let dir = tempfile::tempdir().unwrap();
    stand_ins(dir.path(), &[("ibstat", DONE), ("modules", PANIC)]);
    let record = dir.path().join("FUZZING.md");
    let old = "| 2026-01-01T00:00Z | ibstat | -runs=9 | 10000000 | 9 | 100 | 1 | 2 | 3 | none |";
    fs::write(
        &record,
        format!("# Campaigns\n\nprose\n\n{TABLE_HEAD}{old}\n\n## Findings\n"),
    )
    .unwrap();
    let out = run(
        dir.path(),
        &[
            "--runs",
            "5",
            "--bin-dir",
            "bin",
            "--work-dir",
            "w",
            "--record",
            "FUZZING.md",
            "--note",
            "a|b",
            "ibstat",
            "modules",
        ],
    );
    assert_eq!(out.status.code(), Some(1), "a panic fails the campaign: {out:?}");
    let text = fs::read_to_string(&record).unwrap();
    let rows = table_rows(&text);
    assert_eq!(rows.len(), 3, "{text}");
    assert_eq!(rows[2], old, "the old row moved or changed");
    let ibstat = rows
        .iter()
        .find(|r| r.contains("| ibstat | -runs=5 (a/b) [new corpus] |"))
        .expect(&text);
    let corpus = fs::read_dir(dir.path().join("w/corpus/ibstat")).unwrap().count();
    assert!(corpus > 0, "the corpus was seeded from the fixtures");
    assert!(
        ibstat.contains("| 4321 | 500 |") && ibstat.ends_with(&format!("| 12 | 24 | {corpus} | none |")),
        "{ibstat}"
    );
    let modules = rows.iter().find(|r| r.contains("| modules |")).expect(&text);
    assert!(
        modules.contains("rc 77: row range 9..1 / min > max (1 input(s) in "),
        "{modules}"
    );
    assert!(
        text.ends_with("## Findings\n"),
        "the text after the table is kept: {text}"
    );
    // The ledger: ibstat's new corpus starts a new chain (the old row is not added to it, but
    // its campaign still reached the bar).
    assert!(text.find("<!-- fuzz-ledger").unwrap() < text.find("| campaign (UTC) |").unwrap());
    assert_eq!(
        ledger_line(&text, "ibstat"),
        "| ibstat | 1 | 4,321 | 4,321 | 10,000,000 in 100 s (2026-01-01T00:00Z) | 0 | reached 2026-01-01T00:00Z |"
    );
    let m = ledger_line(&text, "modules");
    // A crash prints no final stats: its executions are unknown and add nothing.
    assert!(
        m.starts_with("| modules | 1 | 0 | 0 | 0 in ") && m.contains("| 1, last 20") && m.ends_with("| not yet |"),
        "{m}"
    );
    assert_eq!(text.matches("<!-- fuzz-ledger").count(), 1);

    // A second campaign resumes from the kept corpus: its executions add up, the ledger is
    // replaced (not repeated), and a campaign past the bar says so.
    fs::write(dir.path().join("bin/ibstat"), DONE.replace("4321", "10000000")).unwrap();
    let out = run(
        dir.path(),
        &[
            "--runs",
            "5",
            "--bin-dir",
            "bin",
            "--work-dir",
            "w",
            "--record",
            "FUZZING.md",
            "ibstat",
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let text = fs::read_to_string(&record).unwrap();
    assert_eq!(table_rows(&text).len(), 4, "{text}");
    assert!(!table_rows(&text)[0].contains("[new corpus]"), "{text}");
    let line = ledger_line(&text, "ibstat");
    assert!(
        line.starts_with("| ibstat | 2 | 10,004,321 | 10,004,321 | 10,000,000 in "),
        "{line}"
    );
    assert!(
        line.contains("| 0 | reached 20") && !line.ends_with("2026-01-01T00:00Z |"),
        "{line}"
    );
    assert_eq!(text.matches("<!-- fuzz-ledger").count(), 1);
}

/// The repository's record (issue 38): the rows live in fuzz/campaigns.md and their ledger in
/// FUZZING.md, beside the findings. `fuzz_record.py add ROWS ROW --ledger LEDGER` adds the row to
/// ROWS only and replaces LEDGER's ledger block, keeping LEDGER's other text; a LEDGER that is not
/// there is refused before the row is written. And the committed FUZZING.md's ledger is the one
/// fuzz/campaigns.md's rows give: nobody edited it by hand.
#[test]
fn the_rows_and_their_ledger_live_in_two_files_as_the_repositorys_do() {
    let dir = tempfile::tempdir().unwrap();
    let record_script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/fuzz_record.py");
    let record = |args: &[&Path], row: Option<&str>, ledger: &Path| {
        let mut c = Command::new("python3");
        c.arg(&record_script).arg(if row.is_some() { "add" } else { "ledger" });
        c.args(args).args(row).arg("--ledger").arg(ledger);
        c.output().expect("python3 runs")
    };
    let rows = dir.path().join("campaigns.md");
    let ledger = dir.path().join("FUZZING.md");
    let old = "| 2026-01-01T00:00Z | ibstat | -runs=9 | 10000000 | 9 | 100 | 1 | 2 | 3 | none |";
    let new = "| 2026-01-02T00:00Z | ibstat | -runs=5 | 4321 | 500 | 9 | 12 | 24 | 7 | none |";
    fs::write(&rows, format!("# Rows\n\nprose\n\n{TABLE_HEAD}{old}\n")).unwrap();
    let head = "# Fuzzing\n\nintro\n\n";
    let findings = "## Findings\n\n1. one\n";
    let begin = "<!-- fuzz-ledger: generated by scripts/fuzz-campaign from the campaign rows; edits are lost -->";
    let stale = format!("{begin}\nstale\n<!-- end fuzz-ledger -->\n\n");
    fs::write(&ledger, format!("{head}{stale}{findings}")).unwrap();

    let missing = dir.path().join("NONE.md");
    let out = record(&[&rows], Some(new), &missing);
    assert!(!out.status.success(), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("--ledger") && err.contains("NONE.md") && err.trim().lines().count() == 1,
        "{err}"
    );
    assert_eq!(
        table_rows(&fs::read_to_string(&rows).unwrap()),
        [old],
        "nothing written"
    );

    let out = record(&[&rows], Some(new), &ledger);
    assert!(out.status.success(), "{out:?}");
    let text = fs::read_to_string(&rows).unwrap();
    assert_eq!(table_rows(&text), [new, old], "{text}");
    assert!(
        !text.contains("<!-- fuzz-ledger"),
        "the rows' file holds no ledger: {text}"
    );
    let text = fs::read_to_string(&ledger).unwrap();
    assert!(
        text.starts_with(head) && text.ends_with(findings) && !text.contains("stale"),
        "{text}"
    );
    assert_eq!(
        ledger_line(&text, "ibstat"),
        "| ibstat | 2 | 10,004,321 | 10,004,321 | 10,000,000 in 100 s (2026-01-01T00:00Z) | 0 | reached 2026-01-01T00:00Z |"
    );

    let repo = Path::new(env!("CARGO_MANIFEST_DIR"));
    let committed = fs::read_to_string(repo.join("FUZZING.md")).unwrap();
    fs::copy(repo.join("fuzz/campaigns.md"), &rows).unwrap();
    fs::write(&ledger, &committed).unwrap();
    let out = record(&[&rows], None, &ledger);
    assert!(out.status.success(), "{out:?}");
    assert!(
        fs::read_to_string(&ledger).unwrap() == committed,
        "FUZZING.md's ledger is not the one fuzz/campaigns.md's rows give: run \
         python3 scripts/fuzz_record.py ledger fuzz/campaigns.md --ledger FUZZING.md"
    );
}

fn wait_for(what: &str, deadline: Duration, mut done: impl FnMut() -> bool) {
    let start = Instant::now();
    while !done() {
        assert!(start.elapsed() < deadline, "{what}: not within {deadline:?}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn wait_exit(child: &mut Child) -> i32 {
    let start = Instant::now();
    loop {
        if let Some(s) = child.try_wait().unwrap() {
            return s.code().expect("an exit code");
        }
        if start.elapsed() > Duration::from_secs(20) {
            let _ = child.kill();
            panic!("the campaign did not end within 20 s of the signal");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `group`: the signal goes to the campaign's whole process group, as a terminal's Ctrl-C does;
/// otherwise to the script alone, as `timeout` sends its SIGTERM.
fn interrupted_by(signal: &str, group: bool, code: i32) {
    let dir = tempfile::tempdir().unwrap();
    stand_ins(
        dir.path(),
        &[("ibstat", DONE), ("topo", UNTIL_SIGNAL), ("modules", DONE)],
    );
    let record = dir.path().join("FUZZING.md");
    let mut child = campaign(
        dir.path(),
        &[
            "--runs",
            "5",
            "--bin-dir",
            "bin",
            "--work-dir",
            "w",
            "--record",
            "FUZZING.md",
            "ibstat",
            "topo",
            "modules",
        ],
    )
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .process_group(0)
    .spawn()
    .unwrap();
    // ibstat ends first and is recorded while topo still runs (targets run in the order listed).
    let log = dir.path().join("w/logs/topo.log");
    wait_for("topo started", Duration::from_secs(20), || {
        fs::read_to_string(&log).is_ok_and(|l| l.contains("INITED"))
    });
    let text = fs::read_to_string(&record).unwrap();
    assert_eq!(
        table_rows(&text).len(),
        1,
        "ibstat's row is there before the campaign ends: {text}"
    );
    let pid = child.id();
    let to = if group { format!("-{pid}") } else { pid.to_string() };
    assert!(
        Command::new("kill")
            .args([signal, "--", &to])
            .status()
            .unwrap()
            .success()
    );
    assert_eq!(wait_exit(&mut child), code);
    let text = fs::read_to_string(&record).unwrap();
    let rows = table_rows(&text);
    assert_eq!(
        rows.len(),
        2,
        "ibstat and the interrupted topo, modules never started: {text}"
    );
    assert!(
        rows[0].contains("| topo |")
            && rows[0].contains("| 777 | 7 |")
            && rows[0].contains("| none: interrupted after "),
        "{}",
        rows[0]
    );
    assert!(
        ledger_line(&text, "topo").starts_with("| topo | 1 | 777 | 777 |"),
        "{text}"
    );
    // Nothing left running: the stand-in wrote its stats and exited.
    let ps = Command::new("pgrep")
        .args(["-f", &dir.path().join("bin/topo").display().to_string()])
        .output()
        .unwrap();
    assert!(
        ps.stdout.is_empty(),
        "a target still runs: {}",
        String::from_utf8_lossy(&ps.stdout)
    );
}

#[test]
fn a_sigterm_mid_campaign_records_what_ran_and_exits_143() {
    interrupted_by("-TERM", false, 143);
}

#[test]
fn a_ctrl_c_mid_campaign_records_what_ran_and_exits_130() {
    interrupted_by("-INT", true, 130);
}
