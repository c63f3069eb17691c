"""Which failed attempts of a job are restarted in place (pure): a transient failure after the
program's first progress, up to the plan's limit (plan.restart_policy).

Restarted: a rank's non-zero exit or death by a signal, a collective's error (the rank's traceback),
a stall the watchdog ended. Never: configuration and start-up errors, a program that failed before
any progress, a host lost, a stop `train` was asked for (SageMaker's SIGTERM: spot, stop), out of
memory (a restart would run out again), a failure that repeats at the same step (the same step
count, or where no step was counted the same failure), and what the limit leaves no room for.
"""
from __future__ import annotations

from typing import NamedTuple, Optional, Sequence

from ..errors import FailureCause
from ..wire.progress_file import Counts, InitPhase
from .outcome import JobOutcome

__all__ = ["Attempt", "AttemptProgress", "NEVER_RESTARTED", "describe_attempts", "why_not_restart"]

# The toolkit's failure kinds no restart can help.
NEVER_RESTARTED = {
    FailureCause.CONFIG_ERROR: "a configuration error",
    FailureCause.CODE_SETUP_FAILED: "the code could not be set up",
    FailureCause.PROGRAM_NOT_FOUND: "the program was not found",
    FailureCause.PROGRAM_NOT_EXECUTABLE: "the program cannot be executed",
    FailureCause.PEERS_UNREACHABLE: "hosts of the job could not be reached",
    FailureCause.STARTUP_FAILED: "a start-up failure",
    FailureCause.INTERNAL_ERROR: "an internal error",
    FailureCause.OUT_OF_MEMORY: "out of memory: a restart would run out again",
    FailureCause.HOST_LOST: "a host was lost",
    FailureCause.MASTER_LOST: "the master was lost",
}


class AttemptProgress:
    """What the ranks of one attempt reported of their progress (from the control server's threads)."""

    def __init__(self) -> None:
        self.steps = 0  # the most steps a rank reported
        self.progressed = False  # a step or sign of life, or Horovod's init returned

    def observe(self, host: str, rank: int, counts: Counts) -> None:
        """Takes in a rank's reported counts."""
        self.steps = max(self.steps, counts.steps)
        if counts.steps or counts.beats or counts.init is InitPhase.DONE:
            self.progressed = True


class Attempt(NamedTuple):
    """One run of the job's program and how it ended."""

    outcome: JobOutcome
    progressed: bool  # a step or sign of life, Horovod's init returned, a checkpoint or step events written
    steps: int  # the most steps a rank reported (0: none counted)
    seconds: float  # from its start to its end

    def cause(self) -> str:
        """The failure in one line."""
        first = self.outcome.reason.splitlines()[0] if self.outcome.reason else f"status {self.outcome.status}"
        return first if len(first) <= 300 else first[:297] + "..."


def why_not_restart(attempts: Sequence[Attempt], max_restarts: int, stopping: Optional[str]) -> Optional[str]:
    """None when the last attempt's failure is restarted; else why not. `stopping`: the shutdown
    signal `train` got, if any."""
    last = attempts[-1]
    cause = last.outcome.cause
    if stopping is not None:
        return f"train was asked to stop ({stopping})"
    if isinstance(cause, FailureCause) and cause in NEVER_RESTARTED:
        return NEVER_RESTARTED[cause]
    if not last.progressed:
        return "the program failed before any progress"
    if len(attempts) >= 2:
        before = attempts[-2]
        if last.steps and last.steps == before.steps:
            return f"it failed at the same step again (step {last.steps})"
        if not last.steps and not before.steps and last.cause() == before.cause():
            return "it failed the same way again"
    if len(attempts) > max_restarts:
        return f"the limit of {max_restarts} restart(s) is reached"
    return None


def describe_attempts(attempts: Sequence[Attempt], why_not: str) -> str:
    """What the final outcome says of every attempt before the last, and why the last was not restarted."""
    if len(attempts) == 1:
        return f"not restarted: {why_not}"
    earlier = "; ".join(f"attempt {i} failed after {a.seconds:.1f} s: {a.cause()}" for i, a in enumerate(attempts[:-1], 1))
    return f"attempt {len(attempts)} of the job; {earlier}; not restarted: {why_not}"
