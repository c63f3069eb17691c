"""Run one program in its own session and supervise it until it, and everything it started, is gone.

Signal handling follows one rule: handlers do nothing but wake the main loop (through Python's
wakeup fd), and the loop decides. SIGTERM, SIGINT and SIGHUP are forwarded at once to the program's
whole process group (and to any descendant that left it), start the grace period, and SIGKILL
follows when it ends. SIGUSR1/SIGUSR2 are forwarded as they are. `train` makes itself a child
subreaper, so descendants orphaned by the program are re-parented to it, reaped, and never outlive it.
"""
from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path
from typing import Callable, Mapping, NamedTuple, Optional, Sequence

from ..common import linux
from ..common.console import log
from ..common.signals import SHUTDOWN_SIGNALS, WAKE, SignalWaker
from ..config.defaults import ABORT_GRACE_S
from .oom import oom_kill_count
from .streams import LineRelay, TailBuffer

__all__ = ["LEFTOVER_WAIT_S", "STDERR_TAIL_BYTES", "ProcessResult", "end_descendants", "parent_death_signal",
    "signal_tree", "supervise"]

LEFTOVER_WAIT_S = 2.0  # after the program ended: how long its leftovers get between SIGTERM and SIGKILL
STDERR_TAIL_BYTES = 8192


class ProcessResult(NamedTuple):
    """How a supervised program ended, and what that takes to explain it."""
    exit_code: int  # the program's status; 128+N when a signal ended it
    term_signal: Optional[int]  # the signal that ended it, if one did
    shutdown_signal: Optional[int]  # the first SIGTERM/SIGINT/SIGHUP that `train` received
    killed_after_grace: bool  # the toolkit sent SIGKILL when the grace period ran out
    stderr_tail: bytes
    started: bool = True
    # SIGKILL, not the toolkit's, while the kernel's OOM killer ran in this host's memory cgroup
    oom_killed: bool = False


def signal_tree(pgid: int, signum: int, spare: Sequence[int] = ()) -> None:
    """Send `signum` once to every process of the program's tree: its process group, and each
    descendant that left the group (whether still under the program or re-parented to us), except
    the toolkit's own helpers in `spare` and their children."""
    try:
        os.killpg(pgid, signum)
    except (ProcessLookupError, PermissionError):
        pass
    for pid in linux.descendants_of(os.getpid(), prune=spare):
        try:
            if os.getpgid(pid) != pgid:
                os.kill(pid, signum)
        except ProcessLookupError:
            pass


def _reap(program_pid: int) -> Optional[int]:
    """Reap every exited child; return the program's wait status if it was among them."""
    status = None
    while True:
        try:
            pid, wait_status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return status
        if pid == 0:
            return status
        if pid == program_pid:
            status = wait_status


def end_descendants(wait_s: float, spare: Sequence[int] = ()) -> None:
    """SIGTERM every descendant of this process (except `spare` and theirs), give them `wait_s`, then SIGKILL;
    reap them all. As a subreaper, everything a program left behind is among our descendants.
    Zombies count until they are reaped: one that died after the last reap would otherwise be
    left to the host's init (and a parent still exiting may yet hand its zombies to us). Signals that arrive
    meanwhile stay with the job's SignalWaker for its loop: this polls, it does not read them."""

    def alive() -> list[int]:
        _reap(-1)
        return linux.descendants_of(os.getpid(), prune=spare, zombies=True)

    for signum, wait in ((signal.SIGTERM, wait_s), (signal.SIGKILL, 5.0)):
        pids = alive()
        if not pids:
            return
        if signum == signal.SIGTERM:
            log(f"{len(pids)} process(es) left running; sending SIGTERM, SIGKILL after {wait_s:g} s")
        for pid in pids:
            try:
                os.kill(pid, signum)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + wait
        while alive() and time.monotonic() < deadline:
            time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))


def parent_death_signal(signum: int) -> Callable[[], None]:
    """A `preexec_fn` (it runs in the child between fork and exec): the child gets `signum` when
    this process dies, however it dies."""
    parent = os.getpid()
    return lambda: linux.set_parent_death_signal(signum, parent)


def _wait_for_end(pid: int, waker: SignalWaker, forward: Callable[[int, int], None], grace_period_s: float,
                  spare: Sequence[int], on_wake: Optional[Callable[[], Optional[str]]]
                  ) -> tuple[int, Optional[int], Optional[float], bool]:
    """Until the program `pid` has ended, signals passed on and the job's end carried out (see
    `supervise`): its wait status, the shutdown signal received, when the time to stop ends (None:
    no end was asked for, or SIGKILL was sent), and whether the tree got SIGKILL."""
    shutdown: Optional[int] = None
    deadline: Optional[float] = None
    killed = False
    while True:
        status = _reap(pid)
        if status is not None:
            return status, shutdown, deadline, killed
        timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
        for signum in waker.wait(timeout):
            if signum == signal.SIGCHLD:
                continue
            if signum == WAKE:
                reason = on_wake() if on_wake is not None else None
                abort_at = time.monotonic() + ABORT_GRACE_S
                if reason and (deadline is None or deadline > abort_at):
                    log(f"{reason}: ending the job (SIGTERM now, SIGKILL after {ABORT_GRACE_S:g} s)")
                    forward(pid, signal.SIGTERM)
                    deadline = abort_at
                continue
            forward(pid, signum)
            if signum in SHUTDOWN_SIGNALS and shutdown is None:
                shutdown = signum
                deadline = time.monotonic() + grace_period_s
                log(f"received {signal.Signals(signum).name}: forwarded to the program; "
                    f"grace period {grace_period_s:g} s before SIGKILL")
        if deadline is not None and time.monotonic() >= deadline:
            log("the time to stop is over: sending SIGKILL to the program")
            signal_tree(pid, signal.SIGKILL, spare)
            killed, deadline = True, None


def supervise(
    argv: Sequence[str],
    env: Mapping[str, str],
    cwd: Path,
    grace_period_s: float,
    waker: SignalWaker,
    forward: Optional[Callable[[int, int], None]] = None,
    spare: Sequence[int] = (),
    on_started: Optional[Callable[[], Sequence[int]]] = None,
    on_stderr: Optional[Callable[[bytes], None]] = None,
    on_wake: Optional[Callable[[], Optional[str]]] = None,
) -> ProcessResult:
    """Run `argv` to its end. `forward(pid, signum)` passes a received signal on (by default to the
    program's whole tree); when the grace period after a shutdown signal ends, the tree gets SIGKILL.
    When it has ended, whatever it left running is ended too. The toolkit's helpers in `spare` (the
    monitor, demultiplexers), and those `on_started` starts once the program runs (it returns their
    pids; starting them after the program keeps them off its start-up), get none of these signals:
    the caller stops them. When another thread wakes the loop (`SignalWaker.post`), `on_wake()` says
    why the job must end now, or None: the tree then gets SIGTERM, and SIGKILL ABORT_GRACE_S later."""
    spare = list(spare)
    if forward is None:
        def forward(pid: int, signum: int) -> None:
            signal_tree(pid, signum, spare)

    early = waker.shutdown_requested()
    if early is not None:
        log(f"received {signal.Signals(early).name} before the program started; not starting it")
        return ProcessResult(128 + early, None, early, False, b"", started=False)
    linux.become_subreaper()
    oom_before = oom_kill_count()
    read_fd, write_fd = os.pipe()
    try:
        proc = subprocess.Popen(
            list(argv), env=dict(env), cwd=cwd, stderr=write_fd, start_new_session=True,
            preexec_fn=parent_death_signal(signal.SIGKILL),
        )
    finally:
        os.close(write_fd)
    tail = TailBuffer(STDERR_TAIL_BYTES)
    relay = LineRelay(read_fd, 2, tail, on_emit=on_stderr).start()
    if on_started is not None:
        spare.extend(on_started())

    status, shutdown, deadline, killed = _wait_for_end(proc.pid, waker, forward, grace_period_s, spare, on_wake)

    exit_code = os.waitstatus_to_exitcode(status)
    proc.returncode = exit_code  # reaped here, not by Popen.wait(): tell Popen so it does not try
    term_signal = -exit_code if exit_code < 0 else None
    oom_after = oom_kill_count() if term_signal == signal.SIGKILL and not killed else None
    leftover_wait = LEFTOVER_WAIT_S if deadline is None else max(LEFTOVER_WAIT_S, deadline - time.monotonic())
    end_descendants(leftover_wait, spare)
    if not relay.join(timeout=5.0):
        log("the program's stderr is still held open by a process outside its tree; not waiting for it")
    return ProcessResult(
        exit_code=128 + term_signal if term_signal else exit_code,
        term_signal=term_signal,
        shutdown_signal=shutdown,
        killed_after_grace=killed,
        stderr_tail=tail.get(),
        oom_killed=oom_before is not None and oom_after is not None and oom_after > oom_before,
    )
