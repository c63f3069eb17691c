"""The stall watchdog at work: a thread that feeds the ranks' step counts to a `StallWatch` and acts
once when the job stalled."""
from __future__ import annotations

import threading
import time
from typing import Callable, Optional

from ..wire.progress_file import Counts
from .stall import Stall, StallWatch

__all__ = ["Watchdog"]


class Watchdog:
    """Checks every `interval_s`; calls `on_stall` once, from its own thread. `poll` (optional) is
    called before each check to feed fresh counts (e.g. from a progress file)."""

    def __init__(self, watch: StallWatch, on_stall: Callable[[Stall], None],
                 poll: Optional[Callable[["Watchdog"], None]] = None, interval_s: float = 1.0) -> None:
        self._watch, self._on_stall, self._poll, self._interval_s = watch, on_stall, poll, interval_s
        self._lock = threading.Lock()
        self._stopped = threading.Event()
        self.stall: Optional[Stall] = None
        self._thread = threading.Thread(target=self._run, name="stall-watchdog", daemon=True)

    def start(self) -> "Watchdog":
        """Starts checking in a thread; returns self."""
        self._thread.start()
        return self

    def observe(self, host: str, rank: int, counts: Counts) -> None:
        """Takes in a rank's counts now."""
        with self._lock:
            self._watch.observe(host, rank, counts, time.monotonic())

    def waited_for(self, waits: dict[int, float], check_s: float) -> None:
        """Takes in Horovod's stall inspector's waits per rank."""
        with self._lock:
            self._watch.waited_for(waits, check_s, time.monotonic())

    def stop(self) -> None:
        """Stops checking."""
        self._stopped.set()

    def _run(self) -> None:
        while not self._stopped.wait(self._interval_s):
            if self._poll is not None:
                self._poll(self)
            with self._lock:
                stall = self._watch.check(time.monotonic())
            if stall is not None and not self._stopped.is_set():
                self.stall = stall
                self._on_stall(stall)
                return
