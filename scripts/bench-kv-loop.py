#!/usr/bin/env python3
"""The baseline of scripts/bench-kv: NIXL's own Python API moving one KV peer's descriptor lists.

  bench-kv-loop.py target PORT LAYOUT_JSON
  bench-kv-loop.py initiator PORT LAYOUT_JSON OP MIN_TIME_S

LAYOUT_JSON is the `kv` layout of the case ic-bench ran (`settings.plan[0].kv` of its report):
`count` descriptors of `len` bytes, descriptor i at `offset + i * stride` of each side's buffer
of `buffer_bytes`. Each side registers its buffer (DRAM), the two swap agent metadata and buffer
addresses over a local TCP socket, and the initiator posts one prepared request of those
descriptor lists (initialize_xfer, READ or WRITE) and polls it to completion, again and again:
10 warmup requests, then at least 10 requests and MIN_TIME_S seconds, as the NIXL engine does.
Prints one JSON line: iterations, elapsed_s, bandwidth_bps, request_ms_p50.
"""

import json
import sys
import time

from nixl_py_loop import connect_initiator, serve_target


def descs(layout, side, base):
    s = layout[side]
    return [(base + s["offset"] + i * s["stride"], layout["len"], 0) for i in range(layout["count"])]


def initiator(port, layout, op, min_time):
    agent, _buf, addr, conn, peer, remote_addr = connect_initiator(
        "py-kv-initiator", port, layout["initiator"]["buffer_bytes"])
    local = agent.get_xfer_descs(descs(layout, "initiator", addr), "DRAM")
    remote = agent.get_xfer_descs(descs(layout, "target", remote_addr), "DRAM")
    handle = agent.initialize_xfer(op, local, remote, peer)

    def once():
        state = agent.transfer(handle)
        while state != "DONE":
            if state == "ERR":
                raise RuntimeError(f"{op} failed")
            state = agent.check_xfer_state(handle)

    for _ in range(10):
        once()
    times = []
    start = time.perf_counter()
    while len(times) < 10 or time.perf_counter() - start < min_time:
        t0 = time.perf_counter()
        once()
        times.append(time.perf_counter() - t0)
    elapsed = time.perf_counter() - start
    agent.release_xfer_handle(handle)
    times.sort()
    moved = layout["count"] * layout["len"]
    print(json.dumps({
        "iterations": len(times), "elapsed_s": elapsed, "bandwidth_bps": len(times) * moved / elapsed,
        "request_ms_p50": times[len(times) // 2] * 1e3,
    }), flush=True)
    agent.send_notif(peer, b"done")
    conn.close()


def main():
    role, port, layout = sys.argv[1], int(sys.argv[2]), json.loads(sys.argv[3])
    if role == "target":
        serve_target("py-kv-target", port, layout["target"]["buffer_bytes"])
    else:
        initiator(port, layout, sys.argv[4], float(sys.argv[5]))


if __name__ == "__main__":
    main()
