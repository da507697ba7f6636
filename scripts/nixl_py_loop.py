"""What the two NIXL Python baselines share (scripts/bench-nixl-loop.py, scripts/bench-kv-loop.py):
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
    conn = socket.create_connection(("127.0.0.1", port), timeout=120)
    peer = agent.add_remote_agent(recv_blob(conn))
    (remote_addr,) = struct.unpack("!Q", recv_blob(conn))
    send_blob(conn, agent.get_agent_metadata())
    return agent, buf, addr, conn, peer, remote_addr


def serve_target(name, port, nbytes):
    """Registers `nbytes`, swaps metadata and the buffer address with one initiator, then
    progresses the agent until the initiator's "done" notification or closed socket (1 h at most)."""
    agent, _buf, addr = make_agent(name, nbytes)
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
