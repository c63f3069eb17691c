"""Whether the master reaches each worker's sshd before mpirun tries: mpirun alone says only that its daemons
could not start (status 255), not on which host nor why."""
from __future__ import annotations

import socket
import time
from typing import Sequence

__all__ = ["unanswered"]

CONNECT_S = 2.0  # one try's connect timeout: a filtered port answers nothing
RETRY_S = 0.2


def unanswered(hosts: Sequence[str], port: int, deadline: float) -> list[str]:
    """Those of `hosts` on which nothing accepted a TCP connection to `port` by `deadline` (each tried again
    every RETRY_S while it refuses: a worker's sshd listens before its hello, so one try is the rule)."""
    pending = list(hosts)
    while True:
        for host in list(pending):
            try:
                socket.create_connection((host, port), timeout=max(0.1, min(CONNECT_S, deadline - time.monotonic()))).close()
                pending.remove(host)
            except OSError:
                pass
        if not pending or time.monotonic() >= deadline:
            return pending
        time.sleep(max(0.0, min(RETRY_S, deadline - time.monotonic())))
