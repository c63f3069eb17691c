"""TensorFlow strategies across hosts (MultiWorkerMirroredStrategy, parameter servers): every host
runs its task's program (and, for parameter servers, a ps) under the rank launcher, which reports
failures and progress to the master's control server.

When the job ends:
- MultiWorkerMirroredStrategy: when every host's program has ended (each worker says `done`);
- parameter servers: when the master's program (the coordinator, or TF_CONFIG's `master`) ends;
  the workers' programs still running and every parameter server are then stopped.
A task failing (its launcher's report, a worker's program ending non-zero) ends the job at once."""
from __future__ import annotations

import time
from typing import Optional

from ...common.console import log
from ...common.signals import SHUTDOWN_SIGNALS, WAKE
from ...config.defaults import ABORT_GRACE_S
from ...plan.launch import LaunchPlan, StrategyPlan
from ...proc.supervise import LEFTOVER_WAIT_S, ProcessResult, signal_tree, supervise
from ...wire.control_protocol import MessageType
from ...wire.rank_failure import RankFailure
from ..policy import MasterRole, Policy, WorkerRole
from ..tftasks import program_env, start_ps

__all__ = ["StrategyPolicy"]

# After an abort: the workers' programs get ABORT_GRACE_S, their leftovers LEFTOVER_WAIT_S, their
# launchers' reports a few seconds more.
ABORT_WAIT_S = ABORT_GRACE_S + LEFTOVER_WAIT_S + 3.0


def _strategy(plan: LaunchPlan) -> StrategyPlan:
    assert plan.strategy is not None
    return plan.strategy


class StrategyPolicy(Policy):
    """TF strategies: every host runs its task; a failed task ends the job."""
    ends_on_task_failure = True

    def __init__(self, waits_for_every_worker: bool) -> None:
        self.waits_for_every_worker = waits_for_every_worker

    def peers(self, plan: LaunchPlan) -> StrategyPlan:
        return _strategy(plan)

    def expected_ranks(self, plan: LaunchPlan) -> list[tuple[str, int]]:
        return [(task.host, task.rank) for task in _strategy(plan).tasks if not task.is_ps]

    def program_env(self, master: MasterRole) -> dict[str, str]:
        return program_env(master.job.plan, master.job.inherited_env, master.job.token)

    def start_line(self, plan: LaunchPlan) -> str:
        strategy = _strategy(plan)
        return (f"host {plan.host}: starting {strategy.program_task.describe()}; "
                f"{len(strategy.tasks)} tasks on {len(strategy.workers) + 1} hosts")

    def start_tasks(self, master: MasterRole) -> None:
        job = master.job
        start_ps(job.plan, job.helpers, job.inherited_env, job.token)

    def forward(self, master: MasterRole, pid: int, signum: int) -> None:
        signal_tree(pid, signum, master.job.helpers.pids)
        if master.aborted is None:  # an abort's SIGTERM: the workers had `abort`, with its shorter grace
            master.server.broadcast(MessageType.SIGNAL, signum=signum)

    def after_program(self, master: MasterRole, result: ProcessResult) -> None:
        if result.exit_code != 0:
            master.abort("the master's program failed")
        if self.waits_for_every_worker or master.aborted:
            _await_workers_done(master)

    def where(self, plan: LaunchPlan, report: RankFailure) -> str:
        task = _strategy(plan).task(report.rank)
        what = "the parameter server" if task is not None and task.is_ps else str(plan.program.program_path)
        return f"{what} ({task.describe() if task is not None else f'on host {report.host}'})"

    def program_name(self, plan: LaunchPlan) -> str:
        return f"{plan.program.program_path} ({_strategy(plan).program_task.describe()})"

    def work(self, worker: WorkerRole) -> None:
        """Once the master starts the job: this host's parameter server and program; `done` when it ended."""
        job, link = worker.job, worker.link
        token = link.wait_start(worker.deadline + _strategy(job.plan).peer_wait_s)  # the master waits for every worker
        if token is None:
            return
        start_ps(job.plan, job.helpers, job.inherited_env, token)
        log(f"host {job.plan.host}: starting {_strategy(job.plan).program_task.describe()}")
        result = supervise(job.plan.argv, program_env(job.plan, job.inherited_env, token), job.plan.cwd,
                           job.plan.grace_period_s, job.waker, spare=job.helpers.pids, on_wake=link.why_end)
        link.send(MessageType.DONE, status=result.exit_code)


def _all_done(master: MasterRole) -> bool:
    finished = {*master.server.done_hosts(), *master.server.lost_hosts()}
    return all(w in finished for w in _strategy(master.job.plan).workers)


def _await_workers_done(master: MasterRole) -> None:
    """Until every worker's program has ended (bounded once the job is aborted or asked to stop)."""
    waker, server = master.job.waker, master.server
    deadline: Optional[float] = None
    while not _all_done(master):
        if master.aborted and deadline is None:
            deadline = time.monotonic() + ABORT_WAIT_S
        if deadline is not None and time.monotonic() >= deadline:
            waiting = [w for w in _strategy(master.job.plan).workers if w not in server.done_hosts()]
            log(f"workers {', '.join(waiting)} did not report their program's end in time")
            return
        for signum in waker.wait(1.0 if deadline is None else max(0.0, min(1.0, deadline - time.monotonic()))):
            if signum == WAKE:
                master.why_end()
            elif signum in SHUTDOWN_SIGNALS:
                server.broadcast(MessageType.SIGNAL, signum=signum)
                deadline = min(deadline or float("inf"), time.monotonic() + master.job.plan.grace_period_s + ABORT_WAIT_S)
