"""Heartbeats on a thread that does nothing else, which says so itself when it was held back.

A peer judges this host's `train` by its heartbeats (smtrain.wire.liveness): one that stops beating for the
heartbeat timeout while its host still answers is waited for, then lost. What holds a sender back is not
visible from the peer's side, so the sender watches itself, two ways:

- after each beat, how late it went out (the sleep woke late, or the last send blocked): from LATE_S on, the
  log says so once (again only after a beat on time), with every thread's Python stack as it is then - from a
  thread of its own, since the log may be a pipe nobody reads for a while (a log reader short of CPU) and a
  beat must never wait on it;
- before each beat it arms the interpreter's own watchdog (`faulthandler.dump_traceback_later`), whose C
  thread needs no GIL: should the next beat not come within the interval and LATE_S - a thread holding the
  interpreter in a long C call, a blocked send, a lock - every thread's stack goes to stderr at that moment,
  naming what held it. It writes through a non-blocking description of stderr of its own: re-arming the
  watchdog waits for its last dump to be written, and a full log pipe would hold the beats back; a dump that
  does not fit is cut short instead.
"""
from __future__ import annotations

import faulthandler
import os
import sys
import threading
import time
from typing import Callable

__all__ = ["Heartbeat", "LATE_S", "thread_stacks"]

LATE_S = 3.0  # a beat this late is said (a peer's heartbeat timeout is at least 3 beats)


def thread_stacks() -> str:
    """Every thread's Python stack, named, as it is now."""
    import traceback  # here: only a late beat needs it, and every `train` imports this module at start

    names = {t.ident: t.name for t in threading.enumerate()}
    return "".join(f"thread {names.get(ident, ident)}:\n{''.join(traceback.format_stack(frame))}"
                   for ident, frame in sys._current_frames().items())


class Heartbeat:
    """Calls `beat()` every `interval_s` (config.defaults.HEARTBEAT_S) on a daemon thread while `beating()` says
    so; says when it was late."""

    def __init__(self, beat: Callable[[], object], beating: Callable[[], bool], log: Callable[[str], None],
                 interval_s: float, late_s: float = LATE_S) -> None:
        self._beat, self._beating, self._log = beat, beating, log
        self._interval_s, self._late_s = interval_s, late_s
        self.worst_s = 0.0  # the latest a beat went out so far

    def start(self) -> "Heartbeat":
        threading.Thread(target=self._run, name="heartbeat", daemon=True).start()
        return self

    def _run(self) -> None:
        due, said = time.monotonic(), False
        dumps = _stderr_without_waiting()
        try:
            while self._beating():
                faulthandler.dump_traceback_later(self._interval_s + self._late_s, repeat=False, file=dumps, exit=False)
                late = time.monotonic() - due
                self._beat()
                late = max(late, time.monotonic() - due)
                self.worst_s = max(self.worst_s, late)
                if late < self._late_s:
                    said = False
                elif not said:
                    said = True
                    said_late = (f"this host's heartbeats went out {late:.1f} s late; every thread's stack now:\n"
                                 + thread_stacks())
                    threading.Thread(target=self._log, args=(said_late,), name="heartbeat-late", daemon=True).start()
                due = max(due + self._interval_s, time.monotonic())
                time.sleep(max(0.0, due - time.monotonic()))
        finally:
            faulthandler.cancel_dump_traceback_later()
            if dumps != 2:
                os.close(dumps)


def _stderr_without_waiting() -> int:
    """A descriptor of stderr whose writes never wait (a full pipe or terminal takes what fits): stderr opened anew,
    with its own non-blocking flag (fd 2's own stays blocking), never as this process's controlling terminal (SDK
    local mode gives each container a terminal); fd 2 itself where it cannot be opened (a socket)."""
    try:
        return os.open("/proc/self/fd/2", os.O_WRONLY | os.O_APPEND | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except OSError:
        return 2
