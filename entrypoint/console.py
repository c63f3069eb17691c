"""The container's stderr, shared by the toolkit's own messages and the program's relayed stderr.

One lock serialises whole-line writes, so a toolkit message never lands inside a program's line.
"""
from __future__ import annotations

import os
import threading

STDERR_LOCK = threading.Lock()
_prefix = "[train] "


def set_prefix(prefix: str) -> None:
    """Mark this process's messages, e.g. as one rank's: `[train rank 3] `."""
    global _prefix
    _prefix = prefix


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def log(message: str) -> None:
    """A toolkit message on stderr, one line per call, marked as the toolkit's."""
    lines = "".join(f"{_prefix}{line}\n" for line in message.splitlines() or [""])
    with STDERR_LOCK:
        write_all(2, lines.encode("utf-8", "replace"))
