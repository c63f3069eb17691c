"""Plays a master's `train` on the control channel, badly: answers a worker's hello with a malformed
ssh key (`malformed`) or with none (`none`), and heartbeats until the worker hangs up (at most 60 s)."""
import json
import socket
import sys
import time

port, mode = int(sys.argv[1]), sys.argv[2]
server = socket.create_server(("0.0.0.0", port))
server.settimeout(60)
conn, _ = server.accept()
conn.settimeout(0.5)
data = b""
while b"\n" not in data:
    data += conn.recv(4096)
print("hello from", json.loads(data.split(b"\n")[0]).get("host"), flush=True)
if mode == "malformed":
    conn.sendall(b'{"type":"welcome","admission":"ssh-ed25519 AAAAC3NzaC1lZDI1NTE5 root@elsewhere"}\n')
deadline = time.monotonic() + 60
while time.monotonic() < deadline:
    try:
        conn.sendall(b'{"type":"heartbeat"}\n')
        if not conn.recv(4096):
            break
    except socket.timeout:
        continue
    except OSError:
        break
print("the worker hung up", flush=True)
