"""A way of starting the job's ranks (a rank starter), as the master and worker roles (smtrain.run)
carry it out without knowing which it is.

A distribution kind's planner gives one in the plan's `Coordination`; `train --dry-run` prints what it
will do (`to_json`), and the roles call its steps: what the master gives each worker when it joins
(`admission`) and what a worker makes of it (`admit`), what a worker serves before its hello
(`worker_begin`), how a signal reaches the ranks (`forward`), whether a task's failure ends the job
(`task_failure`), what follows the master's program (`after_program`), when the ranks' reports are
all in (`senders_gone`), and a worker's part while the job runs (`worker_part`).

The roles hand a step what it may use of them as a `MasterSide` or a `WorkerSide`. A new starter is
its module (a subclass of `RankStarter`) and the kind's planner that gives it; run/ stays as it is."""
from __future__ import annotations

import enum
from typing import Any, Optional, Protocol

from ..common.signals import SignalWaker
from ..errors import StartupFailed
from ..proc.helpers import HelperGroup
from ..proc.supervise import ProcessResult
from ..wire.control_protocol import MessageType

__all__ = ["JobEnd", "MasterSide", "RankStarter", "WorkerSide"]


class JobEnd(enum.Enum):
    """When the job has ended."""

    MASTER_PROGRAM = "master-program"  # the master's program ended (its launcher; a coordinator): the rest is stopped
    EVERY_PROGRAM = "every-program"  # every host's program ended (each worker says `done`)


class MasterSide(Protocol):
    """What a starter's master steps use of the master role (run.master.Master)."""

    aborted: Optional[str]  # why the job is being ended early, once it is

    @property
    def grace_period_s(self) -> float:
        """How long the job's processes get between SIGTERM and SIGKILL."""

    def spared_pids(self) -> list[int]:
        """This host's processes a signal to the program's tree must not reach (the toolkit's helpers)."""

    def tell_workers(self, message_type: MessageType, **fields: Any) -> None:
        """Send a message to every worker connected now."""

    def abort(self, reason: str) -> None:
        """End the job early, once: the workers are told to stop their programs now."""

    def await_workers_done(self) -> None:
        """Until every worker's program has ended (bounded once the job is aborted or asked to stop)."""

    def final_report_came(self) -> bool:
        """Whether a rank's launcher reported its program's end as a failure."""

    def failed_program(self) -> Optional[tuple[str, int]]:
        """The first worker whose own program ended non-zero, and its status."""


class WorkerSide(Protocol):
    """What a starter's worker steps use of the worker role (run.worker.Worker)."""

    @property
    def grace_period_s(self) -> float:
        """How long the job's processes get between SIGTERM and SIGKILL."""

    @property
    def waker(self) -> SignalWaker:
        """This `train`'s signals and news, as loop events."""

    def over(self) -> bool:
        """Whether the job is over for this host (the master said so, or was lost)."""

    def restart_asked(self) -> int:
        """The restart in place the master last asked for (0: none)."""

    def wait_start(self, attempt: int) -> Optional[str]:
        """The job's token once the master starts `attempt` (bounded); None when the job ended first."""

    def run_program(self, token: str, attempt: int) -> None:
        """This host's program for `attempt` (its companions with the first); `done` with its status."""

    def ready_for(self, attempt: int) -> None:
        """This host made ready for restart `attempt`; `ready` to the master (saying why not, if so)."""


class RankStarter:
    """One way of starting the job's ranks; the defaults are a starter's that needs nothing of the
    hosts before the job starts. Made by the plan, once per `train`: a step may keep what it started
    for a later one (the master's held connections, say)."""

    name = ""  # how `train --dry-run` names it
    signals = ""  # how a signal `train` gets (or the master passes on) reaches the ranks on a host
    end = JobEnd.MASTER_PROGRAM
    ends_on_task_failure = False  # a task's failure ends the job at once (else the starter's own launcher does)
    workers_run_programs = False  # each worker runs a program of its own and tells its status (`done`)
    joined = "it has joined the job"  # how the master's log says a worker took its admission

    def to_json(self) -> dict[str, Any]:
        """What it will do, as `train --dry-run` shows it."""
        return {"name": self.name, "signals": self.signals, "end": self.end.value,
                "ends_on_task_failure": self.ends_on_task_failure, "workers_run_programs": self.workers_run_programs}

    # -- the master's steps ------------------------------------------------------------------------
    def admission(self, workers: tuple[str, ...]) -> str:
        """Made once the job starts on the master: what each worker is given when it says hello."""
        return ""

    def not_admitted(self, hosts: list[str]) -> str:
        """Why the job cannot start when `hosts` said hello but did not take their admission."""
        return f"workers {', '.join(hosts)} said hello but did not join the job (see their log and output/failure)"

    def master_begin(self, helpers: HelperGroup) -> None:
        """Once every worker has joined: what the master holds for the whole job."""

    def before_attempt(self, waker: SignalWaker) -> None:
        """Right before the master starts its program (each attempt)."""

    def master_end(self) -> None:
        """Once the attempts are over: let go of what `master_begin` holds."""

    def forward(self, master: MasterSide, pid: int, signum: int) -> None:
        """Pass a signal the master's `train` received on to the job's processes: this host's program
        (`pid`, its process group) and the workers."""
        raise NotImplementedError

    def task_failure(self, master: MasterSide) -> Optional[str]:
        """Why a task's failure ends the job now, if it does (called when the master's loop is woken)."""
        return None

    def after_program(self, master: MasterSide, result: ProcessResult) -> None:
        """Once the master's program has ended, before the job's outcome is decided."""

    def senders_gone(self, result: ProcessResult) -> bool:
        """Whether the master's program ending as `result` says every rank's launcher has ended, so
        no rank report can come any more."""
        return False

    # -- the worker's steps ------------------------------------------------------------------------
    def worker_begin(self, helpers: HelperGroup, deadline: float) -> None:
        """Before the worker's hello: what the master needs of this host."""

    def admit(self, admission: Optional[str], master: str, waited_s: float) -> str:
        """Take what the master gave on hello (None: nothing came within `waited_s`); StartupFailed
        when this host cannot join the job. Returns what to log once the worker has said `joined` (a log
        line may block while the log stream backs up: the master must not wait for it)."""
        if admission is None:
            raise StartupFailed(f"the master {master} did not answer this host's hello within {waited_s:.0f} s")
        return ""

    def worker_part(self, worker: WorkerSide) -> None:
        """This worker's part while the job runs, until it is over for this host."""
        raise NotImplementedError
