"""Signals as events for a main loop: handlers only wake the loop, the loop decides.

Python's C-level handler writes each signal number to a wakeup fd; `SignalWaker` owns that pipe.
A handler that did more (set an Event, log) could deadlock when a second signal arrives inside it.
"""
from __future__ import annotations

import fcntl
import os
import select
import signal
from typing import Optional

SHUTDOWN_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)
WAKE = 0  # not a signal: another thread of this process asks the loop to look (SignalWaker.post)
FORWARDED_SIGNALS = SHUTDOWN_SIGNALS + (signal.SIGUSR1, signal.SIGUSR2)

__all__ = ["FORWARDED_SIGNALS", "SHUTDOWN_SIGNALS", "WAKE", "SignalWaker"]


def _noop(signum: int, frame: object) -> None:
    """Python-level handler; the C handler has already written the signal to the wakeup fd."""


class SignalWaker:
    """Turns the signals the supervisor cares about into bytes on a pipe the main loop selects on.

    Installed once, early in `main`, so a SIGTERM that arrives while the config is read is kept.
    """

    def __init__(self) -> None:
        self._read_fd, self._write_fd = os.pipe()
        for fd in (self._read_fd, self._write_fd):
            fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) | os.O_NONBLOCK)
        signal.set_wakeup_fd(self._write_fd, warn_on_full_buffer=False)
        for signum in FORWARDED_SIGNALS + (signal.SIGCHLD,):
            signal.signal(signum, _noop)
        self._held: list[int] = []
        self.shutdown_seen: Optional[int] = None  # the first shutdown signal that arrived, ever

    def post(self) -> None:
        """Wake the loop from another thread (it reads WAKE among the signals)."""
        try:
            os.write(self._write_fd, bytes([WAKE]))
        except BlockingIOError:
            pass  # the pipe is full: the loop will wake anyway

    def fileno(self) -> int:
        """Readable when a signal arrived (for callers that select on other things too)."""
        return self._read_fd

    def wait(self, timeout: Optional[float]) -> list[int]:
        """Signals received since the last call, waiting up to `timeout` s (None: until one comes)."""
        if not self._held:
            readable, _, _ = select.select([self._read_fd], [], [], timeout)
            if readable:
                self._held.extend(self._drain())
        else:
            self._held.extend(self._drain())
        got, self._held = self._held, []
        return got

    def _drain(self) -> list[int]:
        received: list[int] = []
        while True:
            try:
                data = os.read(self._read_fd, 512)
            except BlockingIOError:
                return received
            if not data:
                return received
            received.extend(data)
            if self.shutdown_seen is None:
                self.shutdown_seen = next((s for s in data if s in SHUTDOWN_SIGNALS), None)

    def shutdown_requested(self) -> Optional[int]:
        """A shutdown signal received before the program started (kept for the supervisor)."""
        self._held.extend(self._drain())
        return next((s for s in self._held if s in SHUTDOWN_SIGNALS), None)
