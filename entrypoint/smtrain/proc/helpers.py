"""The toolkit's own processes beside the program (system monitor, demultiplexers, sshd, feeder):
started in their own sessions, their output relayed in whole lines, and stopped along one path.

Stopping: every helper gets SIGTERM at once, then all are waited for against one deadline, then
whatever is left gets SIGKILL. One helper that ignores SIGTERM costs the deadline once, not once
per helper, so `train` ends within the grace period plus a few seconds.
"""
from __future__ import annotations

import os
import signal
import subprocess
import time
from typing import Callable, Mapping, NamedTuple, Optional, Sequence

from ..common.console import log
from ..config.defaults import HELPER_STOP_S
from .streams import LineRelay

__all__ = ["Helper", "HelperGroup", "spawn_helper", "stop_all"]


class Helper(NamedTuple):
    """A process the toolkit runs beside the program (the monitor, a demultiplexer, sshd)."""
    name: str  # for log lines: "monitor", "demultiplexer train", "sshd"
    process: subprocess.Popen


def spawn_helper(argv: Sequence[str], preexec_fn: Optional[Callable[[], None]] = None,
                 env: Optional[Mapping[str, str]] = None, stdin: int = subprocess.DEVNULL) -> subprocess.Popen:
    """Start one helper in its own session. Its output goes through a relay into our stderr, in
    whole lines under the console lock, so it never lands inside a line of the program's. `stdin`:
    subprocess.PIPE for a helper told what to do later (the warm profiler report)."""
    read_fd, write_fd = os.pipe()
    try:
        proc = subprocess.Popen(list(argv), stdin=stdin, stdout=write_fd, stderr=write_fd,
                                start_new_session=True, preexec_fn=preexec_fn, env=None if env is None else dict(env))
    except BaseException:
        os.close(read_fd)
        raise
    finally:
        os.close(write_fd)
    LineRelay(read_fd, 2).start()
    return proc


def stop_all(helpers: Sequence[Helper], wait_s: float = HELPER_STOP_S, signalled: bool = False) -> None:
    """SIGTERM to every helper at once (not again where `signalled`); one deadline for all; SIGKILL to the
    rest; reap them all. Looked at every millisecond at first (a helper stops in a few, and every host's
    end waits for its helpers), then less often."""
    running = [h for h in helpers if h.process.poll() is None]
    if not signalled:
        _terminate(running)
    deadline, pause = time.monotonic() + wait_s, 0.001
    while running and time.monotonic() < deadline:
        running = [h for h in running if h.process.poll() is None]
        if running:
            time.sleep(pause)
            pause = min(2 * pause, 0.02)
    for helper in running:
        log(f"{helper.name} did not stop within {wait_s:g} s of SIGTERM: sending SIGKILL")
        _signal(helper.process, signal.SIGKILL)
    for helper in running:
        try:
            helper.process.wait(timeout=5)
        except subprocess.TimeoutExpired:  # unkillable (stuck in the kernel): nothing more to do
            log(f"{helper.name} (pid {helper.process.pid}) survived SIGKILL")


def _terminate(helpers: Sequence[Helper]) -> None:
    """SIGTERM to each of `helpers` still running."""
    for helper in helpers:
        if helper.process.poll() is None:
            _signal(helper.process, signal.SIGTERM)


def _signal(process: subprocess.Popen, signum: int) -> None:
    try:
        process.send_signal(signum)
    except ProcessLookupError:
        pass


class HelperGroup:
    """The helpers one `train` started; `stop()` ends them all along the one shutdown path. Used as
    a context manager, a failure while starting still stops those already running."""

    def __init__(self) -> None:
        self.helpers: list[Helper] = []
        self._asked = False  # ask_to_stop has sent SIGTERM to every helper

    def start(self, name: str, argv: Sequence[str], preexec_fn: Optional[Callable[[], None]] = None,
              env: Optional[Mapping[str, str]] = None) -> Helper:
        """Starts a helper process and keeps it in the group."""
        helper = Helper(name, spawn_helper(argv, preexec_fn, env))
        self.helpers.append(helper)
        return helper

    def take(self, prefixes: Sequence[str], exact: bool = False) -> list[Helper]:
        """The helpers whose names start with one of `prefixes` (`exact`: are one of them), out of this
        group (the caller stops them)."""
        taken = [h for h in self.helpers if (h.name in prefixes if exact else h.name.startswith(tuple(prefixes)))]
        self.helpers = [h for h in self.helpers if h not in taken]
        return taken

    @property
    def pids(self) -> list[int]:
        """The group's process ids (spared by the program's signals)."""
        return [h.process.pid for h in self.helpers]

    def ask_to_stop(self) -> None:
        """SIGTERM to every helper now, without waiting for them: they finish (the monitor writes its last
        samples) while `train` does something else, and `stop()` then waits for them."""
        if not self._asked:
            _terminate(self.helpers)
            self._asked = True

    def stop(self) -> None:
        """Stops every helper of the group: SIGTERM at once (unless asked already), SIGKILL to those left after
        one deadline."""
        stop_all(self.helpers, signalled=self._asked)

    def __enter__(self) -> "HelperGroup":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
