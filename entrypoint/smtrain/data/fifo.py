"""Opening a Pipe-mode FIFO for reading, bounded in time (a FIFO's open blocks until its writer comes)."""
from __future__ import annotations

import fcntl
import os
import select
import time

__all__ = ["PipeError", "open_fifo"]


class PipeError(RuntimeError):
    """A Pipe-mode channel could not be read: missing FIFO, no writer, corrupt or truncated data."""


def open_fifo(path: str, timeout: float) -> int:
    """Open a FIFO for reading once it exists and its writer has connected; bounded by `timeout`."""
    deadline = time.monotonic() + timeout
    delay = 0.005
    while not os.path.exists(path):
        if time.monotonic() >= deadline:
            raise PipeError(f"{path}: no such FIFO after {timeout:g} s (is the channel in Pipe mode, and fed?)")
        time.sleep(delay)
        delay = min(delay * 2, 0.2)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN | select.POLLHUP)
        # Linux reports neither until a writer has connected: data (POLLIN) or an empty epoch (POLLHUP).
        if not poller.poll(max(0.0, deadline - time.monotonic()) * 1000):
            raise PipeError(f"{path}: nobody wrote to the FIFO within {timeout:g} s")
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    except BaseException:
        os.close(fd)
        raise
    return fd
