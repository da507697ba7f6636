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
import socket
import struct
import sys
import time

import numpy as np
from nixl_cu12 import nixl_agent, nixl_agent_config


def send_blob(sock, data):
    sock.sendall(struct.pack("!Q", len(data)) + data)


def recv_exact(sock, n):
    out = b""
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise RuntimeError("peer closed the connection")
        out += chunk
    return out


def recv_blob(sock):
    (n,) = struct.unpack("!Q", recv_exact(sock, 8))
    return recv_exact(sock, n)


def make_agent(name, nbytes):
    agent = nixl_agent(name, nixl_agent_config(backends=["UCX"]))
    buf = np.ones(nbytes, dtype=np.uint8)
    addr = buf.ctypes.data
    agent.register_memory(agent.get_reg_descs([(addr, nbytes, 0, "")], "DRAM"))
    return agent, buf, addr


def descs(layout, side, base):
    s = layout[side]
    return [(base + s["offset"] + i * s["stride"], layout["len"], 0) for i in range(layout["count"])]


def target(port, layout):
    agent, _buf, addr = make_agent("py-kv-target", layout["target"]["buffer_bytes"])
    srv = socket.create_server(("127.0.0.1", port))
    srv.settimeout(120)
    conn, _ = srv.accept()
    send_blob(conn, agent.get_agent_metadata())
    send_blob(conn, struct.pack("!Q", addr))
    peer = agent.add_remote_agent(recv_blob(conn))
    conn.setblocking(False)
    deadline = time.monotonic() + 3600
    polls = 0
    while time.monotonic() < deadline:
        if any(b"done" in m for m in agent.get_new_notifs().get(peer, [])):
            break
        polls += 1
        if polls % 1000 == 0:
            try:
                if conn.recv(1) == b"":
                    break
            except BlockingIOError:
                pass
    conn.close()


def initiator(port, layout, op, min_time):
    agent, _buf, addr = make_agent("py-kv-initiator", layout["initiator"]["buffer_bytes"])
    conn = socket.create_connection(("127.0.0.1", port), timeout=120)
    peer = agent.add_remote_agent(recv_blob(conn))
    (remote_addr,) = struct.unpack("!Q", recv_blob(conn))
    send_blob(conn, agent.get_agent_metadata())
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
        target(port, layout)
    else:
        initiator(port, layout, sys.argv[4], float(sys.argv[5]))


if __name__ == "__main__":
    main()
