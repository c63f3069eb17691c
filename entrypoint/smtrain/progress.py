"""Telling the stall watchdog that this rank is still training.

    from smtrain import progress
    for batch in dataset:
        progress.step()          # once per training step: a counter in shared memory (about 0.3 us)
        ...

`train` fails a job whose ranks stopped making progress for `SM_STALL_TIMEOUT_SECONDS`
(hyperparameter `sagemaker_stall_timeout_seconds`; default 1800 s; 0 switches it off). Steps
(`step()`; smtrain's Keras callbacks count every batch and `pipes.equal_steps` every step) are the
progress the program reports: once a rank reported one, a job in which no rank's steps or signs of
life grew for the timeout has stalled, and the rank with the fewest steps is named when the ranks
differ. Signs of life (`alive()`; called by `metrics.log_metrics`, by the Pipe readers for every
batch of records read, and by checkpoint saves) show that a rank still works, but on their own never
make a job judged: a script that reports no steps is judged only by what Horovod knows (a rank the
others wait for in a collective or in `hvd.init`), never for being quiet.

Outside a job of `train` (no `SM_PROGRESS_FILE`), `step()` does nothing.
"""
from __future__ import annotations

import mmap
import os
import time
from typing import Optional

from .common import stephook
from .wire.progress_file import FILE_SIZE, INIT_OFFSET, INIT_PHASE, PROGRESS_FILE_ENV, RECORD, Counts, InitPhase, read

__all__ = ["FILE_SIZE", "PROGRESS_FILE_ENV", "Counts", "InitPhase", "alive", "read", "step"]


class _Counter:
    """Counts in a shared memory map of the progress file: an update is a store, no system call."""

    def __init__(self) -> None:
        self.count = 0
        self.beats = 0
        self.map: Optional[mmap.mmap] = None
        self.unavailable = False

    def add(self, steps: int, beats: int) -> None:
        self.count += steps
        self.beats += beats
        if self._mapped():
            RECORD.pack_into(self.map, 0, self.count, self.beats, time.time())

    def set_init_phase(self, phase: InitPhase) -> None:
        if self._mapped():
            INIT_PHASE.pack_into(self.map, INIT_OFFSET, int(phase))

    def _mapped(self) -> bool:
        if self.map is not None:
            return True
        if self.unavailable:
            return False
        path = os.environ.get(PROGRESS_FILE_ENV)
        try:
            with open(path or "", "r+b") as f:
                self.map = mmap.mmap(f.fileno(), FILE_SIZE)
        except (OSError, ValueError):  # outside a job of train, or the file is not ours
            self.unavailable = True
            return False
        return True


_counter = _Counter()


def step(steps: int = 1) -> None:
    """Count `steps` training steps done by this rank (cheap: a store into shared memory)."""
    _counter.add(steps, 0)
    if stephook.listener is not None:  # the step profiler (smtrain.profiler.hooks), outside Keras
        stephook.listener(steps)


def alive() -> None:
    """A sign of life that is not a step (data read, a metric line, a checkpoint saved)."""
    _counter.add(0, 1)


def framework_init(phase: InitPhase) -> None:
    """The rank's start-up hook (smtrain/rank/startup) says where it is in Horovod's init: toolkit-internal."""
    _counter.set_init_phase(phase)
    _counter.add(0, 1)
