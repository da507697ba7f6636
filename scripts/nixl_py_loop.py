"""What the NIXL Python baselines share (scripts/bench-nixl-loop.py, bench-kv-loop.py, kv_vram_loop.py):
the socket framing, an agent with one registered DRAM buffer, and the target side, which only
progresses its agent until the initiator says it is done."""

import socket
import struct
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
    """An agent (NIXL's default configuration, UCX backend) with `nbytes` of DRAM registered."""
    agent = nixl_agent(name, nixl_agent_config(backends=["UCX"]))
    buf = np.ones(nbytes, dtype=np.uint8)
    addr = buf.ctypes.data
    agent.register_memory(agent.get_reg_descs([(addr, nbytes, 0, "")], "DRAM"))
    return agent, buf, addr


def connect_initiator(name, port, nbytes):
    """The initiator's agent, its buffer address, the target's agent name and buffer address."""
    agent, buf, addr = make_agent(name, nbytes)
    conn, peer, remote_addr = join_target(agent, port)
    return agent, buf, addr, conn, peer, remote_addr


def join_target(agent, port):
    """The initiator's side of the exchange: (connection, the target's agent name, its buffer
    address)."""
    conn = socket.create_connection(("127.0.0.1", port), timeout=120)
    peer = agent.add_remote_agent(recv_blob(conn))
    (remote_addr,) = struct.unpack("!Q", recv_blob(conn))
    send_blob(conn, agent.get_agent_metadata())
    return conn, peer, remote_addr


def serve_target(name, port, nbytes):
    """Registers `nbytes` of DRAM and serves it to one initiator ([`serve_agent`])."""
    agent, _buf, addr = make_agent(name, nbytes)
    serve_agent(agent, addr, port)


def serve_agent(agent, addr, port, limit_s=3600):
    """Swaps metadata and the buffer address `addr` with one initiator, then progresses `agent`
    until the initiator's "done" notification or closed socket (`limit_s` at most)."""
    srv = socket.create_server(("127.0.0.1", port))
    srv.settimeout(120)
    conn, _ = srv.accept()
    send_blob(conn, agent.get_agent_metadata())
    send_blob(conn, struct.pack("!Q", addr))
    peer = agent.add_remote_agent(recv_blob(conn))
    conn.setblocking(False)
    deadline = time.monotonic() + limit_s
    polls = 0
    while time.monotonic() < deadline:
        if any(b"done" in m for m in agent.get_new_notifs().get(peer, [])):
            break
        polls += 1
        if polls % 1000 == 0:
            try:
                if conn.recv(1) == b"":
                    break  # the initiator is gone
            except BlockingIOError:
                pass
    conn.close()
