"""A worker host of an MPI job: serves sshd for the master's mpirun, forwards signals to its ranks,
follows the job on the control channel, and ends with the job's outcome."""
from __future__ import annotations

import os
import select
import signal
import socket
import time

from ..common import linux
from ..common.console import log
from ..common.signals import SHUTDOWN_SIGNALS
from ..config.defaults import HEARTBEAT_S
from ..errors import ExitCode, FailureKind, PeersUnreachable
from ..plan.launch import LaunchPlan
from . import control
from .control import MessageType
from .helpers import HelperGroup
from .master import signal_ranks
from .outcome import FileState, failure_text
from .single import finish, prepare, start_helpers
from .sshd import start_sshd
from .supervise import SignalWaker, end_descendants

__all__ = ["connect_to_master", "master_lost", "run_worker"]


def connect_to_master(host: str, master: str, port: int, deadline: float, wait_s: float) -> socket.socket:
    """The control connection, hello said; PeersUnreachable when the master is not there by `deadline`."""
    sock = control.connect(master, port, deadline, control.encode(MessageType.HELLO, host=host))
    if sock is None:
        raise PeersUnreachable(f"master {master} was not reachable at {master}:{port} within {wait_s:g} s")
    return sock


def master_lost(master: str, how: str) -> tuple[int, str]:
    """The status and reason of a worker that lost its master mid-job."""
    what = f"lost the master {master} before the job ended ({how}); stopping this host's ranks"
    return int(ExitCode.PEERS_UNREACHABLE), failure_text(FailureKind.MASTER_LOST, what)


def run_worker(plan: LaunchPlan, python: str, waker: SignalWaker) -> int:
    assert plan.mpi is not None
    mpi = plan.mpi
    failure_at_start = FileState.of(plan.failure_file)
    prepare(plan, python)
    deadline = time.monotonic() + mpi.peer_wait_s
    linux.become_subreaper()  # orted daemonizes: it must re-parent to us, not to the host's init
    try:
        with HelperGroup() as helpers:
            start_helpers(plan, helpers)
            start_sshd(helpers, mpi.sshd_argv, mpi.sshd_port, deadline)
            log(f"sshd is up; connecting to the master {mpi.master}:{mpi.control_port}")
            sock = connect_to_master(plan.host, mpi.master, mpi.control_port, deadline, mpi.peer_wait_s)
            status, reason = _follow(plan, sock, waker)
    finally:
        end_descendants(waker, 2.0)  # ranks or daemons the job left behind: nothing outlives train
    return finish(plan, status, reason, failure_at_start)


def _follow(plan: LaunchPlan, sock: socket.socket, waker: SignalWaker) -> tuple[int, str]:
    """Follow the job until the master says it ended, or is lost. Returns (status, reason)."""
    reader = control.LineReader(sock)
    me = os.getpid()
    forwarded: set[int] = set()
    grace_deadline = None
    last_heard = time.monotonic()
    assert plan.mpi is not None
    silence_s = plan.mpi.heartbeat_timeout_s
    next_beat = time.monotonic()
    beat = control.encode(MessageType.HEARTBEAT)

    def forward(signum: int, origin: str) -> None:
        nonlocal grace_deadline
        if signum in forwarded and signum in SHUTDOWN_SIGNALS:
            return  # the same stop asked for twice (locally and by the master): one signal is enough
        count = signal_ranks(me, signum)
        if count:
            forwarded.add(signum)
        log(f"{origin}: forwarded {signal.Signals(signum).name} to {count} local rank(s)")
        if signum in SHUTDOWN_SIGNALS and grace_deadline is None:
            grace_deadline = time.monotonic() + plan.grace_period_s

    while True:
        if time.monotonic() >= next_beat:  # the master watches for our silence as we watch for its
            try:
                sock.sendall(beat)
            except OSError:
                pass  # a broken connection shows on the next read
            next_beat = time.monotonic() + HEARTBEAT_S
        timeout = min(silence_s - (time.monotonic() - last_heard), next_beat - time.monotonic())
        if grace_deadline is not None:
            timeout = min(timeout, grace_deadline - time.monotonic())
        readable, _, _ = select.select([sock, waker], [], [], max(0.0, timeout))
        for signum in waker.wait(0) if waker in readable else ():
            if signum != signal.SIGCHLD:
                forward(signum, f"received {signal.Signals(signum).name}")
        if grace_deadline is not None and time.monotonic() >= grace_deadline:
            log("grace period is over: sending SIGKILL to the local ranks")
            signal_ranks(me, signal.SIGKILL)
            grace_deadline = None
        if sock in readable or reader.has_buffered():
            try:
                message = reader.read(timeout=0.5)
            except (TimeoutError, ValueError):
                continue
            if message is None:
                return master_lost(plan.mpi.master, "its connection closed")
            last_heard = time.monotonic()
            fields = message.fields
            if message.type is MessageType.START:
                log("the job started")
            elif message.type is MessageType.SIGNAL and isinstance(fields.get("signum"), int):
                forward(fields["signum"], "the master asked")
            elif message.type is MessageType.END:
                status = int(fields.get("status", ExitCode.INTERNAL_ERROR))
                log(f"the master reports that the job ended with status {status}")
                return status, str(fields.get("reason", ""))
        elif time.monotonic() - last_heard >= silence_s:
            return master_lost(plan.mpi.master, f"nothing heard for {silence_s:g} s")


