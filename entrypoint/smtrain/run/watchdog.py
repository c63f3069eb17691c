"""The stall watchdog at work: a thread that feeds the ranks' step counts to a `StallWatch` and acts
once when the job stalled; and the progress file through which one program reports its steps."""
from __future__ import annotations

import os
import tempfile
import threading
import time
from typing import Callable, Optional

from .. import progress
from .stall import Stall, StallWatch

__all__ = ["ProgressFile", "Watchdog"]


class ProgressFile:
    """A rank's progress file, made by its supervisor and written by the program (smtrain.progress)."""

    def __init__(self) -> None:
        folder = "/dev/shm" if os.access("/dev/shm", os.W_OK) else None
        fd, self.path = tempfile.mkstemp(prefix="smtrain-progress-", dir=folder)
        try:
            os.ftruncate(fd, progress.RECORD.size)  # the program maps it: it must have its size
        finally:
            os.close(fd)

    def read(self) -> tuple[int, int]:
        """(steps, signs of life) so far."""
        return progress.read(self.path)

    def remove(self) -> None:
        try:
            os.unlink(self.path)
        except OSError:
            pass


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
        self._thread.start()
        return self

    def observe(self, host: str, rank: int, steps: int, beats: int = 0) -> None:
        with self._lock:
            self._watch.observe(host, rank, steps, beats, time.monotonic())

    def stop(self) -> None:
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
