"""The KV path against NIXL's own in GPU memory as a part of scripts/gpu-check (issue 39 §3):
scripts/bench-kv-vram, once per run, its figures in the summary as one case

    {"part": "kv-nixl", "op": "WRITE", "shape": "...", "status": "ran"|"skipped"|"failed",
     "reason": why not, "nixl": version, "settings": {"n"|"y": {"ratio", "engine", "python"}}}

Judged only on "it ran and produced both figures": ic-bench's and NIXL's Python API's under
UCX_MEMTYPE_CACHE=n (ic-bench's own setting for NIXL). The ratio (goal >= 0.97) and the post time
per descriptor are printed and recorded, not held to a bar: no GPU day has measured them, and the
question they answer (whose is the 30-43 us per descriptor?) has no pass/fail answer yet.
UCX_MEMTYPE_CACHE=y is reported as it came (ic-bench's VRAM registration failed under it on the
H200). The quick run leaves it out (it fits 3 minutes without it).
"""

import json
import os
import subprocess
import tempfile

# 2,048 descriptors of 32 KiB per request (TP1): enough to time NIXL's post per descriptor,
# ~0.1 s of posting per request at day 3's 30-43 us.
SHAPE = "llama-3.1-8b --isl 512"
PLANS = {"full": [{"op": "WRITE", "shape": SHAPE}], "quick": []}


def case_id(c):
    return f"kv-nixl {c['op']} {c['shape']}"


def planned(plan):
    return [case_id(k) for k in plan.get("kv_nixl") or []]


def fig(f):
    if not f or "failed" in f or "unavailable" in f:
        return (f or {}).get("failed") or (f or {}).get("unavailable") or "no figure"
    post = f.get("post_us_per_descriptor")
    return f"{f['descriptors']} x, p50 {f['request_ms_p50']:.3f} ms, post {'?' if post is None else f'{post:.2f}'} us/desc"


def judge(c):
    """(deviations, notes) of the kv-nixl case."""
    cid = case_id(c)
    if c.get("status") != "ran":
        return [f"{cid}: {c.get('status')}: {c.get('reason') or 'no reason'}, expected both figures"], []
    n = (c.get("settings") or {}).get("n") or {}
    engine, python = n.get("engine") or {}, (n.get("python") or {}).get("expanded")
    missing = [who for who, f in (("ic-bench", engine), ("NIXL Python", python)) if not f or "failed" in f]
    if missing or n.get("ratio") is None:
        return [f"{cid}: no figure of {' and '.join(missing) or 'the ratio'} under UCX_MEMTYPE_CACHE=n"], []
    notes = []
    for cache, s in sorted((c.get("settings") or {}).items()):
        py = s.get("python") or {}
        ratio = f"{s['ratio']:.3f}" if s.get("ratio") is not None else "none"
        notes.append(f"{cid} UCX_MEMTYPE_CACHE={cache}: ratio engine/python {ratio} (goal >= 0.97); ic-bench "
                     f"{fig(s.get('engine'))}; NIXL {fig(py.get('expanded') or py)}; strided {fig(py.get('strided'))}")
    return [], notes


def run(r, spec, root):
    """Runs scripts/bench-kv-vram on r's binary; records and prints the case."""
    r.say()
    case = {"part": "kv-nixl", "op": spec["op"], "shape": spec["shape"]}
    with tempfile.TemporaryDirectory(prefix="gpu-check-kv-nixl-") as tmp:
        out = os.path.join(tmp, "kv-nixl.json")
        cmd = ["python3", os.path.join(root, "scripts/bench-kv-vram"), "--memory", "vram", "--reps", "1",
               "--min-time", "0.2", "--op", spec["op"].lower(), "--exe", r.exe, "--json", out, "--", *spec["shape"].split()]
        try:
            p = subprocess.run(cmd, env=r.env, capture_output=True, text=True, timeout=300)
            rc, text = p.returncode, p.stdout + p.stderr
        except subprocess.TimeoutExpired:
            rc, text = "timeout", ""
        try:
            with open(out) as f:
                got = json.load(f)
        except (OSError, json.JSONDecodeError):
            got = None
    for line in text.strip().splitlines()[-12:]:
        r.say(f"kv-nixl: {line}")
    if got is None:
        case.update(status="failed", reason=f"bench-kv-vram exit {rc}, no figures")
    elif "skipped" in got:
        case.update(status="skipped", reason=got["skipped"])
    else:
        case.update(status="ran", nixl=got.get("nixl"), settings=got.get("settings"))
    r.summary["cases"].append(case)
