#!/usr/bin/env python3
"""The baseline of scripts/bench-nixl: a plain loop over NIXL's own Python API (the same wheel).

  bench-nixl-loop.py target PORT MAX_BYTES
  bench-nixl-loop.py initiator PORT MAX_BYTES SIZES BATCHES MIN_TIME_S

Both sides register one DRAM buffer of MAX_BYTES, swap agent metadata and buffer addresses over a
local TCP socket, and the initiator runs, for each direction, block size and batch, one prepared
request (initialize_xfer) posted and polled to completion in a loop, like the NIXL engine does:
10 warmup requests, then at least 10 requests and MIN_TIME_S seconds. The target progresses its
agent with get_new_notifs() until the initiator's "done" notification or closed socket. Both
agents use NIXL's default configuration (progress thread on), as the engine's agents (C API
defaults) do.
Prints one JSON line per case: direction, size, batch, iterations, elapsed_s, bandwidth_bps.
"""

import json
import sys
import time

from nixl_py_loop import connect_initiator, serve_target


def initiator(port, max_bytes, sizes, batches, min_time):
    agent, _buf, addr, conn, peer, remote_addr = connect_initiator("py-initiator", port, max_bytes)
    for direction in ("READ", "WRITE"):
        for size in sizes:
            for batch in batches:
                if size * batch > max_bytes:
                    continue
                local = agent.get_xfer_descs([(addr + i * size, size, 0) for i in range(batch)], "DRAM")
                remote = agent.get_xfer_descs([(remote_addr + i * size, size, 0) for i in range(batch)], "DRAM")
                handle = agent.initialize_xfer(direction, local, remote, peer)

                def once():
                    state = agent.transfer(handle)
                    while state != "DONE":
                        if state == "ERR":
                            raise RuntimeError(f"{direction} {size}x{batch} failed")
                        state = agent.check_xfer_state(handle)

                for _ in range(10):
                    once()
                n = 0
                start = time.perf_counter()
                while n < 10 or time.perf_counter() - start < min_time:
                    once()
                    n += 1
                elapsed = time.perf_counter() - start
                agent.release_xfer_handle(handle)
                print(json.dumps({
                    "direction": direction.lower(), "size": size, "batch": batch, "iterations": n,
                    "elapsed_s": elapsed, "bandwidth_bps": n * size * batch / elapsed,
                }), flush=True)
    agent.send_notif(peer, b"done")
    conn.close()


def main():
    role, port, max_bytes = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    if role == "target":
        serve_target("py-target", port, max_bytes)
    else:
        sizes = [int(x) for x in sys.argv[4].split(",")]
        batches = [int(x) for x in sys.argv[5].split(",")]
        initiator(port, max_bytes, sizes, batches, float(sys.argv[6]))


if __name__ == "__main__":
    main()
