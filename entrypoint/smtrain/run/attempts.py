"""Restart in place, in one home: which failed attempts are restarted (the rule, pure), the job's attempts
as the roles' loops run them (`Attempts`: another one or the job's outcome, and the outcome's account of
every attempt), and what makes the workers ready for the next attempt (`ask_workers_ready`; each host's Pipe
channels: run.job.HostJob.rewind_pipes).
The roles' loops speak of attempts only; how many restarts a job may have is the plan's
(plan.restart_policy).

The rule restarts a transient failure after the program's first progress, up to the plan's limit: a rank's
non-zero exit or death by a signal, a collective's error (the rank's traceback), a stall the watchdog ended.
Never: a failure whose cause says no restart can help it (configuration and start-up errors, a host lost,
out of memory ...: smtrain.errors.FailureCause), a program that failed before any progress, a stop `train`
was asked for (SageMaker's SIGTERM: spot, stop), a failure that repeats at the same step (the same step
count, or where no step was counted the same failure), and what the limit leaves no room for.
"""
from __future__ import annotations

import signal
import time
from typing import TYPE_CHECKING, NamedTuple, Optional, Sequence

from ..common.console import log
from ..common.signals import SHUTDOWN_SIGNALS, SignalWaker
from ..config.defaults import ABORT_GRACE_S
from ..errors import CauseKind
from ..proc.supervise import LEFTOVER_WAIT_S
from .attempt import Attempt
from .job import HostJob
from .outcome import JobOutcome

if TYPE_CHECKING:  # the master's: a single host's attempts never load it
    from .control_server import ControlServer

__all__ = ["ABORT_WAIT_S", "AttemptEnd", "Attempts", "ask_workers_ready", "describe_attempts", "why_not_restart"]

# After an abort, for the workers' own programs: ABORT_GRACE_S, their leftovers LEFTOVER_WAIT_S, their
# launchers' reports a few seconds more.
ABORT_WAIT_S = ABORT_GRACE_S + LEFTOVER_WAIT_S + 3.0


class AttemptEnd(NamedTuple):
    """How one attempt of the job ended."""

    outcome: JobOutcome
    progressed: bool  # a step or sign of life, Horovod's init returned, a checkpoint or step events written
    steps: int  # the most steps a rank reported (0: none counted)
    seconds: float  # from its start to its end

    def cause(self) -> str:
        """The failure in one line."""
        first = self.outcome.reason.splitlines()[0] if self.outcome.reason else f"status {self.outcome.status}"
        return first if len(first) <= 300 else first[:297] + "..."


def why_not_restart(failed: Sequence[AttemptEnd], max_restarts: int, stopping: Optional[str]) -> Optional[str]:
    """None when the last failed attempt is restarted; else why not. `stopping`: the shutdown signal `train`
    got, if any."""
    last = failed[-1]
    cause = last.outcome.cause
    if stopping is not None:
        return f"train was asked to stop ({stopping})"
    if isinstance(cause, CauseKind) and cause.not_restarted:  # declared with the cause (smtrain.errors)
        return cause.not_restarted
    if len(failed) >= 2:  # a repeat first: said whether or not the ranks' progress reached `train` in time
        before = failed[-2]
        if last.steps and last.steps == before.steps:
            return f"it failed at the same step again (step {last.steps})"
        if not last.steps and not before.steps and last.cause() == before.cause():
            return "it failed the same way again"
    if not last.progressed:
        return "the program failed before any progress"
    if len(failed) > max_restarts:
        return f"the limit of {max_restarts} restart(s) is reached"
    return None


def describe_attempts(failed: Sequence[AttemptEnd], why_not: str) -> str:
    """What the final outcome says of every attempt before the last, and why the last was not restarted."""
    if len(failed) == 1:
        return f"not restarted: {why_not}"
    earlier = "; ".join(f"attempt {i} failed after {a.seconds:.1f} s: {a.cause()}" for i, a in enumerate(failed[:-1], 1))
    return f"attempt {len(failed)} of the job; {earlier}; not restarted: {why_not}"


class Attempts:
    """A job's attempts, as a role's loop runs them: attempt 0, then `another` after each that ended, until
    `outcome` is the job's. `job`: the plan's restart policy, and where a program left signs of progress."""

    def __init__(self, job: HostJob) -> None:
        self._job = job
        self._max = job.plan.restarts.max_restarts
        self._failed: list[AttemptEnd] = []
        self._last: Optional[AttemptEnd] = None
        self._why_not: Optional[str] = None

    def ended(self, attempt: Attempt, outcome: JobOutcome) -> AttemptEnd:
        """How `attempt` ended with `outcome`. Where restarts are asked for and its ranks reported no progress, a
        checkpoint or step events written meanwhile count (what a TF strategy's script that counts no steps
        leaves: the step profiler's events of Keras batches)."""
        progressed = attempt.progress.progressed or (self._max > 0 and
                                                     self._job.wrote_progress_since(attempt.started_wall))
        return AttemptEnd(outcome, progressed, attempt.progress.steps, time.monotonic() - attempt.started)

    def another(self, ended: AttemptEnd) -> Optional[int]:
        """The number of the attempt to run after `ended`, where the rule restarts the job in place (said in the
        log); None where `outcome` is the job's."""
        self._last = ended
        if ended.outcome.status == 0 or self._max == 0:
            return None
        self._failed.append(ended)
        stopping = self._job.waker.shutdown_seen
        self._why_not = why_not_restart(self._failed, self._max, signal.Signals(stopping).name if stopping else None)
        if self._why_not is not None:
            return None
        log(f"restarting the job in place (restart {len(self._failed)} of {self._max}) after "
            f"{ended.seconds:.1f} s: {ended.cause()}")
        return len(self._failed)

    def not_ready(self, why_not: str) -> None:
        """The hosts could not be made ready for the next attempt: the last one's outcome is the job's."""
        self._why_not = why_not

    def outcome(self) -> JobOutcome:
        """The job's outcome: the last attempt's, saying why it was not restarted and how the earlier ones ended."""
        assert self._last is not None, "no attempt has ended"
        outcome = self._last.outcome
        if self._why_not is not None:
            return outcome._replace(what=f"{outcome.what} ({describe_attempts(self._failed, self._why_not)})")
        if self._failed and outcome.status == 0:
            log(f"the job succeeded after {len(self._failed)} restart(s) in place")
        return outcome


def ask_workers_ready(server: ControlServer, workers: Sequence[str], number: int, cause: str,
                      waker: SignalWaker) -> Optional[str]:
    """Restart `number` in place, on the master: every worker ends its part of the failed attempt and says it is
    ready (bounded; a shutdown signal ends the wait at once). None when every worker is ready, else why not."""
    from ..wire.control_protocol import MessageType  # the master's alone: a single host never loads it

    began = time.monotonic()
    server.broadcast(MessageType.RESTART, attempt=number, cause=cause)
    deadline = began + ABORT_WAIT_S
    while True:
        refused = server.refused(list(workers))
        if refused:
            return f"worker {refused[0]} could not: {refused[1]}"
        waiting = server.not_ready(list(workers))
        if not waiting:
            break
        lost = server.lost_hosts()
        if lost:
            return f"a host was lost ({lost[0]})"
        if time.monotonic() >= deadline:
            return f"workers {', '.join(waiting)} did not end their part of the attempt in time"
        for signum in waker.wait(0.2):
            if signum in SHUTDOWN_SIGNALS:
                return f"train was asked to stop ({signal.Signals(signum).name})"
    log(f"restart {number}: every worker is ready after {time.monotonic() - began:.2f} s")
    return None
