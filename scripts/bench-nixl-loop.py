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


def make_agent(name, max_bytes):
    agent = nixl_agent(name, nixl_agent_config(backends=["UCX"]))
    buf = np.ones(max_bytes, dtype=np.uint8)
    addr = buf.ctypes.data
    agent.register_memory(agent.get_reg_descs([(addr, max_bytes, 0, "")], "DRAM"))
    return agent, buf, addr


def target(port, max_bytes):
    agent, _buf, addr = make_agent("py-target", max_bytes)
    srv = socket.create_server(("127.0.0.1", port))
    srv.settimeout(120)
    conn, _ = srv.accept()
    send_blob(conn, agent.get_agent_metadata())
    send_blob(conn, struct.pack("!Q", addr))
    peer = agent.add_remote_agent(recv_blob(conn))
    # Progress until the initiator's "done" notification or its closing the socket.
    conn.setblocking(False)
    deadline = time.monotonic() + 3600
    polls = 0
    while time.monotonic() < deadline:
        notifs = agent.get_new_notifs()
        if any(b"done" in m for m in notifs.get(peer, [])):
            break
        polls += 1
        if polls % 1000 == 0:
            try:
                if conn.recv(1) == b"":
                    break
            except BlockingIOError:
                pass
    conn.close()


def initiator(port, max_bytes, sizes, batches, min_time):
    agent, _buf, addr = make_agent("py-initiator", max_bytes)
    conn = socket.create_connection(("127.0.0.1", port), timeout=120)
    peer = agent.add_remote_agent(recv_blob(conn))
    (remote_addr,) = struct.unpack("!Q", recv_blob(conn))
    send_blob(conn, agent.get_agent_metadata())
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
        target(port, max_bytes)
    else:
        sizes = [int(x) for x in sys.argv[4].split(",")]
        batches = [int(x) for x in sys.argv[5].split(",")]
        initiator(port, max_bytes, sizes, batches, float(sys.argv[6]))


if __name__ == "__main__":
    main()
