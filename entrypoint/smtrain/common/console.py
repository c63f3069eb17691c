"""The container's stderr, shared by the toolkit's own messages and the program's relayed stderr.

One lock serialises whole-line writes, so a toolkit message never lands inside a program's line.
"""
from __future__ import annotations

import os
import sys
import threading
from typing import Callable, NoReturn

STDERR_LOCK = threading.Lock()
_prefix = "[train] "
_redact: Callable[[str], str] = str  # masks secret values (smtrain.config.secrets.Redactor)

__all__ = ["STDERR_LOCK", "exit_flushed", "log", "redact", "set_prefix", "set_redactor", "write_all"]


def set_prefix(prefix: str) -> None:
    """Mark this process's messages, e.g. as one rank's: `[train rank 3] `."""
    global _prefix
    _prefix = prefix


def set_redactor(redact: Callable[[str], str]) -> None:
    """Mask secret values in every message this process logs from now on."""
    global _redact
    _redact = redact


def redact(text: str) -> str:
    """`text` with the secret values this process knows of masked (for the failure file, too)."""
    return _redact(text)


def write_all(fd: int, data: bytes) -> None:
    """Write every byte of `data` to `fd`, however many writes it takes."""
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def log(message: str) -> None:
    """A toolkit message on stderr, one line per call, marked as the toolkit's."""
    lines = "".join(f"{_prefix}{line}\n" for line in _redact(message).splitlines() or [""])
    with STDERR_LOCK:
        write_all(2, lines.encode("utf-8", "replace"))


def exit_flushed(status: int) -> NoReturn:
    """End a process of the toolkit's own whose work is done: its stdout and stderr flushed, then gone
    without the interpreter's teardown of its modules (10-20 ms of CPU, which the end of every host -
    and mpirun's, for the ranks' launchers - waits for). Only where no thread and no exit handler of
    the process has anything left to do."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed pipe: nothing more reaches it anyway
            pass
    os._exit(status)
