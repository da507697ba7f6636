#!/usr/bin/env python3
"""The baseline of scripts/bench-kv-vram: NIXL's own Python API moving one KV peer's descriptor
lists, in GPU memory (VRAM) or host memory (DRAM).

  kv_vram_loop.py target PORT LAYOUT_JSON MEMORY
  kv_vram_loop.py initiator PORT LAYOUT_JSON MEMORY OP MIN_TIME_S

LAYOUT_JSON is ic-bench's `settings.plan[0].kv` (as for scripts/bench-kv-loop.py). MEMORY is
VRAM or DRAM. In VRAM each side allocates its buffer itself with the CUDA driver through ctypes
(cuInit, the primary context of device 0 made current, cuMemAlloc, cuMemsetD8): no torch, no
cupy. The initiator posts the request two ways, each 10 warmup requests then at least 10 and
MIN_TIME_S seconds:
- expanded: one descriptor per block (initialize_xfer), as ic-bench does;
- strided: NIXL's compressed lists (prep_xfer_dlist with an Nx5 array: address, len, device,
  stride, count; NIXL 1.5), where this NIXL has them; else the reason it has not.
Prints one JSON line: {"expanded": FIGURES, "strided": FIGURES | {"unavailable": REASON}},
FIGURES = {descriptors, iterations, request_ms_p50, post_ms, post_us_per_descriptor, bandwidth_bps}.
The target progresses its agent until the initiator's "done" notification.
"""

import ctypes
import json
import sys
import time

import numpy as np
from nixl_cu12 import nixl_agent, nixl_agent_config
from nixl_py_loop import join_target, serve_agent


class Cuda:
    """One cuMemAlloc buffer on device 0 under its primary context, through the driver API."""

    def __init__(self, nbytes, fill):
        self.lib = ctypes.CDLL("libcuda.so.1")
        self.check("cuInit", self.lib.cuInit(0))
        dev, ctx = ctypes.c_int(0), ctypes.c_void_p()
        self.check("cuDeviceGet", self.lib.cuDeviceGet(ctypes.byref(dev), 0))
        self.check("cuDevicePrimaryCtxRetain", self.lib.cuDevicePrimaryCtxRetain(ctypes.byref(ctx), dev))
        self.check("cuCtxSetCurrent", self.lib.cuCtxSetCurrent(ctx))
        self.dev, self.ptr = dev, ctypes.c_uint64(0)
        self.check("cuMemAlloc", self.lib.cuMemAlloc_v2(ctypes.byref(self.ptr), ctypes.c_size_t(nbytes)))
        self.check("cuMemsetD8", self.lib.cuMemsetD8_v2(self.ptr, ctypes.c_ubyte(fill), ctypes.c_size_t(nbytes)))
        self.check("cuCtxSynchronize", self.lib.cuCtxSynchronize())

    @staticmethod
    def check(what, rc):
        if rc != 0:
            raise RuntimeError(f"{what} returned CUDA error {rc}")

    def free(self):
        self.lib.cuMemFree_v2(self.ptr)
        self.lib.cuDevicePrimaryCtxRelease(self.dev)


def make_agent(name, nbytes, memory, fill):
    """(agent, keep-alive, address): NIXL's default configuration with the UCX backend, one
    buffer of `nbytes` registered in `memory`."""
    agent = nixl_agent(name, nixl_agent_config(backends=["UCX"]))
    if memory == "VRAM":
        buf = Cuda(nbytes, fill)
        addr = buf.ptr.value
    else:
        buf = np.full(nbytes, fill, dtype=np.uint8)
        addr = buf.ctypes.data
    agent.register_memory(agent.get_reg_descs([(addr, nbytes, 0, "")], memory))
    return agent, buf, addr


def serve_target(port, layout, memory):
    agent, buf, addr = make_agent("py-kv-vram-target", layout["target"]["buffer_bytes"], memory, 2)
    serve_agent(agent, addr, port, limit_s=1800)
    if memory == "VRAM":
        buf.free()


def timed(agent, handle, what, min_time):
    """(request times, post times) in seconds: the post is agent.transfer's own call."""

    def once():
        t0 = time.perf_counter()
        state = agent.transfer(handle)
        posted = time.perf_counter() - t0
        while state != "DONE":
            if state == "ERR":
                raise RuntimeError(f"{what} failed")
            state = agent.check_xfer_state(handle)
        return time.perf_counter() - t0, posted

    for _ in range(10):
        once()
    times, posts = [], []
    start = time.perf_counter()
    while len(times) < 10 or time.perf_counter() - start < min_time:
        t, p = once()
        times.append(t)
        posts.append(p)
    return times, posts


def figures(descriptors, moved, times, posts):
    p50 = sorted(times)[len(times) // 2]
    post = sum(posts) / len(posts)
    return {"descriptors": descriptors, "iterations": len(times), "request_ms_p50": p50 * 1e3,
            "post_ms": post * 1e3, "post_us_per_descriptor": post * 1e6 / descriptors,
            "bandwidth_bps": moved / p50}


def strided(agent, layout, memory, addr, remote_addr, peer, op, min_time):
    """The same blocks as NIXL's compressed (strided) lists: one row per side."""
    if "Nx5" not in (agent.prep_xfer_dlist.__doc__ or ""):
        return {"unavailable": "this NIXL's prep_xfer_dlist takes no strided (Nx5) lists"}
    n = layout["count"]
    rows = []
    for side, base in (("initiator", addr), ("target", remote_addr)):
        s = layout[side]
        rows.append(np.array([[base + s["offset"], layout["len"], 0, s["stride"], n]], dtype=np.uint64))
    local = agent.prep_xfer_dlist("NIXL_INIT_AGENT", rows[0], memory)
    remote = agent.prep_xfer_dlist(peer, rows[1], memory)
    idx = np.arange(n, dtype=np.int32)
    handle = agent.make_prepped_xfer(op, local, idx, remote, idx)
    times, posts = timed(agent, handle, f"strided {op}", min_time)
    agent.release_xfer_handle(handle)
    out = figures(n, n * layout["len"], times, posts)
    out["rows"] = 1
    return out


def initiator(port, layout, memory, op, min_time):
    agent, buf, addr = make_agent("py-kv-vram-initiator", layout["initiator"]["buffer_bytes"], memory, 1)
    conn, peer, remote_addr = join_target(agent, port)
    n, length = layout["count"], layout["len"]

    def descs(side, base):
        s = layout[side]
        return [(base + s["offset"] + i * s["stride"], length, 0) for i in range(n)]

    local = agent.get_xfer_descs(descs("initiator", addr), memory)
    remote = agent.get_xfer_descs(descs("target", remote_addr), memory)
    handle = agent.initialize_xfer(op, local, remote, peer)
    times, posts = timed(agent, handle, op, min_time)
    agent.release_xfer_handle(handle)
    out = {"expanded": figures(n, n * length, times, posts)}
    try:
        out["strided"] = strided(agent, layout, memory, addr, remote_addr, peer, op, min_time)
    except Exception as e:  # noqa: BLE001 -- a NIXL that refuses them says why, in the figures
        out["strided"] = {"unavailable": f"NIXL refused strided lists: {type(e).__name__}: {str(e)[:200]}"}
    print(json.dumps(out), flush=True)
    agent.send_notif(peer, b"done")
    conn.close()
    if memory == "VRAM":
        buf.free()


def main():
    role, port, layout, memory = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3]), sys.argv[4]
    if role == "target":
        serve_target(port, layout, memory)
    else:
        initiator(port, layout, memory, sys.argv[5], float(sys.argv[6]))


if __name__ == "__main__":
    main()
