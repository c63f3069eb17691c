"""Watching a rank's stderr for the first Python traceback, to report the failure early."""
from __future__ import annotations

import threading
import time
from typing import Callable, Optional

from .reporter import Reporter

REPORT_TAIL_BYTES = 8192  # the whole tail the supervisor keeps: a crash dump may follow the traceback
MAX_TRACEBACK_BYTES = 65536  # an early report goes once this much traceback came without its exception line
TRACEBACK = b"Traceback (most recent call last):"

__all__ = ["FailureWatch", "exception_line_seen"]


def exception_line_seen(traceback: bytes) -> bool:
    """Whether a traceback (from its header on) has reached its exception line: the first whole line
    after the frames that is not indented, e.g. `RuntimeError: boom`."""
    lines = traceback.split(b"\n")[1:-1]  # the header, then whole lines only
    return any(line and not line[:1].isspace() for line in lines)


class FailureWatch:
    """Notes when the program's first Python traceback appears on stderr, and tells the master soon
    (an "early" report): when a rank fails, the others soon fail too and mpirun's abort may kill this
    rank's launcher before its program has finished tearing down. The report waits for the
    exception line (at most `wait_s`), which says whether this rank failed because another did
    (Horovod's "has been shut down"). The moment a traceback appears is also the best clock for
    which rank failed first. `uncaught()` says whether the program's start-up hook saw that exception
    end its main thread (the report then says so: the master need not wait for the final one)."""

    def __init__(self, reporter: Reporter, wait_s: float = 0.5, uncaught: Callable[[], bool] = lambda: False) -> None:
        self.first_error_at: Optional[float] = None
        self._reporter, self._wait_s, self._uncaught = reporter, wait_s, uncaught
        self._traceback = bytearray()
        self._lock = threading.Lock()
        self._sent = False
        self._timer: Optional[threading.Timer] = None

    def __call__(self, data: bytes) -> None:
        with self._lock:
            if self._sent:
                return
            if self.first_error_at is None:
                if TRACEBACK not in data:
                    return
                self.first_error_at = time.time()
                data = data[data.index(TRACEBACK):]
                self._timer = threading.Timer(self._wait_s, self._report)
                self._timer.daemon = True
                self._timer.start()
            self._traceback += data
            complete = len(self._traceback) > MAX_TRACEBACK_BYTES or exception_line_seen(bytes(self._traceback))
        if complete:
            self._report()

    def _report(self) -> None:
        with self._lock:
            if self._sent:
                return
            self._sent = True
            if self._timer is not None:
                self._timer.cancel()
            tail = bytes(self._traceback)[-REPORT_TAIL_BYTES:].decode("utf-8", "replace")
            assert self.first_error_at is not None
            report = self._reporter.failure(final=False, error_at=self.first_error_at, stderr_tail=tail,
                                            uncaught=self._uncaught())
        threading.Thread(target=self._reporter.send, args=(report,), daemon=True).start()
