"""A rank's stdout and stderr, sent to the master's `train` on connections of their own, so that every line
reaches the job's log whole (smtrain.run.rank_output says why, and what the master does with them)."""
from __future__ import annotations

import os
import socket
import sys
import time
from typing import Optional

from ..common import console
from ..config.defaults import OUTPUT_CONNECT_S
from ..wire.contract import RankContract
from ..wire.control_protocol import ControlClient, MessageType

__all__ = ["send_output_to_master"]


def send_output_to_master(contract: RankContract, host: str, rank: int, wait_s: float = OUTPUT_CONNECT_S) -> bool:
    """Make this process's stdout and stderr (and so its program's, which inherits them) two connections to
    the master's control server; whether they are. Where the server cannot be reached within `wait_s` they
    stay what the rank was started with (mpirun's forwarding), and the log says so."""
    deadline = time.monotonic() + wait_s
    clients: list[ControlClient] = []
    for stream in (1, 2):
        client = ControlClient.open(contract.control_host, contract.control_port, deadline, MessageType.OUTPUT,
                                    token=contract.token, host=host, rank=rank, stream=stream)
        if client is None:
            for opened in clients:
                opened.close()
            console.log(f"the master's control server at {contract.control_host}:{contract.control_port} could not "
                        f"take this rank's output within {wait_s:g} s: it goes the way the rank was started with, which may "
                        f"cut its lines")
            return False
        clients.append(client)
    _replace_streams(clients[0], clients[1])
    return True


def _replace_streams(stdout: ControlClient, stderr: ControlClient) -> None:
    for stream in (sys.stdout, sys.stderr):
        _flush(stream)
    for fd, client in ((1, stdout), (2, stderr)):
        client.sock.settimeout(None)  # blocking, as a pipe is: the connection was made with a timeout
        # a program's small writes (a line is often two) gather into full segments, sent at the latest 0.2 s
        # after the first (Linux's TCP_CORK) and at once when the rank exits, which the master reads and writes
        # out in batches: a chatty rank then writes faster than through mpirun (benchmarks/bench_output.py)
        client.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 0)
        client.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_CORK, 1)
        os.dup2(client.sock.fileno(), fd)
        client.close()  # fd 1 or 2 now holds the connection


def _flush(stream: Optional[object]) -> None:
    try:
        stream.flush()  # type: ignore[union-attr]
    except (AttributeError, OSError, ValueError):
        pass
