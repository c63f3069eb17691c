"""The stall watchdog at work: a thread that feeds the ranks' step counts to a `StallWatch` and acts
once when the job stalled; and the progress file through which one program reports its steps."""
from __future__ import annotations

import os
import signal
import threading
import time
from typing import Callable, Optional

from .. import progress
from ..common import linux
from ..common.scratch import make_scratch_file, shm_folder
from .stall import Stall, StallWatch

__all__ = ["ProgressFile", "Watchdog", "dump_stacks"]


class ProgressFile:
    """A rank's progress file, made by its supervisor and written by the program (smtrain.progress)."""

    def __init__(self) -> None:
        fd, self.path = make_scratch_file("smtrain-progress-", shm_folder())
        try:
            os.ftruncate(fd, progress.FILE_SIZE)  # the program maps it: it must have its size
        finally:
            os.close(fd)

    def export(self, env: dict[str, str]) -> None:
        """Tell the program (its environment `env`) where to report, and let a stall's SIGABRT log
        its Python stacks (faulthandler), unless the user chose otherwise."""
        env[progress.PROGRESS_FILE_ENV] = self.path
        env.setdefault("PYTHONFAULTHANDLER", "1")

    def read(self) -> progress.Counts:
        """Steps, signs of life and where in Horovod's init, so far."""
        return progress.read(self.path)

    def remove(self) -> None:
        try:
            os.unlink(self.path)
        except OSError:
            pass


def dump_stacks(spare: "list[int] | tuple[int, ...]" = ()) -> None:
    """SIGABRT to this process's children (the program; not the helpers in `spare`): with
    PYTHONFAULTHANDLER their faulthandler writes every thread's Python stack to the log."""
    for child in linux.children_of(os.getpid()):
        if child not in spare:
            try:
                os.kill(child, signal.SIGABRT)
            except ProcessLookupError:
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

    def observe(self, host: str, rank: int, counts: progress.Counts) -> None:
        with self._lock:
            self._watch.observe(host, rank, counts, time.monotonic())

    def waited_for(self, waits: dict[int, float], check_s: float) -> None:
        with self._lock:
            self._watch.waited_for(waits, check_s, time.monotonic())

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
