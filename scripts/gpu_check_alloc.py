"""The CUDA allocation modes in scripts/gpu-check (issue 39, "the allocator trap"): which modes
each run measures, how a mode's case is recorded in the summary, and the rule that judges it.

One `pair --local --memory cuda-cuda --cuda-alloc MODE --tests put_bw --sizes 64MiB` per mode and
engine (UCX; NIXL, whose put_bw is a WRITE). Each case enters the summary as

    {"part": "alloc", "engine": "ucx"|"nixl", "mode": ASKED, "test": "put_bw", "size_mib": 64,
     "pair": "cuda-cuda", "status": measured|skipped|failed, "verdict": ..., "path": ...,
     "reported_mode": cuda_alloc.mode, "legacy_ipc": cuda_alloc.legacy_ipc,
     "finding": verdict.finding, "settings_mode": settings.cuda_alloc,
     "cuda_on_both_sides": bool, "expected": RECORDED or NEXT_DAY}

What no GPU day has recorded is not pretended: only legacy has an outcome (cuMemAlloc memory, put
and NIXL WRITE over cuda_ipc, ok: days 1-3). vmm, pool and fabric are judged on consistency with
their own evidence, and their outcome is printed as "first recorded on the next GPU day":
- the reported mode (the case's and the run's settings) is the asked mode;
- over cuda_ipc the verdict is ok;
- off cuda_ipc never ok (no silent pass, no TCP pass), and memory the driver says is not
  legacy-IPC capable carries the typed `allocator_fallback` finding;
- fabric may be the typed "unsupported" skip: the case skipped with the CUDA driver up on both
  sides (a device without fabric handles), never a crash, a failed case or a pass.
A summary whose plan has no `alloc` (the three GPU days') plans no alloc case and is judged as
before.
"""

MODES = ("legacy", "vmm", "pool", "fabric")
SIZE_MIB = 64
TEST = "put_bw"
# quick: the recorded baseline, the trap itself (UCX and NIXL) and fabric's refusal path; full:
# every mode on UCX, legacy and vmm on NIXL.
PLANS = {
    "full": {"ucx": list(MODES), "nixl": ["legacy", "vmm"]},
    "quick": {"ucx": ["legacy", "vmm", "fabric"], "nixl": ["vmm"]},
}
RECORDED = "days 1-3: cuMemAlloc memory over cuda_ipc, ok"
NEXT_DAY = "first recorded on the next GPU day"


def expected_source(mode):
    return RECORDED if mode == "legacy" else NEXT_DAY


def case_id(c):
    return f"alloc {c['engine']} {c['mode']} {c['test']} {c['size_mib']}MiB {c['pair']}"


def planned(plan):
    """The alloc case ids a plan must report (none where the plan has no `alloc`)."""
    a = plan.get("alloc") or {}
    return [case_id({"engine": e, "mode": m, "test": TEST, "size_mib": SIZE_MIB, "pair": "cuda-cuda"})
            for e in ("ucx", "nixl") for m in a.get(e, [])]


def command(exe, engine, mode):
    cmd = [exe, "pair", "--local", "--memory", "cuda-cuda", "--cuda-alloc", mode, "--tests", TEST,
           "--sizes", str(SIZE_MIB << 20), "-o", "json"]
    # No --require-cuda: it would turn fabric's typed skip into a fail; the judge checks instead
    # that both sides had CUDA and that only fabric may skip.
    return cmd + (["--engine", "nixl", "--batches", "1"] if engine == "nixl" else [])


def cases_of(report, engine, mode):
    """The summary entries of one alloc run's report (see the module's docstring)."""
    report = report or {}
    sides = [((report.get(s) or {}).get("cuda") or {}).get("available") for s in ("server", "client")]
    settings_mode = (report.get("settings") or {}).get("cuda_alloc", "legacy")
    out = []
    for c in report.get("cases") or []:
        alloc = c.get("cuda_alloc") or {}
        verdict = c.get("verdict") or {}
        path = ((c.get("transport") or {}).get("data_path") or {}).get("class", "unknown")
        out.append({"part": "alloc", "engine": engine, "mode": mode, "test": c.get("test"),
                    "size_mib": (c.get("size") or 0) >> 20, "pair": f"{c['memory']['initiator']}-{c['memory']['target']}",
                    "status": c.get("status"), "verdict": verdict.get("status"), "path": path,
                    "reported_mode": alloc.get("mode"), "legacy_ipc": alloc.get("legacy_ipc"),
                    "finding": verdict.get("finding"), "settings_mode": settings_mode,
                    "cuda_on_both_sides": all(s is True for s in sides), "expected": expected_source(mode)})
    return out


def judge(c):
    """(deviations, notes) of one alloc case."""
    cid, mode = case_id(c), c["mode"]
    if mode not in MODES:
        return [f"{cid}: unknown allocation mode {mode!r}"], []
    devs, notes = [], []
    status = c.get("status")
    if status == "skipped":
        if mode == "fabric" and c.get("cuda_on_both_sides"):
            return [], [f"{cid}: the typed unsupported skip (no fabric handles on this device; {NEXT_DAY})"]
        also = " or, with CUDA on both sides, the typed unsupported skip" if mode == "fabric" else ""
        return [f"{cid}: skipped, expected measured{also}"], []
    if status != "measured":
        also = " or the typed unsupported skip" if mode == "fabric" else ""
        return [f"{cid}: case {status}, expected measured{also}"], []
    for field, what in (("reported_mode", "the case's cuda_alloc.mode"), ("settings_mode", "settings.cuda_alloc")):
        if c.get(field) != mode:
            devs.append(f"{cid}: {what} {c.get(field)}, asked {mode}")
    ipc, path, verdict, finding = c.get("legacy_ipc"), c.get("path"), c.get("verdict"), c.get("finding")
    if ipc not in ("yes", "no"):
        devs.append(f"{cid}: legacy_ipc {ipc}, expected the driver's yes or no")
    if mode == "legacy":
        if path != "cuda_ipc":
            devs.append(f"{cid}: data path {path}, expected cuda_ipc ({RECORDED})")
        if verdict != "ok":
            devs.append(f"{cid}: verdict {verdict}, expected ok ({RECORDED})")
        if ipc == "no":
            devs.append(f"{cid}: legacy_ipc no, expected yes for cuMemAlloc memory")
        return devs, notes
    if path == "cuda_ipc":
        if verdict != "ok":
            devs.append(f"{cid}: verdict {verdict} over cuda_ipc, expected ok")
    else:
        if verdict == "ok":
            devs.append(f"{cid}: verdict ok over {path}: a silent pass off cuda_ipc, expected warn or fail")
        elif path == "tcp" and verdict != "fail":
            devs.append(f"{cid}: verdict {verdict} over tcp, expected fail")
        if ipc == "no" and finding != "allocator_fallback":
            devs.append(f"{cid}: memory not legacy-IPC capable over {path} without the allocator_fallback finding")
    notes.append(f"{cid}: {verdict} over {path}, legacy_ipc {ipc}, finding {finding or '-'} ({NEXT_DAY})")
    return devs, notes
