"""The master host of an MPI job: waits for the workers, runs mpirun, tells the workers how the job
goes (smtrain.run.control), and ends with the job's outcome."""
from __future__ import annotations

import os
import shlex
import signal
import threading
import time
from typing import Callable, Optional

from ..common import linux
from ..common.console import log
from ..config.defaults import STACK_DUMP_WAIT_S
from ..errors import ExitCode, FailureKind, PeersUnreachable, StartupFailed
from ..progress import Counts
from ..rank.report import RankFailure, is_consequence
from ..plan.launch import LaunchPlan
from .control import ControlServer, MessageType
from .helpers import HelperGroup
from .outcome import FileState, describe_program_failure, failure_text, oom_kill_count
from .single import finish, prepare, program_failure, start_helpers
from .stall import Stall, StallWatch
from .supervise import ProcessResult, SignalWaker, supervise
from .watchdog import Watchdog

__all__ = ["await_workers", "open_control", "report_outcome", "run_master", "signal_ranks",
           "stall_handler"]

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


def report_outcome(report: RankFailure, where: str) -> tuple[int, str]:
    """The job's status and reason when `report`'s process is to blame; `where` names it."""
    ranks = ProcessResult(
        # an early report only (its launcher killed by mpirun's abort): an uncaught exception, status 1
        exit_code=report.exit_code or 1,
        term_signal=report.term_signal,
        shutdown_signal=report.shutdown_signal,
        killed_after_grace=report.killed_after_grace,
        stderr_tail=report.stderr_tail.encode(),
    )
    failure = describe_program_failure(ranks, where, oom_killed=False)
    return failure.status, failure_text(failure.kind, failure.what, failure.stderr_tail)


def _job_outcome(result: ProcessResult, server: ControlServer, program: str, oom_before: object,
                 stall: Optional[Stall]) -> tuple[int, str]:
    """The job's status and reason: a stall the watchdog found, else the first failing rank's, else a
    lost host, else mpirun's. A lost host wins over ranks that failed only because the job was ended for it."""
    if stall is not None:
        return int(ExitCode.STALLED), failure_text(FailureKind.STALLED, stall.describe())
    if result.exit_code == 0:
        return 0, ""
    report = server.first_report()
    lost = server.lost_hosts()
    if report is not None and not (lost and is_consequence(report)):
        return report_outcome(report, f"{program} (rank {report.rank}, local rank {report.local_rank}, on host {report.host})")
    if lost:
        what = f"lost worker host {lost[0]} during the job; mpirun exited with status {result.exit_code}"
        return result.exit_code, failure_text(FailureKind.HOST_LOST, what, result.stderr_tail)
    return program_failure(result, f"mpirun ({program})", oom_before)


def open_control(bind: str, port: int, heartbeat_timeout_s: float, token: str, waker: SignalWaker,
                 dogs: list[Watchdog]) -> ControlServer:
    """The master's control server, feeding what the ranks report to the stall watchdog in `dogs`
    (once it runs); StartupFailed naming the port when it is taken."""
    def on_progress(host: str, rank: int, counts: Counts) -> None:
        for dog in dogs:
            dog.observe(host, rank, counts)

    def on_waiting(waits: dict[int, float], check_s: float) -> None:
        for dog in dogs:
            dog.waited_for(waits, check_s)

    try:
        return ControlServer(bind, port, token, log, heartbeat_timeout_s, on_lost=waker.post,
                             on_progress=on_progress, on_waiting=on_waiting, on_news=waker.post)
    except OSError as e:
        raise StartupFailed(
            f"cannot listen on the control port {bind}:{port}: {e.strerror} (set SM_CONTROL_PORT to a free port)"
        ) from None


def await_workers(server: ControlServer, master: str, workers: tuple[str, ...], port: int, wait_s: float) -> None:
    """Wait for every worker's hello; PeersUnreachable (told to those that came) when one does not."""
    if not workers:
        return
    log(f"waiting up to {wait_s:g} s for workers {', '.join(workers)}")
    missing = server.wait_for_workers(list(workers), time.monotonic() + wait_s)
    if missing:
        error = PeersUnreachable(
            f"workers {', '.join(missing)} did not report within {wait_s:g} s (their train must reach {master}:{port})"
        )
        server.end(int(error.exit_code), failure_text(error.kind, str(error)))
        raise error


def stall_handler(server: ControlServer, waker: SignalWaker) -> Callable[[Stall], None]:
    """What the stall watchdog does: every rank dumps its stack; then the job ends (on_wake)."""
    def stalled(stall: Stall) -> None:
        log(f"Stalled: {stall.describe()}; every rank gets SIGABRT to log its Python stack")
        server.tell_ranks(MessageType.STALL)
        threading.Timer(STACK_DUMP_WAIT_S, waker.post).start()

    return stalled


def _expected_ranks(plan: LaunchPlan, watch: StallWatch) -> StallWatch:
    """Every rank of the job, as mpirun places them (--map-by slot: host after host)."""
    assert plan.mpi is not None
    layout = plan.mpi.layout
    for rank in range(layout.num_processes):
        watch.expect(layout.hosts[rank // layout.processes_per_host], rank)
    return watch


def run_master(plan: LaunchPlan, inherited_env: dict[str, str], python: str, waker: SignalWaker, token: str) -> int:
    assert plan.mpi is not None
    mpi = plan.mpi
    failure_at_start = FileState.of(plan.failure_file)
    prepare(plan, python)
    with HelperGroup() as helpers:
        start_helpers(plan, helpers)
        dogs: list[Watchdog] = []  # the stall watchdog, once the ranks start
        server = open_control(mpi.control_bind, mpi.control_port, mpi.heartbeat_timeout_s, token, waker, dogs)
        try:
            server.start_heartbeat()  # from the start: a worker that is in early must not think us lost
            await_workers(server, mpi.master, mpi.workers, mpi.control_port, mpi.peer_wait_s)
            server.broadcast(MessageType.START)

            def forward(mpirun_pid: int, signum: int) -> None:
                ranks = signal_ranks(mpirun_pid, signum)
                server.broadcast(MessageType.SIGNAL, signum=signum)
                log(f"forwarded {signal.Signals(signum).name} to {ranks} local rank(s) and to every worker")

            oom_before = oom_kill_count()
            log(f"host {plan.host}: starting {mpi.layout.num_processes} ranks on {', '.join(mpi.layout.hosts)}: "
                f"{shlex.join(plan.argv)}")

            def why_end() -> Optional[str]:
                lost = server.lost_hosts()
                if lost:
                    return f"lost worker host {lost[0]}"
                return "the job stalled" if dogs and dogs[0].stall else None

            if plan.stall_timeout_s > 0:
                dogs.append(Watchdog(_expected_ranks(plan, StallWatch(plan.stall_timeout_s, time.monotonic())),
                                     stall_handler(server, waker)).start())
            try:
                result = supervise(plan.argv, plan.child_env(inherited_env), plan.cwd, plan.grace_period_s, waker,
                                   forward, spare=helpers.pids, on_wake=why_end)
            finally:
                for dog in dogs:
                    dog.stop()
            status, reason = _job_outcome(result, server, str(plan.program.program_path), oom_before,
                                          dogs[0].stall if dogs else None)
            server.end(status, reason)
        finally:
            server.close()
    return finish(plan, status, reason, failure_at_start)
