"""A rank's progress file: what the program (smtrain.progress, the native Pipe reader, the start-up
hook) writes into shared memory and the rank's supervisor reads for the stall watchdog."""
from __future__ import annotations

import enum
import struct
from typing import NamedTuple, Optional

PROGRESS_FILE_ENV = "SM_PROGRESS_FILE"
RECORD = struct.Struct("<QQd")  # steps so far, signs of life so far, wall-clock time of the write
# The file holds two records: this module's, then the native Pipe reader's (native/pipe_dataset.cc),
# whose signs of life it adds atomically from its own threads; then where the rank is in its
# framework's init (an `InitPhase`, written by the rank's start-up hook); then 1 once the program's
# main thread died of an uncaught exception (written by the start-up hook, where it ends such a
# program at once, before the traceback is printed): the program ends with status 1, whatever follows.
INIT_PHASE = struct.Struct("<Q")
INIT_OFFSET = 2 * RECORD.size
UNCAUGHT = struct.Struct("<Q")
UNCAUGHT_OFFSET = INIT_OFFSET + INIT_PHASE.size  # rank/startup/sitecustomize.py names it too
FILE_SIZE = UNCAUGHT_OFFSET + UNCAUGHT.size

__all__ = ["FILE_SIZE", "INIT_OFFSET", "INIT_PHASE", "PREFIX", "PROGRESS_FILE_ENV", "RECORD", "UNCAUGHT_OFFSET", "Counts",
           "InitPhase", "last_written", "read", "uncaught"]

PREFIX = "smtrain-progress-"  # the files' names begin so (smtrain.proc.rank_progress makes them)


class InitPhase(enum.IntEnum):
    """Where a rank is in Horovod's `init`, which returns once every rank has called it."""

    NOT_REACHED = 0
    WAITING = 1  # called it: waiting for the other ranks
    DONE = 2  # returned from it

    @classmethod
    def parse(cls, value: object) -> "Optional[InitPhase]":
        """The phase a number written to the progress file or a control message stands for; None if none."""
        return cls(value) if isinstance(value, int) and 0 <= value <= max(cls) else None


class Counts(NamedTuple):
    """What a rank's progress file holds: steps, other signs of life, where hvd.init() is."""
    steps: int = 0
    beats: int = 0  # signs of life other than steps
    init: InitPhase = InitPhase.NOT_REACHED


def read(path: str) -> Counts:
    """What a rank last wrote to its progress file; all zero before the first write."""
    try:
        with open(path, "rb") as f:
            data = f.read(FILE_SIZE)
    except OSError:
        return Counts()
    if len(data) < RECORD.size:
        return Counts()
    steps, beats, _ = RECORD.unpack_from(data)
    if len(data) >= 2 * RECORD.size:
        beats += RECORD.unpack_from(data, RECORD.size)[1]
    init = InitPhase.NOT_REACHED
    if len(data) >= INIT_OFFSET + INIT_PHASE.size:
        (value,) = INIT_PHASE.unpack_from(data, INIT_OFFSET)
        parsed = InitPhase.parse(value)
        init = InitPhase.NOT_REACHED if parsed is None else parsed
    return Counts(steps, beats, init)


def last_written(path: str) -> float:
    """The wall-clock time of the program's last write of steps or signs of life (either record); 0 before any."""
    try:
        with open(path, "rb") as f:
            data = f.read(2 * RECORD.size)
    except OSError:
        return 0.0
    return max((RECORD.unpack_from(data, at)[2] for at in (0, RECORD.size) if len(data) >= at + RECORD.size), default=0.0)


def uncaught(path: str) -> bool:
    """Whether the program said its main thread died of an uncaught exception (see above)."""
    try:
        with open(path, "rb") as f:
            f.seek(UNCAUGHT_OFFSET)
            data = f.read(UNCAUGHT.size)
    except OSError:
        return False
    return len(data) == UNCAUGHT.size and UNCAUGHT.unpack(data)[0] == 1
