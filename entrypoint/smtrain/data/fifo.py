"""Opening a Pipe-mode FIFO: for reading, bounded in time (a FIFO's open blocks until its writer comes);
for writing, as soon as a reader comes, until stopped (WriterStop); a pipe's buffer size."""
from __future__ import annotations

import fcntl
import os
import select
import threading
import time
from pathlib import Path
from typing import Optional

__all__ = ["PipeError", "WriterStop", "open_fifo", "set_pipe_size"]


def set_pipe_size(fd: int, size: int) -> None:
    """A pipe's buffer to `size` bytes where the system allows (above /proc/sys/fs/pipe-max-size it
    needs CAP_SYS_RESOURCE); else it keeps its size, which still works, in smaller pieces."""
    try:
        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, size)
    except OSError:
        pass


class PipeError(RuntimeError):
    """A Pipe-mode channel could not be read: missing FIFO, no writer, corrupt or truncated data."""


def open_fifo(path: str, timeout: float, pipe_size: int) -> int:
    """Open a FIFO for reading once it exists and its writer has connected; bounded by `timeout`.
    Its buffer is widened to `pipe_size` (set_pipe_size): SageMaker's FIFO holds Linux's default
    64 KiB, and a writer woken for every 64 KiB held the Python reader of 100-KiB records to under a
    third of its speed here (the readers read up to 1 MiB at a time, as the native op does)."""
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
        set_pipe_size(fd, pipe_size)
    except BaseException:
        os.close(fd)
        raise
    return fd


class WriterStop:
    """A stop flag for threads that open FIFOs for writing, which wakes the ones waiting in `open`.

    A writer's blocking open returns the moment a reader opens the FIFO: no polling, so no reader
    waits on a poll interval, however long it came after the writer (a rank that imports TensorFlow
    for seconds, an evaluation between epochs). `set()` ends the waits by opening each waited-on FIFO
    for reading itself, and holds it open until that writer's open has returned: a writer that
    registered just before `set()` and is only about to call `open` still finds a reader there."""

    def __init__(self) -> None:
        self._set = False
        self._lock = threading.Lock()
        self._waiting: set[Path] = set()
        self._wakers: dict[Path, int] = {}

    def is_set(self) -> bool:
        """Whether the writers were told to stop."""
        return self._set

    def set(self) -> None:
        """Tells the writers to stop, waking those blocked opening a FIFO no reader opened."""
        with self._lock:
            self._set = True
            for path in self._waiting - set(self._wakers):
                try:
                    self._wakers[path] = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
                except OSError:
                    pass  # gone: nobody can be waiting in its open

    def open_writer(self, path: Path) -> Optional[int]:
        """`path` opened for writing (blocking) once a reader has opened it; None once stopped."""
        with self._lock:
            if self._set:
                return None
            self._waiting.add(path)
        try:
            fd = os.open(path, os.O_WRONLY)
        finally:
            with self._lock:
                self._waiting.discard(path)
                waker = self._wakers.pop(path, None)
            if waker is not None:
                os.close(waker)
        if self._set:
            os.close(fd)
            return None
        return fd
