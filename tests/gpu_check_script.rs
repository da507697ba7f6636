//! `scripts/gpu-check` where there is no GPU: its arguments are checked before anything runs, and
//! without a CUDA driver it writes a skip report and exits 0 (nothing to measure is not a failure).
//! The driver is hidden with `GPU_CHECK_LIBCUDA`, so these run the same on a GPU machine. Its judge
//! (`--replay`) is tested on the three GPU days' runs (tests/fixtures/gpu-check/) and on a
//! regression of each kind injected into each.

use serde_json::{Value, json};
use std::path::Path;
use std::process::{Command, Output};

fn gpu_check(args: &[&str]) -> Output {
    Command::new("python3")
        .arg(Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/gpu-check"))
        .args(args)
        .env("GPU_CHECK_LIBCUDA", "libcuda-hidden-by-the-test.so.1")
        .output()
        .expect("python3 runs")
}

#[test]
fn without_a_driver_it_skips_cleanly_and_writes_the_report() {
    let dir = tempfile::tempdir().unwrap();
    let report = dir.path().join("report.txt");
    let out = gpu_check(&["--no-build", "--out", report.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(0), "{}", String::from_utf8_lossy(&out.stderr));
    let text = std::fs::read_to_string(&report).unwrap();
    assert!(text.starts_with("gpu-check: skipped: no CUDA driver\n"), "{text}");
    assert!(text.contains("unmeasured on this machine"), "{text}");
}

#[test]
fn bad_sizes_are_one_line_and_exit_2() {
    for bad in ["abc", "0", ","] {
        let out = gpu_check(&["--no-build", "--sizes", bad]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "--sizes {bad}: {err}");
        assert_eq!(err.lines().count(), 1, "--sizes {bad}: {err}");
        assert!(err.starts_with("gpu-check: error: --sizes"), "--sizes {bad}: {err}");
    }
}

#[test]
fn an_unknown_flag_is_refused_with_exit_2() {
    let out = gpu_check(&["--no-such-flag"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("unrecognized arguments: --no-such-flag"));
}

#[test]
fn an_unknown_part_to_skip_is_one_line_and_exit_2() {
    let out = gpu_check(&["--no-build", "--skip", "nixl,warp"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(
        err.starts_with("gpu-check: error: --skip warp: name parts among"),
        "{err}"
    );
}

// ---- The judge (`--replay`): the three GPU days' runs, reconstructed from docs/benchmarks/ into
// tests/fixtures/gpu-check/, against scripts/gpu_check_expect.py's table for one GPU without a NIC.

const DAYS: [&str; 3] = ["gpu-day-1", "gpu-day-2", "gpu-day-3"];

fn fixture(day: &str) -> Value {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/fixtures/gpu-check/{day}.json"));
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

/// `gpu-check --replay` on a summary: (exit code, stdout, stderr).
fn replay(summary: &Value) -> (Option<i32>, String, String) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("report.json");
    std::fs::write(&file, summary.to_string()).unwrap();
    let out = gpu_check(&["--replay", file.to_str().unwrap()]);
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    (out.status.code(), text(&out.stdout), text(&out.stderr))
}

fn deviations(stdout: &str) -> Vec<&str> {
    stdout.lines().filter_map(|l| l.strip_prefix("DEVIATION: ")).collect()
}

fn case_mut<'a>(s: &'a mut Value, part: &str, what: &str, size: u64, pair: &str) -> &'a mut Value {
    s["cases"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|c| {
            c["part"] == part && (c["test"] == what || c["op"] == what) && c["size_mib"] == size && c["pair"] == pair
        })
        .unwrap_or_else(|| panic!("no {part} {what} {size}MiB {pair} case"))
}

#[test]
fn each_gpu_day_replayed_is_as_expected() {
    for (day, cases) in DAYS.iter().zip([26, 22, 47]) {
        let (code, out, err) = replay(&fixture(day));
        assert_eq!(code, Some(0), "{day}: {out}{err}");
        assert!(deviations(&out).is_empty(), "{day}: {out}");
        assert!(
            out.contains(&format!("judged as 1gpu ({cases} cases, 1 test binaries)")),
            "{day}: {out}"
        );
        assert!(out.trim_end().ends_with("gpu-check: as expected"), "{day}: {out}");
    }
}

/// One regression of each kind, injected into each day's run: exit 1, and the deviation named.
#[test]
fn a_regression_injected_into_each_day_exits_1_naming_it() {
    type Inject = fn(&mut Value);
    let injections: [(Inject, &str); 11] = [
        (
            |s| case_mut(s, "ucx", "tag_bw", 64, "cuda-cuda")["path"] = json!("tcp"),
            "ucx tag_bw 64MiB cuda-cuda: data path tcp, expected cuda_ipc",
        ),
        (
            |s| case_mut(s, "ucx", "put_bw", 64, "cuda-cuda")["ratio"] = json!(0.90),
            "ucx put_bw 64MiB cuda-cuda: 0.900x ucx_perftest, expected >= 0.97 at 64 MiB",
        ),
        (
            |s| case_mut(s, "ucx", "tag_bw", 64, "cuda-cuda")["ratio"] = Value::Null,
            "ucx tag_bw 64MiB cuda-cuda: no ucx_perftest ratio",
        ),
        (
            |s| {
                let c = case_mut(s, "ucx", "get_bw", 64, "cuda-cuda");
                c["verdict"] = json!("ok");
                c["path"] = json!("cuda_ipc");
                c["unrecorded"] = json!([]);
            },
            "ucx get_bw 64MiB cuda-cuda: verdict ok, expected fail",
        ),
        (
            |s| s["tests"][0]["passed"] = json!(0),
            "test with_ucx: 0 tests ran (its filter matched nothing)",
        ),
        (
            |s| {
                s["tests"][0]["rc"] = json!(101);
                s["tests"][0]["failed"] = json!(1);
            },
            "test with_ucx: exit 101, 1 failed",
        ),
        (
            |s| {
                let runs = s["runs"].as_array_mut().unwrap();
                runs.push(json!({"what": "nixl cuda-cuda", "rc": 3, "cases": 8}));
            },
            "run nixl cuda-cuda: exit 3 (only 0 or 1 is a judged run)",
        ),
        (
            |s| s["runs"] = json!([{"what": "nixl host-cuda", "rc": 1, "cases": 0}]),
            "run nixl host-cuda: no case in its report",
        ),
        (|s| s["cases"] = json!([]), "cases: the run reported no case at all"),
        (
            |s| s["bundle"]["missing"] = json!(["gpu-tests/pair_local"]),
            "bundle: gpu-tests/pair_local missing",
        ),
        (
            |s| s["plan"]["tests"] = json!(["with_ucx", "engine_transfers"]),
            "test engine_transfers: did not run",
        ),
    ];
    for day in DAYS {
        for (inject, named) in &injections {
            let mut s = fixture(day);
            inject(&mut s);
            let (code, out, err) = replay(&s);
            assert_eq!(code, Some(1), "{day}, expecting '{named}': {out}{err}");
            assert!(
                deviations(&out).iter().any(|d| d.starts_with(named)),
                "{day}: no deviation '{named}' in:\n{out}"
            );
            assert!(out.contains("deviation(s) from the expected outcomes"), "{day}: {out}");
        }
    }
}

#[test]
fn a_planned_case_that_is_missing_and_an_empty_plan_are_deviations() {
    let mut s = fixture("gpu-day-3");
    s["cases"].as_array_mut().unwrap().retain(|c| {
        !(c["part"] == "nixl"
            && c["op"] == "WRITE"
            && c["size_mib"] == 64
            && c["blocks"] == 16
            && c["pair"] == "cuda-cuda")
    });
    let (code, out, _) = replay(&s);
    assert_eq!(code, Some(1), "{out}");
    assert_eq!(
        deviations(&out),
        ["nixl WRITE 64MiB x16 cuda-cuda: planned, not reported"],
        "{out}"
    );
    s["plan"] = json!({"ucx": {}, "nixl": {}, "kv": [], "tests": []});
    let (code, out, _) = replay(&s);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        deviations(&out).contains(&"plan: empty (nothing was meant to run)"),
        "{out}"
    );
}

/// The same recorded runs judged as if measured on today's tree: exactly what the later fixes
/// changed comes out (day 3: the host->GPU warn of 0e5d295, the 1 MiB x1 floor of 45dd906).
#[test]
fn a_day_judged_as_todays_tree_names_what_later_fixes_changed() {
    let mut s = fixture("gpu-day-3");
    s.as_object_mut().unwrap().remove("fixes");
    let (code, out, _) = replay(&s);
    assert_eq!(code, Some(1), "{out}");
    let devs = deviations(&out);
    assert_eq!(devs.len(), 4, "{out}");
    for named in [
        "ucx tag_bw 1MiB host-cuda: verdict warn, expected ok",
        "ucx tag_bw 64MiB host-cuda: verdict warn, expected ok",
        "ucx tag_lat 64MiB host-cuda: verdict warn, expected ok",
        "nixl WRITE 1MiB x1 cuda-cuda: verdict fail, expected ok",
    ] {
        assert!(devs.iter().any(|d| d.starts_with(named)), "no '{named}' in:\n{out}");
    }
    let mut day1 = fixture("gpu-day-1");
    day1.as_object_mut().unwrap().remove("fixes");
    let (code, out, _) = replay(&day1);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        deviations(&out).contains(&"ucx tag_bw 64MiB cuda-host: 0.263x ucx_perftest, expected >= 0.97 at 64 MiB"),
        "day 1's unregistered host buffers (fixed by 652ee16): {out}"
    );
}

/// Two GPUs: the run must add the cross-device cases (UCX, NIXL, KV ranks on distinct GPUs); the
/// predicted ones are judged, the unpinned ones (get/READ between GPUs) printed as not judged.
#[test]
fn two_gpus_require_the_cross_device_cases_with_their_own_expectations() {
    let mut s = fixture("gpu-day-3");
    s["machine"]["gpus"] = json!(2);
    s["plan"]["cross"] = json!(true);
    let (code, out, _) = replay(&s);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("judged as multi-gpu"), "{out}");
    let missing = deviations(&out);
    assert!(
        missing.contains(&"ucx put_bw 64MiB cuda-cuda gpu0->gpu1: planned, not reported"),
        "{out}"
    );
    assert!(
        missing.contains(&"nixl READ 64MiB x16 cuda-cuda gpu0->gpu1: planned, not reported"),
        "{out}"
    );
    assert!(
        missing.contains(
            &"kv nixl READ llama-3.1-8b --isl 2048 --prefill-tp 1 --decode-tp 2 gpu0->gpu1: planned, not reported"
        ),
        "{out}"
    );
    let cases = s["cases"].as_array_mut().unwrap();
    let cross = |part: &str, what: &str, size: u64, blocks: u64, verdict: &str, path: &str| {
        let mut c = json!({"part": part, "size_mib": size, "pair": "cuda-cuda", "devices": "cross",
                           "verdict": verdict, "path": path, "ratio": 1.0});
        c[if part == "ucx" { "test" } else { "op" }] = json!(what);
        if part == "nixl" {
            c["blocks"] = json!(blocks);
        }
        c
    };
    for size in [1, 64] {
        cases.push(cross("ucx", "tag_bw", size, 0, "ok", "cuda_ipc"));
        cases.push(cross("ucx", "put_bw", size, 0, "ok", "cuda_ipc"));
        cases.push(cross("ucx", "get_bw", size, 0, "fail", "rma_emulated"));
        for blocks in [1, 16] {
            cases.push(cross("nixl", "WRITE", size, blocks, "ok", "cuda_ipc"));
            cases.push(cross("nixl", "READ", size, blocks, "fail", "rma_emulated"));
        }
    }
    for (op, verdict, path) in [("READ", "fail", "rma_emulated"), ("WRITE", "warn", "cuda_ipc")] {
        cases.push(
            json!({"part": "kv", "engine": "nixl", "op": op, "devices": "cross", "verdict": verdict,
                          "path": path, "shape": "llama-3.1-8b --isl 2048 --prefill-tp 1 --decode-tp 2"}),
        );
    }
    let (code, out, _) = replay(&s);
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("not judged: nixl READ 64MiB x16 cuda-cuda gpu0->gpu1: not judged (no GPU day has had this shape): fail over rma_emulated"),
        "{out}"
    );
    let put = s["cases"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|c| c["devices"] == "cross" && c["test"] == "put_bw" && c["size_mib"] == 64)
        .unwrap();
    put["ratio"] = json!(0.5);
    let (code, out, _) = replay(&s);
    assert_eq!(code, Some(1), "{out}");
    assert_eq!(
        deviations(&out),
        ["ucx put_bw 64MiB cuda-cuda gpu0->gpu1: 0.500x ucx_perftest, expected >= 0.97 at 64 MiB"]
    );
}

#[test]
fn a_gpu_with_an_rdma_nic_needs_rail_cases() {
    let mut s = fixture("gpu-day-3");
    s["machine"]["rdma_nics"] = json!(1);
    s["plan"]["rails"] = json!(true);
    let (code, out, _) = replay(&s);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("judged as gpu+rdma"), "{out}");
    assert_eq!(
        deviations(&out),
        ["rails: a GPU with an RDMA NIC, and no rail case reported"],
        "{out}"
    );
    // What UCX emulated without a NIC is printed as not judged there, not silently passed.
    assert!(out.contains("not judged: ucx get_bw 64MiB cuda-cuda:"), "{out}");
    let rail = |test: &str, path: &str| json!({"part": "rails", "rail": 0, "test": test, "size_mib": 64, "pair": "cuda-cuda", "verdict": "ok", "path": path});
    s["cases"]
        .as_array_mut()
        .unwrap()
        .extend([rail("put_bw", "rdma"), rail("get_bw", "tcp")]);
    let (code, out, _) = replay(&s);
    assert_eq!(code, Some(1), "{out}");
    assert_eq!(
        deviations(&out),
        ["rails0 get_bw 64MiB cuda-cuda: data path tcp, expected rdma (predicted)"],
        "{out}"
    );
}

#[test]
fn replay_of_bad_input_is_one_line_and_exit_2() {
    let dir = tempfile::tempdir().unwrap();
    let bad_json = dir.path().join("bad.json");
    std::fs::write(&bad_json, "{not json").unwrap();
    let array = dir.path().join("array.json");
    std::fs::write(&array, "[]").unwrap();
    let missing = dir.path().join("missing.json");
    for (file, says) in [
        (&bad_json, "not JSON"),
        (&array, "not a gpu-check summary"),
        (&missing, "No such file"),
    ] {
        let out = gpu_check(&["--replay", file.to_str().unwrap()]);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{err}");
        assert_eq!(err.lines().count(), 1, "{err}");
        assert!(
            err.starts_with("gpu-check: error: --replay") && err.contains(says),
            "{err}"
        );
    }
    // A summary of another schema, or of a machine without a GPU, is judged a deviation.
    let (code, out, _) = replay(&json!({"schema": "other"}));
    assert_eq!(code, Some(1), "{out}");
    assert_eq!(deviations(&out), ["summary: schema 'other', expected 'gpu-check/1'"]);
    let (code, out, _) = replay(&json!({"schema": "gpu-check/1", "machine": {"gpus": 0}}));
    assert_eq!(code, Some(1), "{out}");
    assert_eq!(deviations(&out), ["machine: no GPU in the summary: nothing to judge"]);
}

/// The live path without a GPU: a tree of stand-ins (tests/fixtures/gpu-check/fake/: a CUDA driver
/// built here with `cc`, ic-bench, ucx_perftest and the bundled test binaries) answering as the
/// one-GPU machine of the GPU days did. The run writes a summary its judge accepts; with two GPUs it
/// runs the cross-device cases with one CUDA_VISIBLE_DEVICES per side; an injected regression exits 1.
pub(crate) struct FakeMachine {
    pub(crate) dir: tempfile::TempDir,
}

impl FakeMachine {
    pub(crate) fn new() -> FakeMachine {
        let root = Path::new(env!("CARGO_MANIFEST_DIR"));
        let fake = root.join("tests/fixtures/gpu-check/fake");
        let dir = tempfile::tempdir().unwrap();
        let at = |p: &str| dir.path().join(p);
        for d in [
            "scripts",
            "target/release",
            ".deps/ucx/bin",
            ".deps/ucx/lib",
            ".gpubundle/gpu-tests",
            "no-rdma-nics",
        ] {
            std::fs::create_dir_all(at(d)).unwrap();
        }
        for (from, to) in [
            (root.join("scripts/gpu-check"), at("scripts/gpu-check")),
            (
                root.join("scripts/gpu_check_expect.py"),
                at("scripts/gpu_check_expect.py"),
            ),
            (
                root.join("scripts/gpu_check_alloc.py"),
                at("scripts/gpu_check_alloc.py"),
            ),
            (
                root.join("scripts/gpu_check_kv_nixl.py"),
                at("scripts/gpu_check_kv_nixl.py"),
            ),
            (fake.join("ic-bench"), at("target/release/ic-bench")),
            (fake.join("ucx_perftest"), at(".deps/ucx/bin/ucx_perftest")),
        ] {
            std::fs::copy(&from, &to).unwrap_or_else(|e| panic!("{}: {e}", from.display()));
        }
        for name in [
            "with_ucx",
            "with_ucx_alloc_modes",
            "engine_transfers",
            "pair_local",
            "nixl_pair",
        ] {
            std::fs::copy(fake.join("test-binary"), at(&format!(".gpubundle/gpu-tests/{name}"))).unwrap();
        }
        let cc = Command::new("cc")
            .args(["-shared", "-fPIC", "-o"])
            .arg(at("libcuda.so"))
            .arg(fake.join("libcuda.c"))
            .output()
            .expect("a C compiler (cc) builds the stand-in CUDA driver");
        assert!(cc.status.success(), "{}", String::from_utf8_lossy(&cc.stderr));
        FakeMachine { dir }
    }

    /// (exit code, stdout, the fake ic-bench's call log)
    pub(crate) fn run(&self, gpus: u32, regress: &str, args: &[&str]) -> (Option<i32>, String, String) {
        let at = |p: &str| self.dir.path().join(p);
        let log = at(format!("calls-{gpus}-{regress}.log").as_str());
        let out = Command::new("python3")
            .arg(at("scripts/gpu-check"))
            .args(["--no-build"])
            .args(args)
            .env("GPU_CHECK_LIBCUDA", at("libcuda.so"))
            .env("FAKE_GPUS", gpus.to_string())
            .env("GPU_CHECK_INFINIBAND", at("no-rdma-nics"))
            .env("FAKE_REGRESS", regress)
            .env("FAKE_LOG", &log)
            .env_remove("IC_BENCH_UCX_BIN")
            .env_remove("IC_BENCH_UCX_LIB")
            .env_remove("CUDA_VISIBLE_DEVICES")
            .output()
            .expect("python3 runs");
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        assert!(out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
        (
            out.status.code(),
            stdout,
            std::fs::read_to_string(log).unwrap_or_default(),
        )
    }
}

#[test]
fn the_live_path_on_a_stand_in_gpu_machine_writes_a_summary_its_judge_accepts() {
    let m = FakeMachine::new();
    let (code, out, calls) = m.run(1, "", &["--quick"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("judged as 1gpu (20 cases, 5 test binaries)"), "{out}");
    // The quick run's allocation modes, each with the mode it asked for.
    for mode in ["legacy", "vmm", "fabric"] {
        assert!(
            calls.contains(&format!("--memory cuda-cuda --cuda-alloc {mode} --tests put_bw")),
            "{calls}"
        );
    }
    assert!(
        out.contains("to record: alloc nixl vmm put_bw 64MiB cuda-cuda: fail over rma_emulated"),
        "{out}"
    );
    assert!(out.contains("gpu-check: as expected"), "{out}");
    assert!(
        calls.contains("--kv-shape llama-3.1-8b --isl 2048 --prefill-tp 2 --decode-tp 2 --kv-op read")
            && calls.contains("--kv-op write"),
        "the quick KV check runs READ and WRITE: {calls}"
    );
    let summary = m.dir.path().join("target/gpu-check/report.json");
    let replayed = gpu_check(&["--replay", summary.to_str().unwrap()]);
    assert_eq!(
        replayed.status.code(),
        Some(0),
        "the written summary replays as expected: {}",
        String::from_utf8_lossy(&replayed.stdout)
    );

    // The full run; its KV-against-NIXL part needs NIXL's Python API, which this tree has not
    // (tests/gpu_check_alloc.rs runs it in DRAM): skipped here, and said so.
    let (code, out, calls) = m.run(2, "", &["--skip", "kv-nixl"]);
    assert!(out.contains("kv-nixl: skipped (--skip)"), "{out}");
    assert!(
        calls.contains("--cuda-alloc pool"),
        "the full run measures every mode: {calls}"
    );
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("judged as multi-gpu"), "{out}");
    assert!(out.contains("ucx put_bw 64MiB cuda-cuda gpu0->gpu1"), "{out}");
    assert!(
        out.contains("not judged: nixl READ 64MiB x16 cuda-cuda gpu0->gpu1"),
        "{out}"
    );
    for side in [
        "serve CUDA_VISIBLE_DEVICES=1 --listen",
        "connect CUDA_VISIBLE_DEVICES=0 127.0.0.1:9 --json-line --require-cuda --engine nixl",
        "pair CUDA_VISIBLE_DEVICES=- --local --kv-shape llama-3.1-8b --isl 2048 --prefill-tp 1 --decode-tp 2",
    ] {
        assert!(calls.contains(side), "no '{side}' in the calls:\n{calls}");
    }

    for (regress, named) in [
        ("tcp", "ucx tag_bw 64MiB cuda-cuda: data path tcp, expected cuda_ipc"),
        ("nixl-rc", "run nixl cuda-cuda: exit 3 (only 0 or 1 is a judged run)"),
        ("zero-tests", "test nixl_pair: 0 tests ran (its filter matched nothing)"),
        (
            "vmm-silent",
            "alloc ucx vmm put_bw 64MiB cuda-cuda: verdict ok over rma_emulated: a silent pass off cuda_ipc",
        ),
        (
            "fabric-crash",
            "run alloc ucx fabric: exit 134 (only 0 or 1 is a judged run)",
        ),
        (
            "legacy-tcp",
            "alloc ucx legacy put_bw 64MiB cuda-cuda: data path tcp, expected cuda_ipc",
        ),
    ] {
        let (code, out, _) = m.run(1, regress, &["--quick"]);
        assert_eq!(code, Some(1), "{regress}: {out}");
        assert!(
            deviations(&out).iter().any(|d| d.starts_with(named)),
            "{regress}: no '{named}' in:\n{out}"
        );
    }
}
