"""Restart in place, in one home: which failed attempts are restarted (the rule, pure), the job's attempts one
after the other (`Attempts.run`, the one loop the single and master roles run: another attempt or the job's
outcome, and the outcome's account of every attempt), and what makes the workers ready for the next attempt
(`ask_workers_ready`; each host's Pipe channels: run.pipe_rewind). How many restarts a job may have is the
plan's (plan.restart_policy).

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
from typing import TYPE_CHECKING, Callable, NamedTuple, Optional, Sequence

from ..common.console import log
from ..common.signals import SHUTDOWN_SIGNALS, SignalWaker
from ..config.defaults import ABORT_GRACE_S
from ..errors import CauseKind
from ..plan.launch import LaunchPlan
from ..proc.supervise import LEFTOVER_WAIT_S
from .attempt import Attempt
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
    """A job's attempts, as a role runs them (`run`). `plan`: how many restarts it may have; `waker`: whether `train`
    was asked to stop; `wrote_progress(since)`: whether the program wrote a checkpoint or step events since `since`
    (wall clock) - where restarts are asked for and the ranks reported no progress, that counts (what a TF
    strategy's script that counts no steps leaves: the step profiler's events of Keras batches)."""

    def __init__(self, plan: LaunchPlan, waker: SignalWaker, wrote_progress: Callable[[float], bool]) -> None:
        self._max, self._waker, self._wrote_progress = plan.restarts.max_restarts, waker, wrote_progress
        self._failed: list[AttemptEnd] = []
        self._why_not: Optional[str] = None

    def run(self, attempt: Callable[[int], tuple[Attempt, JobOutcome]],
            ready: Callable[[int, str], Optional[str]]) -> JobOutcome:
        """Attempt 0 (`attempt(number)`: one run of the job, and its outcome), then each the rule restarts once
        `ready(number, cause)` made the hosts ready for it (why not, where it could not); the job's outcome."""
        number: Optional[int] = 0
        while number is not None:
            ended = self._ended(*attempt(number))
            number = self._another(ended)
            why_not = ready(number, ended.cause()) if number is not None else None
            if why_not is not None:
                self._why_not, number = why_not, None  # the hosts could not be made ready: the last outcome is the job's
        return self._outcome(ended)

    def _ended(self, attempt: Attempt, outcome: JobOutcome) -> AttemptEnd:
        """How `attempt` ended with `outcome` (see the class's docstring for what counts as progress)."""
        progressed = attempt.progress.progressed or (self._max > 0 and self._wrote_progress(attempt.started_wall))
        return AttemptEnd(outcome, progressed, attempt.progress.steps, time.monotonic() - attempt.started)

    def _another(self, ended: AttemptEnd) -> Optional[int]:
        """The number of the attempt to run after `ended`, where the rule restarts the job in place (said in the
        log); None where its outcome is the job's."""
        if ended.outcome.status == 0 or self._max == 0:
            return None
        self._failed.append(ended)
        stopping = self._waker.shutdown_seen
        self._why_not = why_not_restart(self._failed, self._max, signal.Signals(stopping).name if stopping else None)
        if self._why_not is not None:
            return None
        log(f"restarting the job in place (restart {len(self._failed)} of {self._max}) after "
            f"{ended.seconds:.1f} s: {ended.cause()}")
        return len(self._failed)

    def _outcome(self, last: AttemptEnd) -> JobOutcome:
        """The job's outcome: the `last` attempt's, saying why it was not restarted and how the earlier ones ended."""
        outcome = last.outcome
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
