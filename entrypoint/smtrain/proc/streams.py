"""Relay a child's output stream to ours line by line, in bounded memory, keeping its tail.

Lines are written whole (one `write` per batch of complete lines, under the console lock), so the
program's lines are never split by, or merged with, the toolkit's own messages. A line longer than
`max_line` is passed on in pieces rather than held in memory without bound. A final line without a
newline gets one, so the next message starts on its own line.
"""
from __future__ import annotations

import os
import threading
from typing import Callable, Optional

from ..common.console import STDERR_LOCK, write_all

__all__ = ["CHUNK", "DEFAULT_MAX_LINE", "LineRelay", "TailBuffer"]

CHUNK = 64 * 1024
DEFAULT_MAX_LINE = 1024 * 1024


class TailBuffer:
    """The last `limit` bytes written to it."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._data = bytearray()
        self._lock = threading.Lock()

    def append(self, data: bytes) -> None:
        """Keeps the last `limit` bytes of what was appended so far."""
        with self._lock:
            self._data += data[-self.limit:]
            del self._data[: max(0, len(self._data) - self.limit)]

    def get(self) -> bytes:
        """The bytes kept."""
        with self._lock:
            return bytes(self._data)


class LineRelay:
    """Copies `source_fd` to `target_fd` in whole lines on a daemon thread; closes `source_fd` at EOF."""

    def __init__(
        self,
        source_fd: int,
        target_fd: int,
        tail: Optional[TailBuffer] = None,
        lock: threading.Lock = STDERR_LOCK,
        max_line: int = DEFAULT_MAX_LINE,
        on_emit: Optional[Callable[[bytes], None]] = None,
        initial: bytes = b"",
    ) -> None:
        self._source = source_fd
        self._target = target_fd
        self._tail = tail
        self._lock = lock
        self._max_line = max_line
        self._on_emit = on_emit
        self._initial = initial  # bytes of the stream already read by someone else (a connection's first line's reader)
        self._thread = threading.Thread(target=self._run, name=f"relay-{source_fd}", daemon=True)

    def start(self) -> "LineRelay":
        """Starts relaying in a thread of its own; returns self."""
        self._thread.start()
        return self

    def running(self) -> bool:
        """Whether it still relays (its stream's writers have not all closed it)."""
        return self._thread.is_alive()

    def join(self, timeout: Optional[float] = None) -> bool:
        """Until the stream's writers closed it or `timeout` passed; whether it was closed."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def _emit(self, data: bytes) -> None:
        with self._lock:
            write_all(self._target, data)
        if self._tail is not None:
            self._tail.append(data)
        if self._on_emit is not None:
            self._on_emit(data)

    def _run(self) -> None:
        pending = bytearray()
        chunk = self._initial
        try:
            while True:
                pending += chunk
                end = pending.rfind(b"\n")
                if end >= 0:
                    self._emit(bytes(pending[: end + 1]))
                    del pending[: end + 1]
                elif len(pending) >= self._max_line:
                    self._emit(bytes(pending))
                    pending.clear()
                chunk = os.read(self._source, CHUNK)
                if not chunk:
                    break
            if pending:
                self._emit(bytes(pending) + b"\n")
        except OSError:
            pass  # our own stream went away (container stopping); nothing left to relay to
        finally:
            os.close(self._source)
