"""Telling the stall watchdog that this rank is still training.

    from smtrain import progress
    for batch in dataset:
        progress.step()          # once per training step: a counter in shared memory (about 0.3 us)
        ...

`train` fails a job whose ranks all stopped making progress for `SM_STALL_TIMEOUT_SECONDS`
(hyperparameter `sagemaker_stall_timeout_seconds`; default 1800 s; 0 switches it off), naming the
ranks with the fewest steps (the ones the others wait for) and logging every rank's Python stack.
Progress is a rank's steps (`step()`; smtrain's Keras callbacks count every batch and
`pipes.equal_steps` every step) and its signs of life (`alive()`; called by `metrics.log_metrics`,
by the Pipe readers for every batch of records read, and by checkpoint saves). Either growing is
progress; the steps tell which ranks stopped first. A job that never reports progress is not judged
by it (a script that uses none of these is never killed for being quiet).

Outside a job of `train` (no `SM_PROGRESS_FILE`), `step()` does nothing.
"""
from __future__ import annotations

import mmap
import os
import struct
import time
from typing import Optional

PROGRESS_FILE_ENV = "SM_PROGRESS_FILE"
RECORD = struct.Struct("<QQd")  # steps so far, signs of life so far, wall-clock time of the write
# The file holds two records: this module's, then the native Pipe reader's (native/pipe_dataset.cc),
# whose signs of life it adds atomically from its own threads.
FILE_SIZE = 2 * RECORD.size

__all__ = ["FILE_SIZE", "PROGRESS_FILE_ENV", "alive", "read", "step"]


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
        if self.map is None:
            if self.unavailable or not self._open():
                return
        RECORD.pack_into(self.map, 0, self.count, self.beats, time.time())

    def _open(self) -> bool:
        path = os.environ.get(PROGRESS_FILE_ENV)
        try:
            with open(path or "", "r+b") as f:
                self.map = mmap.mmap(f.fileno(), RECORD.size)
        except (OSError, ValueError):  # outside a job of train, or the file is not ours
            self.unavailable = True
            return False
        return True


_counter = _Counter()


def step(steps: int = 1) -> None:
    """Count `steps` training steps done by this rank (cheap: a store into shared memory)."""
    _counter.add(steps, 0)


def alive() -> None:
    """A sign of life that is not a step (data read, a metric line, a checkpoint saved)."""
    _counter.add(0, 1)


def read(path: str) -> tuple[int, int]:
    """(steps, signs of life) a rank last wrote to its progress file; (0, 0) before the first write."""
    try:
        with open(path, "rb") as f:
            data = f.read(FILE_SIZE)
    except OSError:
        return 0, 0
    if len(data) < RECORD.size:
        return 0, 0
    steps, beats, _ = RECORD.unpack_from(data)
    if len(data) == FILE_SIZE:
        beats += RECORD.unpack_from(data, RECORD.size)[1]
    return steps, beats
