"""The master host of a TensorFlow strategy job (MultiWorkerMirroredStrategy, parameter servers):
waits for the workers, starts the job, runs its own part, and decides the job's outcome.

When the job ends:
- MultiWorkerMirroredStrategy: when every host's program has ended (each worker says `done`);
- parameter servers: when the master's program (the coordinator, or TF_CONFIG's `master`) ends;
  the workers' programs still running and every parameter server are then stopped.
Whatever happens first of a task failing (its launcher's report), a host lost (heartbeats), a stall
(the watchdog) fails the job at once: every host's program gets SIGTERM (`abort`), SIGKILL
ABORT_GRACE_S later, and the job's status and reason name the task to blame.
"""
from __future__ import annotations

import time
from typing import Optional

from ..common.console import log
from ..common.signals import SHUTDOWN_SIGNALS, WAKE
from ..config.defaults import ABORT_GRACE_S
from ..config.model import Strategy
from ..errors import ExitCode, FailureKind
from ..plan.launch import LaunchPlan, StrategyPlan
from ..rank.report import is_consequence
from .control import ControlServer, MessageType
from .helpers import HelperGroup
from .master import await_workers, open_control, report_outcome, stall_handler
from .outcome import FileState, failure_text, oom_kill_count
from .single import finish, prepare, program_failure, start_helpers
from .stall import Stall, StallWatch
from .supervise import LEFTOVER_WAIT_S, ProcessResult, SignalWaker, signal_tree, supervise
from .tftasks import program_env, start_ps
from .watchdog import Watchdog

__all__ = ["run_tf_master"]

# After an abort: the workers' programs get ABORT_GRACE_S, their leftovers LEFTOVER_WAIT_S, their
# launchers' reports a few seconds more.
ABORT_WAIT_S = ABORT_GRACE_S + LEFTOVER_WAIT_S + 3.0


class JobWatch:
    """The master's view of whether the job must end now, and telling the workers once it must."""

    def __init__(self, server: ControlServer, strategy: StrategyPlan, dogs: list[Watchdog]) -> None:
        self.server, self.strategy, self.dogs = server, strategy, dogs
        self.aborted: Optional[str] = None

    def why_end(self) -> Optional[str]:
        reason = self._reason()
        if reason is not None and self.aborted is None:
            self.aborted = reason
            self.server.broadcast(MessageType.ABORT, reason=reason)
        return reason

    def _reason(self) -> Optional[str]:
        lost = self.server.lost_hosts()
        if lost:
            return f"lost worker host {lost[0]}"
        if self.dogs and self.dogs[0].stall is not None:
            return "the job stalled"
        if self.server.has_reports(final=True):
            return "a task of the job failed"
        failed = self.server.failed_done()
        if failed:
            return f"the program on host {failed[0]} ended with status {failed[1]}"
        return None

    def all_done(self) -> bool:
        finished = {*self.server.done_hosts(), *self.server.lost_hosts()}
        return all(w in finished for w in self.strategy.workers)


def _await_workers_done(job: JobWatch, waker: SignalWaker, grace_period_s: float) -> None:
    """Until every worker's program has ended (bounded once the job is aborted or asked to stop)."""
    deadline: Optional[float] = None
    while not job.all_done():
        if job.aborted and deadline is None:
            deadline = time.monotonic() + ABORT_WAIT_S
        if deadline is not None and time.monotonic() >= deadline:
            log(f"workers {', '.join(w for w in job.strategy.workers if w not in job.server.done_hosts())} "
                "did not report their program's end in time")
            return
        for signum in waker.wait(1.0 if deadline is None else max(0.0, min(1.0, deadline - time.monotonic()))):
            if signum == WAKE:
                job.why_end()
            elif signum in SHUTDOWN_SIGNALS:
                job.server.broadcast(MessageType.SIGNAL, signum=signum)
                deadline = min(deadline or float("inf"), time.monotonic() + grace_period_s + ABORT_WAIT_S)


def _outcome(plan: LaunchPlan, result: ProcessResult, server: ControlServer, stall: Optional[Stall],
             oom_before: object) -> tuple[int, str]:
    """A stall, else the task to blame (the root cause of the launchers' reports), else a lost host,
    else a worker's program's status, else the master's program's."""
    strategy = plan.strategy
    assert strategy is not None
    program = str(plan.program.program_path)
    if stall is not None:
        return int(ExitCode.STALLED), failure_text(FailureKind.STALLED, stall.describe())
    report = server.first_report(max_wait_s=2.0 if server.has_reports() or result.exit_code else 0.0)
    lost = server.lost_hosts()
    if report is not None and not (lost and is_consequence(report)):
        task = strategy.task(report.rank)
        what = "the parameter server" if task is not None and task.is_ps else program
        where = task.describe() if task is not None else f"on host {report.host}"
        return report_outcome(report, f"{what} ({where})")
    if lost:
        return int(ExitCode.PEERS_UNREACHABLE), failure_text(FailureKind.HOST_LOST, f"lost worker host {lost[0]} during the job")
    failed = server.failed_done()
    if failed:
        host, status = failed
        return status, failure_text(FailureKind.PROGRAM_ERROR, f"{program} on host {host} ended with status {status}")
    if result.exit_code != 0:
        return program_failure(result, f"{program} ({strategy.program_task.describe()})", oom_before)
    return 0, ""


def run_tf_master(plan: LaunchPlan, inherited_env: dict[str, str], python: str, waker: SignalWaker, token: str) -> int:
    strategy = plan.strategy
    assert strategy is not None
    failure_at_start = FileState.of(plan.failure_file)
    prepare(plan, python)
    with HelperGroup() as helpers:
        start_helpers(plan, helpers)
        dogs: list[Watchdog] = []
        server = open_control(strategy.control_bind, strategy.control_port, strategy.heartbeat_timeout_s, token, waker,
                              dogs)
        try:
            server.start_heartbeat()
            await_workers(server, strategy.master, strategy.workers, strategy.control_port, strategy.peer_wait_s)
            server.broadcast(MessageType.START, token=token)
            start_ps(plan, helpers, inherited_env, token)
            job = JobWatch(server, strategy, dogs)
            if plan.stall_timeout_s > 0:
                watch = StallWatch(plan.stall_timeout_s, time.monotonic())
                for task in strategy.tasks:
                    if not task.is_ps:
                        watch.expect(task.host, task.rank)
                dogs.append(Watchdog(watch, stall_handler(server, waker)).start())

            def forward(pid: int, signum: int) -> None:
                signal_tree(pid, signum, helpers.pids)
                if job.aborted is None:  # an abort's SIGTERM: the workers had `abort`, with its shorter grace
                    server.broadcast(MessageType.SIGNAL, signum=signum)

            oom_before = oom_kill_count()
            log(f"host {plan.host}: starting {strategy.program_task.describe()}; "
                f"{len(strategy.tasks)} tasks on {len(strategy.workers) + 1} hosts")
            try:
                result = supervise(plan.argv, program_env(plan, inherited_env, token), plan.cwd, plan.grace_period_s,
                                   waker, forward, spare=helpers.pids, on_wake=job.why_end)
                if result.exit_code != 0 and job.aborted is None:
                    job.aborted = "the master's program failed"
                    server.broadcast(MessageType.ABORT, reason=job.aborted)
                if strategy.strategy is Strategy.MULTI_WORKER_MIRRORED or job.aborted:
                    _await_workers_done(job, waker, plan.grace_period_s)
            finally:
                for dog in dogs:
                    dog.stop()
            status, reason = _outcome(plan, result, server, dogs[0].stall if dogs else None, oom_before)
            server.end(status, reason)
        finally:
            server.close()
    return finish(plan, status, reason, failure_at_start)
