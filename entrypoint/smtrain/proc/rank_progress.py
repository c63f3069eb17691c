"""A rank's progress file, made by its supervisor and written by the program (smtrain.progress), and
the SIGABRT that makes a stalled program log its Python stacks."""
from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Optional

from ..common import linux
from ..common.scratch import make_scratch_file, shm_folder
from ..wire import progress_file

__all__ = ["ProgressFile", "dump_stacks", "newest_progress_age"]


class ProgressFile:
    """A rank's progress file, made by its supervisor and written by the program (smtrain.progress)."""

    def __init__(self) -> None:
        fd, self.path = make_scratch_file(progress_file.PREFIX, shm_folder())
        try:
            os.ftruncate(fd, progress_file.FILE_SIZE)  # the program maps it: it must have its size
        finally:
            os.close(fd)

    def export(self, env: dict[str, str]) -> None:
        """Tell the program (its environment `env`) where to report, and let a stall's SIGABRT log
        its Python stacks (faulthandler), unless the user chose otherwise."""
        env[progress_file.PROGRESS_FILE_ENV] = self.path
        env.setdefault("PYTHONFAULTHANDLER", "1")

    def read(self) -> progress_file.Counts:
        """Steps, signs of life and where in Horovod's init, so far."""
        return progress_file.read(self.path)

    def uncaught(self) -> bool:
        """Whether the program's main thread died of an uncaught exception (its start-up hook says so
        where restarts in place are asked for): it is ending with status 1."""
        return progress_file.uncaught(self.path)

    def remove(self) -> None:
        """Removes the file (nothing when it is gone)."""
        try:
            os.unlink(self.path)
        except OSError:
            pass


def newest_progress_age(step_files: Optional[Path] = None) -> Optional[float]:
    """Seconds since a rank of this host last wrote steps or signs of life to its progress file (smtrain.progress,
    the native Pipe reader), or its step recorder wrote steps to one of the `*.tmp` files in `step_files` (the
    steps of scripts that never import smtrain: smtrain.profiler.steps); None where none has."""
    import tempfile  # not before the program's start

    folder = Path(shm_folder() or tempfile.gettempdir())
    newest = max((progress_file.last_written(str(p)) for p in folder.glob(progress_file.PREFIX + "*")), default=0.0)
    if step_files is not None:
        for path in step_files.glob("*.tmp"):
            try:
                newest = max(newest, path.stat().st_mtime)
            except OSError:
                continue
    return time.time() - newest if newest else None


def dump_stacks(spare: "list[int] | tuple[int, ...]" = ()) -> None:
    """SIGABRT to this process's children (the program; not the helpers in `spare`): with
    PYTHONFAULTHANDLER their faulthandler writes every thread's Python stack to the log."""
    for child in linux.children_of(os.getpid()):
        if child not in spare:
            try:
                os.kill(child, signal.SIGABRT)
            except ProcessLookupError:
                pass
