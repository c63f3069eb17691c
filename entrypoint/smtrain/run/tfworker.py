"""A worker host of a TensorFlow strategy job: waits for the master's start, runs its parameter
server and its program, tells the master when its program ended, and ends with the job's outcome.

The master can stop this host's program at any time: `signal` (a shutdown signal it received:
forwarded as if this `train` had received it, with the grace period), `abort` (another task failed:
SIGTERM now, SIGKILL after ABORT_GRACE_S) and `end` (the job is over, e.g. a parameter-server
job's master program finished). A master that goes silent for the heartbeat timeout is lost.
"""
from __future__ import annotations

import os
import select
import socket
import threading
import time
from typing import Optional

from ..common import linux
from ..common.console import log
from ..common.signals import SHUTDOWN_SIGNALS
from ..config.defaults import HEARTBEAT_S
from ..errors import ExitCode
from ..plan.launch import LaunchPlan
from . import control
from .control import MessageType
from .helpers import HelperGroup
from .outcome import FileState
from .single import finish, prepare, start_helpers
from .supervise import SignalWaker, end_descendants, supervise
from .tftasks import program_env, start_ps
from .worker import connect_to_master, master_lost

__all__ = ["MasterLink", "run_tf_worker"]


class MasterLink:
    """The worker's side of the control connection, read by one thread that also sends heartbeats;
    whatever it learns wakes the main loop (`SignalWaker.post`)."""

    def __init__(self, sock: socket.socket, silence_s: float, waker: SignalWaker) -> None:
        self._sock, self._silence_s, self._waker = sock, silence_s, waker
        self._lock = threading.Lock()
        self._started = threading.Event()
        self.token: Optional[str] = None
        self.abort_reason: Optional[str] = None
        self.end: Optional[tuple[int, str]] = None  # the job's status and reason, as the master said
        self.lost: Optional[str] = None  # how the master was lost

    def start(self) -> "MasterLink":
        threading.Thread(target=self._run, name="master-link", daemon=True).start()
        return self

    def send(self, kind: MessageType, **fields: object) -> None:
        with self._lock:
            try:
                self._sock.sendall(control.encode(kind, **fields))
            except OSError:
                pass  # a broken connection shows on the next read

    def wait_start(self, deadline: float) -> Optional[str]:
        """The job's token once the master starts the job; None when it ended or was lost first."""
        while not self._started.wait(timeout=max(0.0, min(0.5, deadline - time.monotonic()))):
            if self.end is not None or self.lost is not None or time.monotonic() >= deadline:
                return None
        return self.token

    def why_end(self) -> Optional[str]:
        """Why this host's program must stop now, if it must."""
        if self.lost is not None:
            return f"lost the master ({self.lost})"
        if self.abort_reason is not None:
            return f"the master ends the job ({self.abort_reason})"
        if self.end is not None:
            return f"the job is over (status {self.end[0]})"
        return None

    def _run(self) -> None:
        reader = control.LineReader(self._sock)
        last_heard, next_beat = time.monotonic(), 0.0
        while self.end is None and self.lost is None:
            now = time.monotonic()
            if now >= next_beat:
                self.send(MessageType.HEARTBEAT)
                next_beat = now + HEARTBEAT_S
            if now - last_heard >= self._silence_s:
                self._learn(lost=f"nothing heard for {self._silence_s:g} s")
                return
            timeout = max(0.0, min(next_beat, last_heard + self._silence_s) - now)
            readable, _, _ = select.select([self._sock], [], [], timeout)
            if not readable and not reader.has_buffered():
                continue
            try:
                message = reader.read(timeout=0.5)
            except (TimeoutError, ValueError):
                continue
            if message is None:
                self._learn(lost="its connection closed")
                return
            last_heard = time.monotonic()
            self._handle(message)

    def _handle(self, message: control.Message) -> None:
        fields = message.fields
        if message.type is MessageType.START:
            self.token = str(fields.get("token", ""))
            self._started.set()
        elif message.type is MessageType.SIGNAL and isinstance(fields.get("signum"), int):
            log(f"the master forwards signal {fields['signum']}")
            os.kill(os.getpid(), fields["signum"])  # handled as our own: forwarded, grace period
        elif message.type is MessageType.ABORT:
            self._learn(abort=str(fields.get("reason", "")))
        elif message.type is MessageType.END:
            self._learn(end=(int(fields.get("status", ExitCode.INTERNAL_ERROR)), str(fields.get("reason", ""))))

    def _learn(self, lost: Optional[str] = None, abort: Optional[str] = None,
               end: Optional[tuple[int, str]] = None) -> None:
        self.lost, self.abort_reason = lost or self.lost, abort or self.abort_reason
        self.end = end or self.end
        self._waker.post()


def run_tf_worker(plan: LaunchPlan, inherited_env: dict[str, str], python: str, waker: SignalWaker) -> int:
    strategy = plan.strategy
    assert strategy is not None
    failure_at_start = FileState.of(plan.failure_file)
    prepare(plan, python)
    deadline = time.monotonic() + strategy.peer_wait_s
    linux.become_subreaper()
    try:
        with HelperGroup() as helpers:
            start_helpers(plan, helpers)
            log(f"connecting to the master {strategy.master}:{strategy.control_port}")
            sock = connect_to_master(plan.host, strategy.master, strategy.control_port, deadline, strategy.peer_wait_s)
            link = MasterLink(sock, strategy.heartbeat_timeout_s, waker).start()
            token = link.wait_start(deadline + strategy.peer_wait_s)  # the master waits for every worker
            if token is not None:
                start_ps(plan, helpers, inherited_env, token)
                log(f"host {plan.host}: starting {strategy.program_task.describe()}")
                result = supervise(plan.argv, program_env(plan, inherited_env, token), plan.cwd, plan.grace_period_s,
                                   waker, spare=helpers.pids, on_wake=link.why_end)
                link.send(MessageType.DONE, status=result.exit_code)
            status, reason = _await_end(plan, link, waker)
    finally:
        end_descendants(waker, 2.0)
    return finish(plan, status, reason, failure_at_start)


def _await_end(plan: LaunchPlan, link: MasterLink, waker: SignalWaker) -> tuple[int, str]:
    """The job's outcome, as the master tells it (the heartbeats bound the wait)."""
    while link.end is None and link.lost is None:
        if any(signum in SHUTDOWN_SIGNALS for signum in waker.wait(1.0)):
            log("this host's program has ended; waiting for the master to end the job")
    if link.end is not None:
        log(f"the master reports that the job ended with status {link.end[0]}")
        return link.end
    assert plan.strategy is not None
    return master_lost(plan.strategy.master, str(link.lost))
