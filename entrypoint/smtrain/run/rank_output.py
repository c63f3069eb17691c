"""The ranks' output, whole lines in the master's log (its stdout and stderr), however many hosts.

Why not mpirun's own forwarding: it passes a rank's bytes on as its reads fall, so two ranks' lines are cut
into each other (a Python `print` under PYTHONUNBUFFERED is two writes), on one host as on several. Here
every MPI rank's launcher opens two connections of its own to the master's control server, one for its
program's stdout and one for its stderr (`output`, then raw bytes: smtrain.rank.output); each is framed
into lines on its own and written in whole lines under the console lock, so a line is never split,
merged with another's, or lost, and each rank's lines keep their order. A line without an end is passed
on in pieces of `DEFAULT_MAX_LINE` bytes (a progress bar's carriage returns until its newline, say)."""
from __future__ import annotations

import socket
import threading
import time

from ..proc.streams import LineRelay

__all__ = ["RankOutput"]


class RankOutput:
    """The relays of every rank's output connection (each on a thread of its own, until its rank hangs up)."""

    def __init__(self) -> None:
        self._relays: list[LineRelay] = []
        self._lock = threading.Lock()

    def follow(self, sock: socket.socket, already_read: bytes, stream: int) -> None:
        """Relay `sock` (whose first `already_read` bytes of output were read with its first line) to our
        `stream` (1: stdout, 2: stderr) in whole lines, until it ends; the relay owns the connection."""
        sock.settimeout(None)  # blocking again: the first line's reader left a timeout (a non-blocking descriptor)
        relay = LineRelay(sock.detach(), stream, initial=already_read)
        with self._lock:
            self._relays = [r for r in self._relays if r.running()]
            self._relays.append(relay)
        relay.start()

    def drain(self, wait_s: float) -> bool:
        """Until every rank's output so far has reached our streams (their connections ended), at most
        `wait_s`; whether it all did."""
        deadline = time.monotonic() + wait_s
        with self._lock:
            relays = list(self._relays)
        return all([relay.join(max(0.0, deadline - time.monotonic())) for relay in relays])
