"""MPI jobs: the master runs mpirun and tells the workers how the job goes; workers serve sshd,
forward signals to their ranks, and end with the job's outcome (see entrypoint.control)."""
from __future__ import annotations

import os
import select
import shlex
import signal
import socket
import time

from . import control, linux
from .console import log
from .errors import ExitCode, PeersUnreachable
from .outcome import FileState, describe_program_failure, failure_text, oom_kill_count
from .plan import LaunchPlan
from .run import finish, prepare, program_failure, start_helpers
from .sshd import start_sshd, wait_listening
from .supervise import SHUTDOWN_SIGNALS, ProcessResult, SignalWaker, end_descendants, stop_process, supervise

# The processes that start ranks: their children are the rank launchers.
RANK_PARENTS = {b"orted", b"mpirun", b"orterun", b"prted", b"prterun"}


def signal_ranks(root: int, signum: int) -> int:
    """Send `signum` to every rank launcher under `root` (children of mpirun/orted); how many got it."""
    sent = 0
    for daemon in [root, *linux.descendants_of(root)]:
        if linux.command_name(daemon) in RANK_PARENTS:
            for rank in linux.children_of(daemon):
                try:
                    os.kill(rank, signum)
                    sent += 1
                except ProcessLookupError:
                    pass
    return sent


def _job_outcome(result: ProcessResult, server: control.ControlServer, program: str, oom_before: object) -> tuple[int, str]:
    """The job's status and reason: the first failing rank's, else a lost host, else mpirun's."""
    if result.exit_code == 0:
        return 0, ""
    report = server.first_report()
    if report is not None:
        ranks = ProcessResult(
            # an early report only (its launcher killed by mpirun's abort): an uncaught exception, status 1
            exit_code=int(report.get("exit_code") or 1),
            term_signal=report.get("term_signal"),
            shutdown_signal=report.get("shutdown_signal"),
            killed_after_grace=bool(report.get("killed_after_grace")),
            stderr_tail=str(report.get("stderr_tail", "")).encode(),
        )
        where = f"{program} (rank {report.get('rank')}, local rank {report.get('local_rank')}, on host {report.get('host')})"
        kind, what = describe_program_failure(ranks, where, oom_killed=False)
        return ranks.exit_code, failure_text(kind, what, ranks.stderr_tail)
    lost = server.lost_hosts()
    if lost:
        what = f"lost worker host {lost[0]} during the job; mpirun exited with status {result.exit_code}"
        return result.exit_code, failure_text("HostLost", what, result.stderr_tail)
    return result.exit_code, program_failure(result, f"mpirun ({program})", oom_before)


def run_master(plan: LaunchPlan, inherited_env: dict[str, str], python: str, waker: SignalWaker, token: str) -> int:
    assert plan.mpi is not None
    mpi = plan.mpi
    failure_at_start = FileState.of(plan.failure_file)
    prepare(plan, python)
    helpers = start_helpers(plan)
    server = control.ControlServer(mpi.control_bind, mpi.control_port, token, log)
    server.start_heartbeat()  # from the start: a worker that is in early must not think us lost
    try:
        if mpi.workers:
            log(f"waiting up to {mpi.peer_wait_s:g} s for workers {', '.join(mpi.workers)}")
            missing = server.wait_for_workers(list(mpi.workers), time.monotonic() + mpi.peer_wait_s)
            if missing:
                error = PeersUnreachable(
                    f"workers {', '.join(missing)} did not report within {mpi.peer_wait_s:g} s "
                    f"(their train must reach {mpi.master}:{mpi.control_port})"
                )
                server.end(int(error.exit_code), failure_text(error.kind, str(error)))
                raise error
        server.broadcast({"type": "start"})

        def forward(mpirun_pid: int, signum: int) -> None:
            ranks = signal_ranks(mpirun_pid, signum)
            server.broadcast({"type": "signal", "signum": signum})
            log(f"forwarded {signal.Signals(signum).name} to {ranks} local rank(s) and to every worker")

        oom_before = oom_kill_count()
        log(f"host {plan.host}: starting {mpi.layout.num_processes} ranks on {', '.join(mpi.layout.hosts)}: "
            f"{shlex.join(plan.argv)}")
        result = supervise(plan.argv, plan.child_env(inherited_env), plan.cwd, plan.grace_period_s, waker, forward,
                           spare=helpers.pids)
        status, reason = _job_outcome(result, server, str(plan.program.program_path), oom_before)
        server.end(status, reason)
    finally:
        server.close()
        helpers.stop()
    return finish(plan, status, reason, failure_at_start)


def run_worker(plan: LaunchPlan, python: str, waker: SignalWaker) -> int:
    assert plan.mpi is not None
    mpi = plan.mpi
    failure_at_start = FileState.of(plan.failure_file)
    prepare(plan, python)
    deadline = time.monotonic() + mpi.peer_wait_s
    linux.become_subreaper()  # orted daemonizes: it must re-parent to us, not to the host's init
    helpers = start_helpers(plan)
    sshd = start_sshd(mpi.sshd_config, mpi.sshd_port)
    try:
        if not wait_listening(mpi.sshd_port, deadline, sshd):
            raise PeersUnreachable(f"sshd ({mpi.sshd_config}) did not start listening on port {mpi.sshd_port}")
        log(f"sshd is up; connecting to the master {mpi.master}:{mpi.control_port}")
        sock = control.connect(mpi.master, mpi.control_port, deadline, {"type": "hello", "host": plan.host})
        if sock is None:
            raise PeersUnreachable(
                f"master {mpi.master} was not reachable at {mpi.master}:{mpi.control_port} within {mpi.peer_wait_s:g} s"
            )
        status, reason = _follow(plan, sock, waker)
    finally:
        stop_process(sshd)
        helpers.stop()
        end_descendants(waker, 2.0)  # ranks or daemons the job left behind: nothing outlives train
    return finish(plan, status, reason, failure_at_start)


def _follow(plan: LaunchPlan, sock: socket.socket, waker: SignalWaker) -> tuple[int, str]:
    """Follow the job until the master says it ended, or is lost. Returns (status, reason)."""
    reader = control.LineReader(sock)
    me = os.getpid()
    forwarded: set[int] = set()
    grace_deadline = None
    last_heard = time.monotonic()

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
        timeout = control.HEARTBEAT_TIMEOUT_S - (time.monotonic() - last_heard)
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
                return _master_lost(plan, "its connection closed")
            last_heard = time.monotonic()
            kind = message.get("type")
            if kind == "start":
                log("the job started")
            elif kind == "signal" and isinstance(message.get("signum"), int):
                forward(message["signum"], "the master asked")
            elif kind == "end":
                status = int(message.get("status", ExitCode.INTERNAL_ERROR))
                log(f"the master reports that the job ended with status {status}")
                return status, str(message.get("reason", ""))
        elif time.monotonic() - last_heard >= control.HEARTBEAT_TIMEOUT_S:
            return _master_lost(plan, f"nothing heard for {control.HEARTBEAT_TIMEOUT_S:g} s")


def _master_lost(plan: LaunchPlan, how: str) -> tuple[int, str]:
    assert plan.mpi is not None
    what = f"lost the master {plan.mpi.master} before the job ended ({how}); stopping this host's ranks"
    return int(ExitCode.PEERS_UNREACHABLE), failure_text("MasterLost", what)
