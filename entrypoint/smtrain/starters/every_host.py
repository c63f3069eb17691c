"""Every host starts its own program (a TF strategy's task) when the master starts the job: a signal
reaches the program's process tree on each host, a task's failure ends the job at once (its rank
launcher reports it, or its worker says `done` with a status other than 0), and where the job ends
with every program the master waits for each worker's `done`."""
from __future__ import annotations

from typing import Optional

from ..proc.supervise import ProcessResult, signal_tree
from ..wire.control_protocol import MessageType
from .base import JobEnd, MasterSide, RankStarter, WorkerSide

__all__ = ["EveryHost"]


class EveryHost(RankStarter):
    """Each host its own program (see the module's docstring); `end` says when the job has ended."""

    name = "every-host"
    signals = "program-tree"  # to this host's program and what it started
    ends_on_task_failure = True
    workers_run_programs = True

    def __init__(self, end: JobEnd) -> None:
        self.end = end

    def forward(self, master: MasterSide, pid: int, signum: int) -> None:
        signal_tree(pid, signum, master.spared_pids())
        if master.aborted is None:  # an abort's SIGTERM: the workers had `abort`, with its shorter grace
            master.tell_workers(MessageType.SIGNAL, signum=signum)

    def task_failure(self, master: MasterSide) -> Optional[str]:
        if master.final_report_came():
            return "a task of the job failed"
        failed = master.failed_program()
        if failed:
            return f"the program on host {failed[0]} ended with status {failed[1]}"
        return None

    def after_program(self, master: MasterSide, result: ProcessResult) -> None:
        """A failed program here ends the job; the job waits for the workers' programs where it ends
        with every program (or was aborted)."""
        if result.exit_code != 0:
            master.abort("the master's program failed")
        if self.end is JobEnd.EVERY_PROGRAM or master.aborted:
            master.await_workers_done()

    def worker_part(self, worker: WorkerSide) -> None:
        """Once the master starts the job: this host's program; again for each restart it asks for (the
        program has ended by then: ready at once)."""
        attempt = 0
        while True:
            token = worker.wait_start(attempt)
            if token is None:
                return
            worker.run_program(token, attempt)
            while not worker.over() and worker.restart_asked() <= attempt:
                worker.waker.wait(1.0)
            if worker.over():
                return
            attempt = worker.restart_asked()
            worker.ready_for(attempt)
