//! CI's own guarantees (issue 35 item 5, issue 37): `.ci/run` refuses `IC_BENCH_CI_SKIP_RELEASE=1`
//! when `CI` is set (in one line, before any step runs), `scripts/check-glibc` fails a binary it
//! cannot check (no versioned glibc symbol, or no dynamic symbols at all) and still passes or
//! fails a glibc-linked one by its limit, and `scripts/test-timer`'s report reads libtest's times.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn repo() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

/// Runs `.ci/run` with `env`; kills it if it is still running after 20 s (a run that started its
/// steps instead of refusing), so that a regression fails here instead of running all of CI.
fn ci_run(env: &[(&str, &str)]) -> Output {
    let mut c = Command::new("bash");
    c.arg(repo().join(".ci/run"))
        .env_remove("CI")
        .env_remove("IC_BENCH_CI_SKIP_RELEASE")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in env {
        c.env(k, v);
    }
    let mut child = c.spawn().expect("bash runs");
    let deadline = Instant::now() + Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            child.kill().unwrap();
            let out = child.wait_with_output().unwrap();
            panic!(
                ".ci/run {env:?} was still running after 20 s instead of refusing: {}",
                String::from_utf8_lossy(&out.stdout)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn ci_run_refuses_to_skip_the_release_when_ci_is_set() {
    for ci in ["true", "1", "yes"] {
        let out = ci_run(&[("CI", ci), ("IC_BENCH_CI_SKIP_RELEASE", "1")]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "CI={ci}: {err}");
        assert_eq!(err.lines().count(), 1, "CI={ci}: one line: {err}");
        assert!(
            err.starts_with(".ci/run: IC_BENCH_CI_SKIP_RELEASE=1 is refused when CI is set"),
            "CI={ci}: {err}"
        );
        // Refused before any step: nothing was set up, formatted, built or timed.
        assert!(
            out.stdout.is_empty(),
            "CI={ci}: {}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
}

/// Runs a script of scripts/ with `args`, with a 20 s deadline (a refusal is immediate).
fn script(name: &str, args: &[&str]) -> Output {
    let mut child = Command::new("bash")
        .arg(repo().join("scripts").join(name))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("bash runs");
    let deadline = Instant::now() + Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() > deadline {
            child.kill().unwrap();
            panic!("scripts/{name} {args:?} was still running after 20 s instead of refusing");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

/// CI makes the image's base and builds the image beside its build and test run, and checks the
/// image after them (issue 37): `scripts/image-check` takes one of `--make-base IMAGE`, `--base
/// IMAGE [--build-only IMAGE]` and `--image IMAGE`, and `scripts/asan --target-dir DIR` needs its
/// directory. Each wrong use is one line naming what to change, exit 2, before anything is made
/// or built.
#[test]
fn the_split_image_and_asan_steps_refuse_a_wrong_use_in_one_line() {
    let cases: [(&str, &[&str], &str); 10] = [
        ("image-check", &["--base", "a", "--make-base", "b"], "give one of them"),
        ("image-check", &["--make-base"], "--make-base needs the name"),
        ("image-check", &["--base", ""], "--base needs an image name"),
        (
            "image-check",
            &["--make-base", "x", "--keep-image"],
            "drop --keep-image",
        ),
        ("image-check", &["--build-only", "x"], "--build-only needs --base BASE"),
        (
            "image-check",
            &["--make-base", "b", "--build-only", "x"],
            "give one of them",
        ),
        (
            "image-check",
            &["--image", "i", "--base", "b"],
            "drop --make-base, --base and --build-only",
        ),
        (
            "image-check",
            &["--base", "b", "--build-only", "x", "--keep-image"],
            "drop --keep-image",
        ),
        ("asan", &["--target-dir"], "--target-dir needs a directory"),
        ("asan", &["--libs"], "unknown argument '--libs'"),
    ];
    for (name, args, want) in cases {
        let out = script(name, args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "scripts/{name} {args:?}: {err}");
        assert_eq!(err.lines().count(), 1, "scripts/{name} {args:?}: one line: {err}");
        assert!(err.contains(want), "scripts/{name} {args:?}: {err}");
        assert!(out.stdout.is_empty(), "scripts/{name} {args:?} did something");
    }
}

/// The fuzz smoke and the bench image's build start beside the test run and wait for what they
/// need (issue 37): `scripts/ci-after TIMES BUILD CMD...` runs CMD only once scripts/ci-beside's
/// times file says BUILD ended with 0; a failed build, or one not ended within the wait, is one
/// line and exit 1 with CMD not run; a wrong wait or a missing argument is exit 2. Past the wait
/// it is CMD itself: here `scripts/fuzz-campaign --smoke` with an opt-level that campaign refuses,
/// so that its own one-line refusal shows the hand-over without running a fuzzer.
#[test]
fn a_job_after_a_build_waits_for_it_and_runs_only_after_a_good_one() {
    let dir = tempfile::tempdir().unwrap();
    let times = dir.path().join("times.tsv");
    let smoke = repo().join("scripts/fuzz-campaign");
    let run = |wait: &str, rows: &str, args: &[&str]| -> Output {
        fs::write(&times, rows).unwrap();
        let mut c = Command::new("bash");
        c.arg(repo().join("scripts/ci-after"))
            .arg(&times)
            .arg("fuzz-build")
            .arg(&smoke)
            .arg("--smoke")
            .args(args)
            .env("IC_BENCH_CI_AFTER_WAIT", wait)
            .stdin(Stdio::null());
        c.output().expect("bash runs")
    };
    let err = |o: &Output| String::from_utf8_lossy(&o.stderr).into_owned();
    let failed = run("60", "cargo-fuzz-install\t9.0\t0\t100\nfuzz-build\t1.0\t101\t50\n", &[]);
    assert_eq!(failed.status.code(), Some(1), "{}", err(&failed));
    assert!(err(&failed).contains("fuzz-build failed (exit 101"), "{}", err(&failed));
    assert_eq!(err(&failed).lines().count(), 1, "{}", err(&failed));
    // Another build's good row is not this one's.
    let started = Instant::now();
    let never = run("1", "cargo-fuzz-install\t9.0\t0\t100\nrelease\t3.0\t0\t9\n", &[]);
    assert_eq!(never.status.code(), Some(1), "{}", err(&never));
    assert!(
        err(&never).contains("fuzz-build had not ended after 1 s"),
        "{}",
        err(&never)
    );
    assert!(started.elapsed() < Duration::from_secs(15), "the wait has a deadline");
    let bad_wait = run("soon", "", &[]);
    assert_eq!(bad_wait.status.code(), Some(2), "{}", err(&bad_wait));
    assert!(
        err(&bad_wait).contains("must be whole seconds, not 'soon'"),
        "{}",
        err(&bad_wait)
    );
    let built = run("60", "fuzz-build\t1.0\t0\t50\n", &["--opt-level", "9"]);
    let out = String::from_utf8_lossy(&built.stdout);
    assert!(out.contains("fuzz-build has ended well"), "{out}{}", err(&built));
    assert_eq!(
        built.status.code(),
        Some(2),
        "fuzz-campaign's own refusal: {}",
        err(&built)
    );
    assert!(err(&built).starts_with("fuzz-campaign: "), "{}", err(&built));
    let no_cmd = script("ci-after", &[times.to_str().unwrap(), "fuzz-build"]);
    assert_eq!(no_cmd.status.code(), Some(2), "{}", err(&no_cmd));
}

/// Runs `body` in `dir` after `.ci/run`'s own step and beside-job functions, cut out of it (from
/// its start line to its EXIT trap), with an empty times file at `target/times.tsv`.
fn with_ci_functions(dir: &Path, body: &str) -> Output {
    let script = fs::read_to_string(repo().join(".ci/run")).unwrap();
    let from = script.find("start=$(date +%s%N)").expect(".ci/run has no start line");
    let to = script
        .find("trap 'rc=$?; stop_beside;")
        .expect(".ci/run has no EXIT trap");
    fs::create_dir(dir.join("target")).unwrap();
    let harness = format!(
        "set -euo pipefail\n{}\nbeside_times=$PWD/target/times.tsv\n: >\"$beside_times\"\n{body}",
        &script[from..to]
    );
    fs::write(dir.join("harness.sh"), harness).unwrap();
    Command::new("bash")
        .arg("harness.sh")
        .current_dir(dir)
        .output()
        .unwrap()
}

/// `beside_nice=0 beside_job ...` runs its job at nice 0 (the image check beside ASan, issue 37);
/// without it a job runs at nice 19 (the builds beside the test run). `.ci/run`'s own functions.
#[test]
fn a_job_beside_runs_at_nice_19_unless_told() {
    let dir = tempfile::tempdir().unwrap();
    let out = with_ci_functions(
        dir.path(),
        "beside_job low low.log '-c 3' nice\nbeside_nice=0 beside_job same same.log '-c 2' nice\n\
         begin w\nwait_beside low\nwait_beside same\nend\n",
    );
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    // The harness itself runs at the test's niceness (0 unless the test run was reniced).
    let base: i32 = String::from_utf8(Command::new("nice").output().unwrap().stdout)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    let read = |f: &str| -> i32 { fs::read_to_string(dir.path().join(f)).unwrap().trim().parse().unwrap() };
    assert_eq!(read("low.log"), (base + 19).min(19), "a job beside is at nice 19");
    assert_eq!(read("same.log"), base, "beside_nice=0 keeps the caller's priority");
}

fn check_glibc(file: &Path, max: Option<&str>) -> Output {
    let mut c = Command::new("bash");
    c.arg(repo().join("scripts/check-glibc")).arg(file);
    if let Some(m) = max {
        c.arg(m);
    }
    c.output().expect("bash runs")
}

fn executable(path: &Path, bytes: &[u8]) {
    fs::write(path, bytes).unwrap();
    fs::set_permissions(path, fs::Permissions::from_mode(0o755)).unwrap();
}

/// A static x86-64 ELF executable with no dynamic section (`exit(0)` by syscall), written byte by
/// byte: what a static build (or a binary for another libc) looks like to check-glibc.
fn static_elf() -> Vec<u8> {
    let code: [u8; 9] = [0xb8, 60, 0, 0, 0, 0x31, 0xff, 0x0f, 0x05];
    let (base, ehsize, phsize) = (0x40_0000u64, 64u16, 56u16);
    let total = u64::from(ehsize) + u64::from(phsize) + code.len() as u64;
    let mut b = Vec::new();
    b.extend_from_slice(b"\x7fELF\x02\x01\x01\x00");
    b.extend_from_slice(&[0; 8]);
    b.extend_from_slice(&2u16.to_le_bytes()); // ET_EXEC
    b.extend_from_slice(&0x3eu16.to_le_bytes()); // x86-64
    b.extend_from_slice(&1u32.to_le_bytes());
    b.extend_from_slice(&(base + u64::from(ehsize) + u64::from(phsize)).to_le_bytes()); // entry
    b.extend_from_slice(&u64::from(ehsize).to_le_bytes()); // program headers
    b.extend_from_slice(&0u64.to_le_bytes()); // no section headers
    b.extend_from_slice(&0u32.to_le_bytes());
    for v in [ehsize, phsize, 1, 0, 0, 0] {
        b.extend_from_slice(&v.to_le_bytes());
    }
    b.extend_from_slice(&1u32.to_le_bytes()); // PT_LOAD
    b.extend_from_slice(&5u32.to_le_bytes()); // R+X
    for v in [0, base, base, total, total, 0x1000] {
        b.extend_from_slice(&v.to_le_bytes());
    }
    b.extend_from_slice(&code);
    b
}

#[test]
fn check_glibc_fails_a_binary_with_no_versioned_glibc_symbol() {
    let dir = tempfile::tempdir().unwrap();
    // A dynamic ELF object that uses no libc at all: dynamic symbols, none of them GLIBC_.
    let src = dir.path().join("f.c");
    fs::write(&src, "int f(void) { return 0; }\n").unwrap();
    let so = dir.path().join("f.so");
    let cc = Command::new("cc")
        .args(["-shared", "-nostdlib", "-o"])
        .arg(&so)
        .arg(&src)
        .output()
        .expect("cc runs (cargo links with it)");
    assert!(cc.status.success(), "{}", String::from_utf8_lossy(&cc.stderr));
    let out = check_glibc(&so, None);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.contains("has no versioned glibc symbol"), "{err}");

    // A static executable (no dynamic symbol table): also refused, whatever the limit.
    let exe = dir.path().join("static");
    executable(&exe, &static_elf());
    assert!(Command::new(&exe).status().unwrap().success(), "the stand-in runs");
    for max in [None, Some("99.0")] {
        let out = check_glibc(&exe, max);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "limit {max:?}: {err}");
        assert!(err.contains("cannot check its glibc needs"), "limit {max:?}: {err}");
    }
}

#[test]
fn check_glibc_still_judges_a_glibc_linked_binary_by_its_limit() {
    // This test binary is linked against the build machine's glibc (2.2.5 at least).
    let me = std::env::current_exe().unwrap();
    let ok = check_glibc(&me, Some("99.0"));
    let out = String::from_utf8_lossy(&ok.stdout);
    assert_eq!(ok.status.code(), Some(0), "{}", String::from_utf8_lossy(&ok.stderr));
    assert!(out.contains("needs GLIBC_2."), "{out}");
    let low = check_glibc(&me, Some("2.0"));
    let err = String::from_utf8_lossy(&low.stderr);
    assert_eq!(low.status.code(), Some(1), "{err}");
    assert!(err.contains("above 2.0"), "{err}");
}

fn test_timer() -> PathBuf {
    repo().join("scripts/test-timer")
}

#[test]
fn test_timer_gives_only_the_named_binary_its_test_threads_and_refuses_a_bad_entry() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("kube-0123456789abcdef");
    executable(&bin, b"#!/usr/bin/env bash\necho \"args: $*\"\n");
    let run = |package: &str, threads: &str, times: bool| {
        let mut cmd = Command::new("bash");
        cmd.arg(test_timer())
            .arg(&bin)
            .env("CARGO_PKG_NAME", package)
            .env("IC_BENCH_TEST_THREADS", threads);
        if times {
            cmd.env("IC_BENCH_TEST_TIMES", dir.path().join("times.tsv"));
        } else {
            cmd.env_remove("IC_BENCH_TEST_TIMES");
        }
        let out = cmd.output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    // Named (package and binary): its threads, timed or not.
    let (code, out, _) = run("ic-bench", "other/x=4 ic-bench/kube=3", true);
    assert_eq!(code, Some(0));
    assert!(
        out.contains("args: --test-threads 3 -Z unstable-options --report-time"),
        "{out}"
    );
    let (_, out, _) = run("ic-bench", "ic-bench/kube=3", false);
    assert_eq!(out.trim_end(), "args: --test-threads 3");
    // A binary of the same name in another package keeps libtest's default.
    let (_, out, _) = run("icb-core", "ic-bench/kube=3", false);
    assert_eq!(out.trim_end(), "args:");
    // A malformed entry is one line and exit 2, and the binary does not run.
    for bad in ["kube=3", "ic-bench/kube=0", "ic-bench/kube=three", "ic-bench/kube"] {
        let (code, out, err) = run("ic-bench", bad, false);
        assert_eq!(code, Some(2), "{bad}: {out}");
        assert!(out.is_empty(), "{bad}: {out}");
        assert_eq!(err.lines().count(), 1, "{bad}: {err}");
        assert!(err.contains(&format!("not '{bad}'")), "{bad}: {err}");
    }
}

#[test]
fn test_timer_times_a_binary_and_reports_the_slowest() {
    let dir = tempfile::tempdir().unwrap();
    // A stand-in test binary: prints what libtest prints with --report-time, and its arguments.
    let bin = dir.path().join("fake_tests-0123456789abcdef");
    executable(
        &bin,
        b"#!/usr/bin/env bash\necho \"args: $* bootstrap=${RUSTC_BOOTSTRAP:-}\"\nsleep 0.2\nexit 3\n",
    );
    let times = dir.path().join("times.tsv");
    let out = Command::new("bash")
        .arg(test_timer())
        .arg(&bin)
        .arg("--exact")
        .env("IC_BENCH_TEST_TIMES", &times)
        .env("CARGO_PKG_NAME", "pkg")
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(3), "the binary's exit code is kept: {stdout}");
    assert!(
        stdout.contains("args: --exact -Z unstable-options --report-time bootstrap=1"),
        "{stdout}"
    );
    let row = fs::read_to_string(&times).unwrap();
    let cols: Vec<&str> = row.trim_end().split('\t').collect();
    assert_eq!(cols[1..3], ["3", "pkg/fake_tests"], "{row}");
    let secs: f64 = cols[0].parse().unwrap();
    assert!((0.2..10.0).contains(&secs), "{row}");
    // The CPU it used: a sleeping stand-in uses far less than its wall time.
    let cpu: f64 = cols[3].parse().unwrap();
    assert!((0.0..secs).contains(&cpu), "{row}");

    // Without IC_BENCH_TEST_TIMES it only runs the binary, unchanged.
    let plain = Command::new("bash")
        .arg(test_timer())
        .arg(&bin)
        .env_remove("IC_BENCH_TEST_TIMES")
        .env_remove("RUSTC_BOOTSTRAP")
        .output()
        .unwrap();
    assert_eq!(plain.status.code(), Some(3));
    assert!(String::from_utf8_lossy(&plain.stdout).contains("args:  bootstrap=\n"));

    let log = dir.path().join("log");
    fs::write(
        &log,
        "     Running tests/a.rs (target/debug/deps/a-0123456789abcdef)\n\nrunning 2 tests\n\
         test slow_one ... ok <2.500s>\ntest quick ... ok <0.001s>\n\n\
         test result: ok. 2 passed; 0 failed; 1 ignored; 0 measured; 0 filtered out; finished in 2.50s\n\
              Running unittests src/lib.rs (target/debug/deps/icb_core-fedcba9876543210)\n\
         test m::slower ... FAILED <7.250s>\n\
         test result: FAILED. 0 passed; 1 failed; 0 ignored; 0 measured; 0 filtered out; finished in 7.25s\n",
    )
    .unwrap();
    let rep = Command::new("bash")
        .arg(test_timer())
        .args(["--report"])
        .arg(&log)
        .arg("2")
        .env("IC_BENCH_TEST_TIMES", &times)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&rep.stdout);
    assert_eq!(rep.status.code(), Some(0), "{}", String::from_utf8_lossy(&rep.stderr));
    let slowest: Vec<&str> = text
        .lines()
        .skip_while(|l| !l.contains("slowest tests"))
        .skip(1)
        .take(2)
        .map(str::trim)
        .collect();
    assert_eq!(slowest, ["7.250  icb_core  m::slower", "2.500  a  slow_one"], "{text}");
    assert!(text.contains("pkg/fake_tests"), "{text}");
    assert!(
        text.contains("2 test result lines: 2 passed, 1 failed, 1 ignored"),
        "{text}"
    );
}

/// A test binary named in IC_BENCH_TEST_BESIDE runs in the background while cargo goes on
/// (issue 37: `sweep_soak` mostly waits): the runner returns at once, `--wait-beside` waits for
/// it, adds its output to the log, records its row and exits with its failure; past the wait it
/// is stopped (124), and `--stop-beside` (CI's exit trap) stops one still running.
#[test]
fn test_timer_runs_a_named_binary_beside_and_the_wait_makes_its_result_the_steps() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("soak-0123456789abcdef");
    executable(
        &bin,
        b"#!/usr/bin/env bash\necho \"running 1 test\"\nsleep \"${FAKE_SLEEP:-1}\"\n\
          echo \"test soaked ... ok <1.000s>\"\n\
          echo \"test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 1.00s\"\n\
          exit \"${FAKE_RC:-0}\"\n",
    );
    let times = dir.path().join("times.tsv");
    fs::write(&times, "").unwrap();
    let log = dir.path().join("test.log");
    let start = |beside: &str, env: &[(&str, &str)], with_times: bool| -> (Option<i32>, String, String, Duration) {
        let mut c = Command::new("bash");
        c.arg(test_timer())
            .arg(&bin)
            .env("CARGO_PKG_NAME", "pkg")
            .env("IC_BENCH_TEST_BESIDE", beside)
            .envs(env.iter().copied());
        if with_times {
            c.env("IC_BENCH_TEST_TIMES", &times);
        } else {
            c.env_remove("IC_BENCH_TEST_TIMES");
        }
        let t = Instant::now();
        let out = c.output().unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
            t.elapsed(),
        )
    };
    let wait = |secs: &str| -> Output {
        Command::new("bash")
            .arg(test_timer())
            .arg("--wait-beside")
            .arg(&log)
            .arg(secs)
            .env("IC_BENCH_TEST_TIMES", &times)
            .output()
            .unwrap()
    };
    // Named: back at once, and the wait makes its output the log's and its row the file's.
    let (code, out, _, took) = start("other/x pkg/soak", &[("FAKE_SLEEP", "2")], true);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("pkg/soak runs beside"), "{out}");
    assert!(took < Duration::from_secs(2), "the runner waited for it: {took:?}");
    let ok = wait("60");
    assert_eq!(ok.status.code(), Some(0), "{}", String::from_utf8_lossy(&ok.stderr));
    let text = fs::read_to_string(&log).unwrap();
    assert!(text.contains("Running pkg/soak beside"), "{text}");
    assert!(text.contains("test result: ok. 1 passed"), "{text}");
    let rows = fs::read_to_string(&times).unwrap();
    assert!(rows.contains("\t0\tpkg/soak\t"), "{rows}");
    // Its failure is the wait's.
    let (code, ..) = start("pkg/soak", &[("FAKE_RC", "3")], true);
    assert_eq!(code, Some(0));
    let failed = wait("60");
    assert_eq!(failed.status.code(), Some(3));
    assert!(
        String::from_utf8_lossy(&failed.stderr).contains("pkg/soak (beside) failed: exit 3"),
        "{}",
        String::from_utf8_lossy(&failed.stderr)
    );
    // Past the wait it is stopped, and the wait says so.
    let (code, ..) = start("pkg/soak", &[("FAKE_SLEEP", "60")], true);
    assert_eq!(code, Some(0));
    let t = Instant::now();
    let late = wait("1");
    assert_eq!(late.status.code(), Some(124));
    assert!(t.elapsed() < Duration::from_secs(15), "the wait has a deadline");
    assert!(
        fs::read_to_string(&log)
            .unwrap()
            .contains("had not ended within the wait of 1 s")
    );
    // CI's exit trap stops one still running: its process group is gone.
    let (code, ..) = start("pkg/soak", &[("FAKE_SLEEP", "60")], true);
    assert_eq!(code, Some(0));
    let pid_file = dir.path().join("times.tsv.beside/pkg--soak.pid");
    let pgid: i32 = fs::read_to_string(&pid_file).unwrap().trim().parse().unwrap();
    let stop = Command::new("bash")
        .arg(test_timer())
        .arg("--stop-beside")
        .env("IC_BENCH_TEST_TIMES", &times)
        .output()
        .unwrap();
    assert_eq!(stop.status.code(), Some(0));
    // Alive: its /proc entry is there and not a zombie's (nobody may reap an orphan here).
    let alive = || {
        fs::read_to_string(format!("/proc/{pgid}/stat")).is_ok_and(|st| {
            st.rsplit(')')
                .next()
                .is_some_and(|rest| !rest.trim_start().starts_with('Z'))
        })
    };
    let gone = Instant::now() + Duration::from_secs(10);
    while alive() && Instant::now() < gone {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!alive(), "the binary beside still runs");
    // A malformed entry, or no times file to keep its output beside, is one line and exit 2.
    for (beside, with_times, want) in [
        ("soak", true, "not 'soak'"),
        ("pkg/soak", false, "needs IC_BENCH_TEST_TIMES"),
    ] {
        let (code, out, err, _) = start(beside, &[], with_times);
        assert_eq!(code, Some(2), "{beside}: {out}");
        assert_eq!(err.lines().count(), 1, "{beside}: {err}");
        assert!(err.contains(want), "{beside}: {err}");
    }
}

/// CI's log holds every test of the workspace, far more than a pipe holds: the report reads its
/// inputs whole and exits 0. (It once ended `sort | head` under `pipefail`: sort, still writing
/// when head had its 15 lines, died of SIGPIPE, the report exited 141 and failed CI after every
/// test had passed.)
#[test]
fn test_timer_report_of_a_long_log_exits_zero_and_prints_every_table() {
    let dir = tempfile::tempdir().unwrap();
    let mut log = String::from("     Running tests/big.rs (target/debug/deps/big-0123456789abcdef)\n");
    let mut times = String::new();
    for i in 0..20_000 {
        log.push_str(&format!(
            "test a_module::a_rather_long_test_name_number_{i:05} ... ok <{}.{:03}s>\n",
            i % 97,
            i % 1000
        ));
        times.push_str(&format!("{}.5\t0\tpkg/binary_{i:05}\n", i % 89));
    }
    log.push_str("test result: ok. 20000 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 9.00s\n");
    let (log_path, times_path) = (dir.path().join("log"), dir.path().join("times.tsv"));
    fs::write(&log_path, log).unwrap();
    fs::write(&times_path, times).unwrap();
    let rep = Command::new("bash")
        .arg(test_timer())
        .arg("--report")
        .arg(&log_path)
        .arg("15")
        .env("IC_BENCH_TEST_TIMES", &times_path)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&rep.stdout);
    assert_eq!(
        rep.status.code(),
        Some(0),
        "{text}{}",
        String::from_utf8_lossy(&rep.stderr)
    );
    assert!(text.contains("20000 test binaries ran for"), "{text}");
    assert!(
        text.contains("1 test result lines: 20000 passed, 0 failed, 0 ignored"),
        "{text}"
    );
    let slowest_tests = text
        .lines()
        .skip_while(|l| !l.contains("slowest tests"))
        .skip(1)
        .take_while(|l| l.starts_with("  "))
        .count();
    assert_eq!(slowest_tests, 15, "{text}");
}

/// The `[[test]]` paths of a Cargo.toml whose package sets `autotests = false`, or `None` where
/// cargo finds the test files itself.
fn explicit_test_targets(manifest: &str) -> Option<Vec<String>> {
    let mut in_package = false;
    let mut autotests = true;
    let mut paths = Vec::new();
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            in_package = line == "[package]";
        } else if in_package && line.replace(' ', "") == "autotests=false" {
            autotests = false;
        } else if let Some(p) = line.strip_prefix("path = \"tests/") {
            paths.push(p.trim_end_matches('"').to_string());
        }
    }
    (!autotests).then_some(paths)
}

/// With `autotests = false` a new tests/*.rs file is compiled only once a test binary names it:
/// every file must be a `[[test]]` target itself or a `mod <file>;` of one, so none is left out
/// of `cargo test` without a word.
#[test]
fn every_test_file_is_compiled_into_a_test_binary() {
    let mut packages = vec![repo().to_path_buf()];
    for e in fs::read_dir(repo().join("crates")).unwrap() {
        packages.push(e.unwrap().path());
    }
    let (mut checked, mut merged) = (0, 0);
    for pkg in packages {
        let Ok(manifest) = fs::read_to_string(pkg.join("Cargo.toml")) else {
            continue;
        };
        let Some(targets) = explicit_test_targets(&manifest) else {
            continue;
        };
        merged += 1;
        let tests = pkg.join("tests");
        let mut modules = Vec::new();
        for t in &targets {
            let src = fs::read_to_string(tests.join(t)).unwrap_or_else(|e| panic!("{}: {t}: {e}", pkg.display()));
            for line in src.lines() {
                if let Some(m) = line.trim().strip_prefix("mod ").and_then(|m| m.strip_suffix(';')) {
                    modules.push(format!("{m}.rs"));
                }
            }
        }
        for e in fs::read_dir(&tests).unwrap() {
            let name = e.unwrap().file_name().into_string().unwrap();
            if !name.ends_with(".rs") {
                continue;
            }
            checked += 1;
            assert!(
                targets.contains(&name) || modules.contains(&name),
                "{}/tests/{name} is in no test binary: add `mod {};` to one of {targets:?} (Cargo.toml has autotests = false)",
                pkg.display(),
                name.trim_end_matches(".rs")
            );
        }
    }
    assert!(merged >= 1 && checked >= merged, "{merged} packages, {checked} files");
}

/// A one-file crate in its own directory, built through `scripts/linted` into its own target dir.
fn linted_build(dir: &Path, main_rs: &str) -> Output {
    fs::create_dir_all(dir.join("src")).unwrap();
    fs::write(
        dir.join("Cargo.toml"),
        "[package]\nname = \"lintme\"\nversion = \"0.0.0\"\nedition = \"2024\"\n\n[workspace]\n",
    )
    .unwrap();
    fs::write(dir.join("src/main.rs"), main_rs).unwrap();
    Command::new(repo().join("scripts/linted"))
        .args(["cargo", "build", "--quiet", "--offline"])
        .current_dir(dir)
        .env("CARGO_TARGET_DIR", dir.join("target"))
        .env_remove("RUSTC_WORKSPACE_WRAPPER")
        .env_remove("CLIPPY_ARGS")
        .output()
        .unwrap()
}

/// CI lints while it builds the tests (issue 37): `scripts/linted cargo ...` must fail on a clippy
/// lint as `cargo clippy -- -D warnings` does, naming it, and still build code without one (a
/// binary that runs). If the wrapper were dropped or its flags misspelt, the lint would pass here.
#[test]
fn linted_cargo_fails_on_a_clippy_lint_and_builds_clean_code() {
    let dir = tempfile::tempdir().unwrap();
    let bad = linted_build(
        &dir.path().join("bad"),
        "fn main() {\n    let v: Vec<u8> = Vec::new();\n    println!(\"{}\", v.len() == 0);\n}\n",
    );
    let err = String::from_utf8_lossy(&bad.stderr);
    assert_ne!(bad.status.code(), Some(0), "a lint must fail the build: {err}");
    assert!(
        err.contains("clippy::len_zero") || err.contains("length comparison to zero"),
        "{err}"
    );

    let good_dir = dir.path().join("good");
    let good = linted_build(&good_dir, "fn main() {\n    println!(\"built\");\n}\n");
    assert_eq!(good.status.code(), Some(0), "{}", String::from_utf8_lossy(&good.stderr));
    let ran = Command::new(good_dir.join("target/debug/lintme")).output().unwrap();
    assert_eq!(String::from_utf8_lossy(&ran.stdout), "built\n");

    let usage = Command::new(repo().join("scripts/linted")).output().unwrap();
    assert_eq!(usage.status.code(), Some(2));
    assert_eq!(String::from_utf8_lossy(&usage.stderr).lines().count(), 1);
}

/// `.ci/run` builds and runs the tests through `scripts/linted`, on every test target clippy's
/// `--all-targets` would check (the benches too), and still runs the README's test command.
#[test]
fn ci_run_lints_every_target_while_it_builds_the_tests() {
    let script = fs::read_to_string(repo().join(".ci/run")).unwrap();
    let commands: Vec<&str> = script.lines().map(str::trim).filter(|l| !l.starts_with('#')).collect();
    for want in [
        "scripts/linted cargo test --workspace --locked --no-run",
        "scripts/linted cargo test --workspace --locked --no-run --benches",
        "scripts/linted cargo test --workspace --locked 2>&1",
    ] {
        assert!(commands.iter().any(|l| l.starts_with(want)), ".ci/run has no `{want}`");
    }
    assert!(
        !commands.iter().any(|l| l.contains("cargo clippy")),
        "a separate clippy pass would check every crate a second time"
    );
}

/// The step table's CPU column: a job run beside (here two that each spin until they have used
/// half a CPU second, however loaded the machine) ends during step `a`, which polls for their
/// marker files but waits for neither; bash adds its CPU to the shell's children's then.
/// Step `a` still shows only its own (a sleep: about none), each job gets its own `(beside)` row
/// with its CPU, and step `b`, which waits for a job that has already ended, gets its exit code
/// and none of its CPU. The functions are `.ci/run`'s own, cut out of it.
#[test]
fn ci_run_counts_a_job_beside_in_its_own_row_not_in_the_step_it_ended_in() {
    let dir = tempfile::tempdir().unwrap();
    // A spin bounded by the CPU it has used, not by wall time: on a loaded machine (CI runs this
    // beside a hundred other tests) a one-second `timeout` spin got 0.3 CPU s. Fields 14 and 15
    // of /proc/PID/stat are its user and system ticks, read with builtins only (no fork).
    fs::write(
        dir.path().join("spin.sh"),
        "while :; do read -r -a f </proc/$$/stat; (( f[13] + f[14] >= 50 )) && break; done\n",
    )
    .unwrap();
    let spin = "bash spin.sh";
    let wait_both = "for _ in $(seq 600); do [ -e b.done ] && [ -e s.done ] && break; sleep 0.1; done";
    let body = format!(
        "beside_job builds b.log '-c 3' bash -c \"{spin}; printf 'one-build\\t1.0\\t0\\t100\\n' >>$beside_times; touch b.done\"\n\
         beside_job spin s.log '-c 2 -n 7' bash -c \"{spin}; touch s.done; exit 3\"\n\
         begin a\n{wait_both}\nsleep 0.5\nend\nbegin b\nwait_beside spin\necho \"spin rc=$beside_rc\"\nend\nsummary 0\n",
    );
    let out = with_ci_functions(dir.path(), &body);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "harness failed: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("spin rc=3"), "{stdout}");
    let cpu_of = |row: &str| -> f64 {
        let line = stdout
            .lines()
            .find(|l| l.trim_start().starts_with(row))
            .unwrap_or_else(|| panic!("no row {row}: {stdout}"));
        line.split_whitespace().last().unwrap().parse().unwrap()
    };
    assert!(cpu_of("a ") < 0.3, "step a counted the jobs' CPU: {stdout}");
    assert!(cpu_of("b ") < 0.3, "step b counted the job's CPU: {stdout}");
    assert!(
        cpu_of("spin (beside)") >= 0.4,
        "the spinning job's row lost its CPU: {stdout}"
    );
    assert_eq!(
        cpu_of("one-build (beside)"),
        1.0,
        "a build's row is its times-file line: {stdout}"
    );
}

/// The ASan step instruments the crates that may hold unsafe code, the packages whose tests it
/// runs and every crate depending on one, and reuses the rest from the test build (issue 37):
/// `scripts/asan --plan` names both sets. Every crate whose lib.rs allows unsafe code is a root,
/// whatever its name (a new FFI crate is instrumented without a list to update); a crate that
/// forbids unsafe code and reaches no root is not compiled again.
#[test]
fn asan_instruments_every_crate_that_allows_unsafe_code_and_reuses_the_rest() {
    let out = script("asan", &["--plan"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
    let set = |prefix: &str| -> Vec<String> {
        let line = text
            .lines()
            .find_map(|l| l.strip_prefix(prefix))
            .unwrap_or_else(|| panic!("no `{prefix}` line in {text}"));
        line.split_whitespace().map(String::from).collect()
    };
    let roots = set("instrumented roots:");
    let compiled = set("compiled and instrumented here:");
    let mut unsafe_crates = Vec::new();
    for dir in fs::read_dir(repo().join("crates")).unwrap() {
        let dir = dir.unwrap().path();
        let lib = fs::read_to_string(dir.join("src/lib.rs")).unwrap_or_default();
        if lib.contains("#![allow(unsafe_code)]") {
            let manifest = fs::read_to_string(dir.join("Cargo.toml")).unwrap();
            let name = manifest
                .lines()
                .find_map(|l| l.strip_prefix("name = \""))
                .and_then(|l| l.strip_suffix('"'))
                .unwrap();
            unsafe_crates.push(name.to_string());
        }
    }
    assert!(unsafe_crates.len() >= 6, "the FFI crates: {unsafe_crates:?}");
    for name in unsafe_crates.iter().map(String::as_str).chain([
        "icb-engine",
        "icb-pair",
        "icb-rails",
        "icb-kv-transfer",
        "ic-bench",
    ]) {
        assert!(roots.iter().any(|r| r == name), "{name} is not instrumented: {text}");
    }
    for name in &roots {
        assert!(compiled.contains(name), "{name}: {text}");
    }
    // Dependents of a root compile again; crates that reach no root are the test build's.
    for name in ["icb-nixl-engine", "icb-sides", "icb-gate"] {
        assert!(compiled.iter().any(|c| c == name), "{name} depends on a root: {text}");
    }
    for name in ["icb-core", "icb-recipe", "icb-probe", "icb-kube", "icb-testcluster"] {
        assert!(!compiled.iter().any(|c| c == name), "{name} is reused: {text}");
    }
}
