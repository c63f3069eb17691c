"""Signals for the ranks mpirun started on this host: Open MPI's daemons do not pass a signal on to
the ranks, so `train` sends it to each rank launcher (a child of mpirun or orted) itself. A stop that
comes while mpirun is still starting them reaches them once they are there (`signal_ranks_once_started`)."""
from __future__ import annotations

import os
import threading
import time
from typing import Callable

from ...common import linux

__all__ = ["RANK_PARENTS", "signal_ranks", "signal_ranks_once_started"]

# The processes that start ranks: their children are the rank launchers.
RANK_PARENTS = {b"orted", b"mpirun", b"orterun", b"prted", b"prterun"}


def signal_ranks(root: int, signum: int) -> int:
    """Send `signum` to every rank launcher under `root` (children of mpirun/orted); how many got it."""
    sent = 0
    for daemon in [root, *linux.descendants_of(root)]:
        if linux.command_name(daemon) in RANK_PARENTS:
            for rank in linux.children_of(daemon):
                try:
                    os.kill(rank, signum)
                    sent += 1
                except ProcessLookupError:
                    pass
    return sent


def signal_ranks_once_started(root: int, signum: int, within_s: float,
                              on_sent: Callable[[int], None] = lambda count: None) -> threading.Thread:
    """Send `signum` to the rank launchers under `root` as soon as there are any (every 50 ms, for at most
    `within_s`, while `root` lives), from a thread; `on_sent` gets how many got it."""
    def retry() -> None:
        deadline = time.monotonic() + within_s
        while time.monotonic() < deadline and linux.alive(root):
            count = signal_ranks(root, signum)
            if count:
                on_sent(count)
                return
            time.sleep(0.05)

    thread = threading.Thread(target=retry, name="signal-ranks-once-started", daemon=True)
    thread.start()
    return thread
