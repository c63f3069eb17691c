"""Every host starts its own program (a TF strategy's task) when the master starts the job
(plan.coordination.EveryHostSpec): a signal reaches the program's process tree on each host, a task's failure
ends the job at once (its rank launcher reports it, or its worker says `done` with a status other than 0),
and where the job ends with every program the master waits for each worker's `done`."""
from __future__ import annotations

from typing import Optional, Sequence

from ..plan.coordination import EveryHostSpec, JobEnd
from ..proc.supervise import signal_tree
from .policy import AfterProgram, MasterSide, TaskNews, WorkerSide

__all__ = ["EveryHostMaster", "EveryHostWorker"]


class EveryHostMaster(MasterSide):
    """Each host its own program (see the module's docstring): the master's side."""

    def __init__(self, spec: EveryHostSpec) -> None:
        self.spec = spec

    def signal_here(self, pid: int, signum: int, grace_s: float, spared: Sequence[int]) -> Optional[str]:
        signal_tree(pid, signum, spared)
        return None

    def tells_workers(self, aborted: bool) -> bool:
        """Not an abort's SIGTERM: the workers had `abort`, with its shorter grace."""
        return not aborted

    def task_failure(self, news: TaskNews) -> Optional[str]:
        if news.final_report:
            return "a task of the job failed"
        if news.failed_program:
            host, status = news.failed_program
            return f"the program on host {host} ended with status {status}"
        return None

    def after_program(self, exit_code: int, aborted: bool) -> AfterProgram:
        """A failed program here ends the job; the job waits for the workers' programs where it ends with
        every program (or is being ended early)."""
        abort = "the master's program failed" if exit_code != 0 else None
        return AfterProgram(abort, self.spec.end is JobEnd.EVERY_PROGRAM or aborted or abort is not None)


class EveryHostWorker(WorkerSide):
    """Each host its own program: a worker's side, which runs its own each attempt."""

    def __init__(self, spec: EveryHostSpec) -> None:
        self.spec = spec

    def runs_program(self) -> bool:
        return True
