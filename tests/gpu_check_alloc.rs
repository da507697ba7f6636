//! `scripts/gpu-check`'s allocation modes and its KV-against-NIXL part (issue 39), judged by
//! `--replay` on synthetic summaries: the third GPU day's run plus the alloc-mode cases a next GPU
//! day could report. Each mode's good outcome exits 0; each injected regression gives its own
//! deviation line and exit 1. And `scripts/bench-kv-vram`: it skips cleanly without a GPU, refuses
//! bad input in one line, and runs for real in host memory (DRAM) here.

use serde_json::{Value, json};
use std::path::Path;
use std::process::{Command, Output};

fn root() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

fn day3() -> Value {
    let path = root().join("tests/fixtures/gpu-check/gpu-day-3.json");
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

/// `gpu-check --replay` on a summary: (exit code, stdout).
fn replay(summary: &Value) -> (Option<i32>, String) {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("report.json");
    std::fs::write(&file, summary.to_string()).unwrap();
    let out = Command::new("python3")
        .arg(root().join("scripts/gpu-check"))
        .args(["--replay", file.to_str().unwrap()])
        .output()
        .expect("python3 runs");
    assert!(out.stderr.is_empty(), "{}", String::from_utf8_lossy(&out.stderr));
    (out.status.code(), String::from_utf8_lossy(&out.stdout).into_owned())
}

fn deviations(stdout: &str) -> Vec<&str> {
    stdout.lines().filter_map(|l| l.strip_prefix("DEVIATION: ")).collect()
}

/// One alloc case as gpu-check records it, with the outcome a mode's good run gives.
fn alloc_case(engine: &str, mode: &str) -> Value {
    let mut c = json!({"part": "alloc", "engine": engine, "mode": mode, "test": "put_bw", "size_mib": 64,
                       "pair": "cuda-cuda", "status": "measured", "verdict": "ok", "path": "cuda_ipc",
                       "reported_mode": mode, "settings_mode": mode, "legacy_ipc": "no", "finding": null,
                       "cuda_on_both_sides": true});
    match mode {
        "legacy" => c["legacy_ipc"] = json!("yes"),
        // The trap sprung: emulated, failed, and named for what it is.
        "vmm" => {
            c["path"] = json!("rma_emulated");
            c["verdict"] = json!("fail");
            c["finding"] = json!("allocator_fallback");
        }
        // UCX mapped it after all: over cuda_ipc, ok.
        "pool" => {}
        // No fabric handles on this device: the typed skip.
        _ => {
            c["status"] = json!("skipped");
            c["verdict"] = json!("skipped");
            c["reported_mode"] = Value::Null;
            c["legacy_ipc"] = Value::Null;
        }
    }
    c
}

/// Day 3 with the full run's alloc plan and every planned alloc case in its good outcome.
fn with_alloc() -> Value {
    let mut s = day3();
    s["plan"]["alloc"] = json!({"ucx": ["legacy", "vmm", "pool", "fabric"], "nixl": ["legacy", "vmm"]});
    let cases = s["cases"].as_array_mut().unwrap();
    for mode in ["legacy", "vmm", "pool", "fabric"] {
        cases.push(alloc_case("ucx", mode));
    }
    cases.extend([alloc_case("nixl", "legacy"), alloc_case("nixl", "vmm")]);
    s
}

fn alloc_mut<'a>(s: &'a mut Value, engine: &str, mode: &str) -> &'a mut Value {
    s["cases"]
        .as_array_mut()
        .unwrap()
        .iter_mut()
        .find(|c| c["part"] == "alloc" && c["engine"] == engine && c["mode"] == mode)
        .unwrap()
}

#[test]
fn every_allocation_mode_in_its_good_outcome_is_as_expected_and_marked_for_recording() {
    let (code, out) = replay(&with_alloc());
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("judged as 1gpu (53 cases, 1 test binaries)"), "{out}");
    for recorded in [
        "to record: alloc ucx vmm put_bw 64MiB cuda-cuda: fail over rma_emulated, legacy_ipc no, finding allocator_fallback (first recorded on the next GPU day)",
        "to record: alloc ucx pool put_bw 64MiB cuda-cuda: ok over cuda_ipc, legacy_ipc no, finding - (first recorded on the next GPU day)",
        "to record: alloc ucx fabric put_bw 64MiB cuda-cuda: the typed unsupported skip",
        "to record: alloc nixl vmm put_bw 64MiB cuda-cuda: fail over rma_emulated",
    ] {
        assert!(out.contains(recorded), "no '{recorded}' in:\n{out}");
    }
    // legacy is what days 1-3 recorded: judged, not marked for recording.
    assert!(!out.contains("to record: alloc ucx legacy"), "{out}");
    // A measured fabric case over cuda_ipc is as good as its skip.
    let mut s = with_alloc();
    let mut measured = alloc_case("ucx", "pool");
    for field in ["mode", "reported_mode", "settings_mode"] {
        measured[field] = json!("fabric");
    }
    *alloc_mut(&mut s, "ucx", "fabric") = measured;
    let (code, out) = replay(&s);
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("to record: alloc ucx fabric put_bw 64MiB cuda-cuda: ok over cuda_ipc"),
        "{out}"
    );
}

#[test]
fn each_injected_alloc_regression_is_its_own_deviation_and_exit_1() {
    type Inject = fn(&mut Value);
    let injections: [(Inject, &str); 9] = [
        (
            |s| {
                let c = alloc_mut(s, "ucx", "vmm");
                c["path"] = json!("tcp");
                c["finding"] = Value::Null;
            },
            "alloc ucx vmm put_bw 64MiB cuda-cuda: memory not legacy-IPC capable over tcp without the allocator_fallback finding",
        ),
        (
            |s| alloc_mut(s, "nixl", "vmm")["verdict"] = json!("ok"),
            "alloc nixl vmm put_bw 64MiB cuda-cuda: verdict ok over rma_emulated: a silent pass off cuda_ipc",
        ),
        (
            |s| {
                let c = alloc_mut(s, "ucx", "vmm");
                c["path"] = json!("tcp");
                c["verdict"] = json!("warn");
            },
            "alloc ucx vmm put_bw 64MiB cuda-cuda: verdict warn over tcp, expected fail",
        ),
        (
            |s| alloc_mut(s, "ucx", "pool")["reported_mode"] = json!("vmm"),
            "alloc ucx pool put_bw 64MiB cuda-cuda: the case's cuda_alloc.mode vmm, asked pool",
        ),
        (
            |s| alloc_mut(s, "nixl", "legacy")["settings_mode"] = json!("legacy-ish"),
            "alloc nixl legacy put_bw 64MiB cuda-cuda: settings.cuda_alloc legacy-ish, asked legacy",
        ),
        (
            |s| {
                let c = alloc_mut(s, "ucx", "fabric");
                c["status"] = json!("failed");
                c["verdict"] = json!("fail");
            },
            "alloc ucx fabric put_bw 64MiB cuda-cuda: case failed, expected measured or the typed unsupported skip",
        ),
        (
            |s| {
                let cases = s["cases"].as_array_mut().unwrap();
                cases.retain(|c| !(c["part"] == "alloc" && c["mode"] == "fabric"));
                s["runs"]
                    .as_array_mut()
                    .unwrap()
                    .push(json!({"what": "alloc ucx fabric", "rc": 134, "cases": 0}));
            },
            "run alloc ucx fabric: exit 134 (only 0 or 1 is a judged run)",
        ),
        (
            |s| {
                let c = alloc_mut(s, "ucx", "legacy");
                c["path"] = json!("rma_emulated");
                c["verdict"] = json!("fail");
            },
            "alloc ucx legacy put_bw 64MiB cuda-cuda: data path rma_emulated, expected cuda_ipc",
        ),
        (
            |s| alloc_mut(s, "ucx", "vmm")["status"] = json!("skipped"),
            "alloc ucx vmm put_bw 64MiB cuda-cuda: skipped, expected measured",
        ),
    ];
    for (inject, named) in &injections {
        let mut s = with_alloc();
        inject(&mut s);
        let (code, out) = replay(&s);
        assert_eq!(code, Some(1), "expecting '{named}': {out}");
        assert!(
            deviations(&out).iter().any(|d| d.starts_with(named)),
            "no deviation '{named}' in:\n{out}"
        );
    }
    // A fabric crash leaves no case: the planned case is missing too, on a line of its own.
    let mut s = with_alloc();
    injections[6].0(&mut s);
    let (_, out) = replay(&s);
    assert!(
        deviations(&out).contains(&"alloc ucx fabric put_bw 64MiB cuda-cuda: planned, not reported"),
        "{out}"
    );
    // A fabric skip where a side had no CUDA is not the typed unsupported skip.
    let mut s = with_alloc();
    alloc_mut(&mut s, "ucx", "fabric")["cuda_on_both_sides"] = json!(false);
    let (code, out) = replay(&s);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        deviations(&out).iter().any(|d| d.starts_with(
            "alloc ucx fabric put_bw 64MiB cuda-cuda: skipped, expected measured or, with CUDA on both sides"
        )),
        "{out}"
    );
}

/// The three GPU days' summaries have no alloc plan: they plan no alloc case and gain no deviation
/// (tests/gpu_check_script.rs replays them as they are); an alloc plan without its cases does.
#[test]
fn an_alloc_plan_without_its_cases_is_a_deviation_per_case() {
    let mut s = day3();
    s["plan"]["alloc"] = json!({"ucx": ["legacy", "vmm"], "nixl": []});
    let (code, out) = replay(&s);
    assert_eq!(code, Some(1), "{out}");
    assert_eq!(
        deviations(&out),
        [
            "alloc ucx legacy put_bw 64MiB cuda-cuda: planned, not reported",
            "alloc ucx vmm put_bw 64MiB cuda-cuda: planned, not reported"
        ],
        "{out}"
    );
}

/// The bundle check covers the alloc-mode memory test: a bundle without it is a deviation, on the
/// stand-in GPU machine of tests/gpu_check_script.rs.
#[test]
fn a_bundle_without_the_alloc_mode_test_is_a_deviation() {
    let m = crate::gpu_check_script::FakeMachine::new();
    let (code, out, _) = m.run(1, "", &["--quick"]);
    assert_eq!(code, Some(0), "{out}");
    assert!(
        out.contains("test with_ucx_alloc_modes every_cuda_allocation_mode_allocates_reports_and_moves_when_a_gpu_is_present: exit 0, 1 passed"),
        "{out}"
    );
    std::fs::remove_file(m.dir.path().join(".gpubundle/gpu-tests/with_ucx_alloc_modes")).unwrap();
    let (code, out, _) = m.run(1, "", &["--quick"]);
    assert_eq!(code, Some(1), "{out}");
    let devs = deviations(&out);
    assert!(
        devs.contains(&"bundle: gpu-tests/with_ucx_alloc_modes missing (scripts/gpu-bundle carries it)"),
        "{out}"
    );
    assert!(devs.contains(&"test with_ucx_alloc_modes: did not run"), "{out}");
}

fn kv_nixl_case() -> Value {
    let fig =
        |d: u64, p50: f64, post: f64| json!({"descriptors": d, "request_ms_p50": p50, "post_us_per_descriptor": post});
    json!({"part": "kv-nixl", "op": "WRITE", "shape": "llama-3.1-8b --isl 1024", "status": "ran", "nixl": "1.5.1",
           "settings": {
               "n": {"ratio": 0.91, "engine": fig(8192, 300.0, 34.0),
                     "python": {"expanded": fig(8192, 273.0, 31.0), "strided": fig(8192, 120.0, 12.0)}},
               "y": {"engine": {"failed": "VRAM memory is detected as host by UCX"},
                     "python": {"failed": "exit 1: registration refused"}}}})
}

#[test]
fn the_kv_nixl_part_is_judged_on_both_figures_and_records_the_ratio_without_a_bar() {
    let mut s = day3();
    s["plan"]["kv_nixl"] = json!([{"op": "WRITE", "shape": "llama-3.1-8b --isl 1024"}]);
    s["cases"].as_array_mut().unwrap().push(kv_nixl_case());
    let (code, out) = replay(&s);
    assert_eq!(code, Some(0), "a ratio under 0.97 is recorded, not failed: {out}");
    assert!(
        out.contains("to record: kv-nixl WRITE llama-3.1-8b --isl 1024 UCX_MEMTYPE_CACHE=n: ratio engine/python 0.910 (goal >= 0.97); ic-bench 8192 x, p50 300.000 ms, post 34.00 us/desc; NIXL 8192 x, p50 273.000 ms, post 31.00 us/desc; strided 8192 x"),
        "{out}"
    );
    assert!(
        out.contains("UCX_MEMTYPE_CACHE=y: ratio engine/python none (goal >= 0.97); ic-bench VRAM memory is detected as host by UCX"),
        "{out}"
    );
    let mut no_python = s.clone();
    let c = no_python["cases"].as_array_mut().unwrap().last_mut().unwrap();
    c["settings"]["n"]["python"] = json!({"failed": "exit 1"});
    c["settings"]["n"]["ratio"] = Value::Null;
    let (code, out) = replay(&no_python);
    assert_eq!(code, Some(1), "{out}");
    assert_eq!(
        deviations(&out),
        ["kv-nixl WRITE llama-3.1-8b --isl 1024: no figure of NIXL Python under UCX_MEMTYPE_CACHE=n"]
    );
    let mut skipped = s.clone();
    *skipped["cases"].as_array_mut().unwrap().last_mut().unwrap() = json!({"part": "kv-nixl", "op": "WRITE", "shape": "llama-3.1-8b --isl 1024", "status": "failed",
               "reason": "bench-kv-vram exit 2, no figures"});
    let (code, out) = replay(&skipped);
    assert_eq!(code, Some(1), "{out}");
    assert_eq!(
        deviations(&out),
        ["kv-nixl WRITE llama-3.1-8b --isl 1024: failed: bench-kv-vram exit 2, no figures, expected both figures"]
    );
}

fn bench_kv_vram(args: &[&str]) -> Output {
    Command::new("python3")
        .arg(root().join("scripts/bench-kv-vram"))
        .args(args)
        .env("GPU_CHECK_LIBCUDA", "libcuda-hidden-by-the-test.so.1")
        .output()
        .expect("python3 runs")
}

#[test]
fn bench_kv_vram_without_a_gpu_skips_in_one_line_and_refuses_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let json_out = dir.path().join("kv.json");
    let out = bench_kv_vram(&["--json", json_out.to_str().unwrap(), "--no-build"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout),
        "bench-kv-vram: skipped: no CUDA driver\n"
    );
    let written: Value = serde_json::from_str(&std::fs::read_to_string(&json_out).unwrap()).unwrap();
    assert_eq!(written, json!({"skipped": "no CUDA driver"}));
    for bad in [vec!["--reps", "0"], vec!["--memory", "dram", "--", "--isl", "16"]] {
        let out = bench_kv_vram(&bad);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{bad:?}: {err}");
        assert_eq!(err.lines().count(), 1, "{bad:?}: {err}");
        assert!(err.starts_with("bench-kv-vram: error: "), "{bad:?}: {err}");
    }
}

/// The same code path as in VRAM, for real, in host memory: ic-bench's KV transfer and NIXL's
/// Python API on its descriptor lists, both UCX_MEMTYPE_CACHE settings, expanded and strided.
#[test]
fn bench_kv_vram_measures_both_sides_in_dram() {
    let dir = tempfile::tempdir().unwrap();
    let json_out = dir.path().join("kv.json");
    let out = bench_kv_vram(&[
        "--memory",
        "dram",
        "--reps",
        "1",
        "--min-time",
        "0.05",
        "--exe",
        env!("CARGO_BIN_EXE_ic-bench"),
        "--json",
        json_out.to_str().unwrap(),
        "--",
        "--kv-shape",
        "llama-3.1-8b",
        "--isl",
        "16",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&json_out).unwrap()).unwrap();
    assert_eq!(r["memory"], "DRAM");
    for cache in ["n", "y"] {
        let s = &r["settings"][cache];
        let ratio = s["ratio"].as_f64().unwrap_or_else(|| panic!("{cache}: no ratio: {s}"));
        assert!(ratio > 0.0, "{cache}: {s}");
        let engine = &s["engine"];
        let expanded = &s["python"]["expanded"];
        let strided = &s["python"]["strided"];
        let n = engine["descriptors"].as_u64().unwrap();
        assert!(n > 1, "{s}");
        assert_eq!(expanded["descriptors"].as_u64(), Some(n), "the same lists: {s}");
        assert_eq!(engine["verified"], true, "{s}");
        // NIXL 1.5.1 (scripts/setup's) has strided lists: the same blocks as one row per side.
        assert_eq!(strided["descriptors"].as_u64(), Some(n), "{s}");
        assert_eq!(strided["rows"], 1, "{s}");
        for f in [engine, expanded, strided] {
            assert!(f["post_us_per_descriptor"].as_f64().unwrap() > 0.0, "{f}");
            assert!(f["request_ms_p50"].as_f64().unwrap() > 0.0, "{f}");
        }
        assert!(
            stdout.contains(&format!("UCX_MEMTYPE_CACHE={cache}: ratio engine/python ")),
            "{stdout}"
        );
    }
    assert!(stdout.contains("nixl strided"), "{stdout}");
}
