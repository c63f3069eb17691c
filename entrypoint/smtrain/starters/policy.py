"""A way of starting the job's ranks, as the roles' loops consult it (smtrain.run): the decisions and
the effects that depend on how the ranks start, each a step that takes data and returns data - never a
role. The plan holds the starter's spec (its data: plan.coordination.EveryHostSpec, the MPI kind's
MpirunSpec); a starter's policy has two sides, one per role: `MasterSide` (`smtrain.starters.registry.
master_policy` makes it on the master) and `WorkerSide` (`worker_policy`, on a worker).

The master asks its side what each worker is given when it joins (`admission`), whether it can reach every worker
(`unreachable`), what it holds for the whole job
(`hold`, `before_attempt`, `release`), how a signal reaches the ranks (`signal_here`, `tells_workers`),
whether a task's failure ends the job (`task_failure`), what follows the master's program
(`after_program`) and whether the ranks' reports are all in (`senders_gone`); a worker asks its side what it
serves before its hello (`serve`), what it makes of its admission (`admit`), whether it runs a program of
its own each attempt (`runs_program`), how a signal reaches its ranks (`forward_here`, `kill_here`) and
what ends its part of a failed attempt (`end_attempt_here`)."""
from __future__ import annotations

from typing import NamedTuple, Optional, Sequence

from ..common.signals import SignalWaker
from ..errors import StartupFailed
from ..proc.helpers import HelperGroup
from ..proc.supervise import ProcessResult

__all__ = ["AfterProgram", "MasterSide", "TaskNews", "WorkerSide"]


class TaskNews(NamedTuple):
    """What the master has heard of the tasks of this attempt."""

    final_report: bool  # a rank's launcher reported its program's end as a failure
    failed_program: Optional[tuple[str, int]]  # the first worker whose own program ended non-zero, and its status


class AfterProgram(NamedTuple):
    """What follows the master's program's end, before the job's outcome is decided."""

    abort: Optional[str] = None  # end the job early, for this reason
    await_workers: bool = False  # wait until every worker's own program has ended


class MasterSide:
    """A starter's policy on the master. The defaults are those of a starter that needs nothing of the hosts
    before the job starts."""

    joined = "it has joined the job"  # how the master's log says a worker took its admission

    def admission(self, workers: tuple[str, ...]) -> str:
        """Made once the job starts on the master: what each worker is given when it says hello."""
        return ""

    def not_admitted(self, hosts: list[str]) -> str:
        """Why the job cannot start when `hosts` said hello but did not take their admission."""
        return f"workers {', '.join(hosts)} said hello but did not join the job (see their log and output/failure)"

    def unreachable(self, workers: Sequence[str], deadline: float) -> Optional[str]:
        """Once every worker has joined: why the ranks cannot be started on some of `workers` (naming them),
        having tried until `deadline`; None when they can."""
        return None

    def hold(self, helpers: HelperGroup) -> None:
        """Once every worker has joined: what the master holds for the whole job."""

    def before_attempt(self, waker: SignalWaker) -> None:
        """Right before the master starts its program (each attempt)."""

    def release(self) -> None:
        """Once the attempts are over: let go of what `hold` holds."""

    def signal_here(self, pid: int, signum: int, grace_s: float, spared: Sequence[int]) -> Optional[str]:
        """Pass a signal the master's `train` received on to this host's program (`pid`, its process group),
        sparing the toolkit's `spared` processes; what to log, if anything."""
        raise NotImplementedError

    def tells_workers(self, aborted: bool) -> bool:
        """Whether such a signal goes on to the workers too (`aborted`: the job is being ended early)."""
        return True

    def task_failure(self, news: TaskNews) -> Optional[str]:
        """Why a task's failure ends the job now, if it does."""
        return None

    def after_program(self, exit_code: int, aborted: bool) -> AfterProgram:
        """What follows the master's program ending with `exit_code`."""
        return AfterProgram()

    def senders_gone(self, result: ProcessResult) -> bool:
        """Whether the master's program ending as `result` says every rank's launcher has ended, so no rank
        report can come any more."""
        return False


class WorkerSide:
    """A starter's policy on a worker. The defaults are those of a starter that needs nothing of the hosts before
    the job starts and starts no ranks on a worker of its own."""

    def serve(self, helpers: HelperGroup, deadline: float) -> None:
        """Before the worker's hello: what the master needs of this host."""

    def admit(self, admission: Optional[str], master_host: str, waited_s: float) -> str:
        """Take what the master gave on hello (None: nothing came within `waited_s`); StartupFailed when this
        host cannot join the job. Returns what to log once the worker has said `joined`."""
        if admission is None:
            raise StartupFailed(f"the master {master_host} did not answer this host's hello within {waited_s:.0f} s")
        return ""

    def runs_program(self) -> bool:
        """Whether a worker runs a program of its own each attempt (and tells its status: `done`)."""
        return False

    def forward_here(self, signum: int, grace_s: float) -> Optional[int]:
        """A signal this worker's `train` received, passed on to the ranks others started here; how many got it
        (None: none are started here, the signal is not this starter's to pass on)."""
        return None

    def kill_here(self) -> None:
        """A shutdown's grace period is over: SIGKILL to the ranks others started here."""

    def end_attempt_here(self) -> None:
        """Until this host's part of a failed attempt is gone (bounded)."""
