"""The toolkit's own processes beside the program (system monitor, demultiplexers, sshd, feeder, the
intermediate output's syncer, the warm profiler report): each declared as a `HelperSpec` (what runs, and how
it ends), started in its own session into the job's one `HelperGroup`, its output relayed in whole lines,
and stopped along one path. Those that outlive the program (`outlives_program`: the syncer, the report) are
left running by the group's stop and ended by the job once its outcome is written (`HelperGroup.outliving`).

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

from ..common import linux
from ..common.console import log
from ..config.defaults import HELPER_STOP_S
from .streams import LineRelay

__all__ = ["Helper", "HelperGroup", "HelperSpec", "stop_all"]


class HelperSpec(NamedTuple):
    """One helper process, declared: what runs, and how it ends."""
    name: str  # for log lines: "system monitor", "demultiplexer train", "sshd"
    argv: tuple[str, ...]
    outlives_program: bool = False  # left running when the program ends; the job ends it after its outcome is out
    parent_death: bool = False  # SIGTERM should `train` die, however it dies (it writes its last samples, then goes)
    nice: int = 0  # added to its niceness (the warm report: not to slow the job's start-up)
    told: bool = False  # its stdin a pipe: it is told later what to do
    env: Optional[Mapping[str, str]] = None  # None: train's own
    optional: bool = False  # where it cannot start, the job goes on without it (said in the log)


class Helper(NamedTuple):
    """A helper process running, as its spec declared it."""
    process: subprocess.Popen
    spec: HelperSpec

    @property
    def name(self) -> str:
        return self.spec.name


def _spawn(argv: Sequence[str], preexec_fn: Optional[Callable[[], None]] = None,
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

    def start(self, spec: HelperSpec) -> Optional[Helper]:
        """Starts the helper `spec` declares and keeps it in the group; None where an optional one could not start."""
        parent = os.getpid()

        def before_exec() -> None:
            if spec.parent_death:
                linux.set_parent_death_signal(signal.SIGTERM, parent)
            if spec.nice:
                os.nice(spec.nice)

        try:
            process = _spawn(spec.argv, before_exec if spec.parent_death or spec.nice else None, spec.env,
                             subprocess.PIPE if spec.told else subprocess.DEVNULL)
        except OSError as e:
            if not spec.optional:
                raise
            log(f"the {spec.name} could not start: {e}")
            return None
        helper = Helper(process, spec)
        self.helpers.append(helper)
        return helper

    def get(self, name: str) -> Optional[Helper]:
        """The helper of that name, if the group has it."""
        return next((h for h in self.helpers if h.name == name), None)

    def outliving(self) -> list[Helper]:
        """The helpers left running when the program ends, out of this group (the job ends them: its caller)."""
        return self.take([h.name for h in self.helpers if h.spec.outlives_program], exact=True)

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
            _terminate(self._ending())
            self._asked = True

    def stop(self) -> None:
        """Stops every helper of the group that ends with the program: SIGTERM at once (unless asked already),
        SIGKILL to those left after one deadline."""
        stop_all(self._ending(), signalled=self._asked)

    def _ending(self) -> list[Helper]:
        """The helpers that end with the program (not those that outlive it)."""
        return [h for h in self.helpers if not h.spec.outlives_program]

    def __enter__(self) -> "HelperGroup":
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
