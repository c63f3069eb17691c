"""A job's attempts, for every role that runs them (the master of a job across hosts, a program on its
own): run one, and after a failure ask run.restart_rule whether to restart in place; the log lines
and the final outcome's account of every attempt are the same whoever runs them."""
from __future__ import annotations

import signal
from typing import Callable, Optional

from ..common.console import log
from ..common.signals import SignalWaker
from .outcome import JobOutcome
from .restart_rule import Attempt, describe_attempts, why_not_restart

__all__ = ["run_attempts"]


def run_attempts(attempt: Callable[[int], tuple[JobOutcome, Attempt]], restart: Callable[[int, Attempt], Optional[str]],
                 max_restarts: int, waker: SignalWaker) -> JobOutcome:
    """Attempt 0, then one more for each restart in place the rule allows: `attempt(n)` runs attempt n;
    `restart(n, failed)` makes ready for restart n (None, or why it could not). The job's outcome."""
    attempts: list[Attempt] = []
    while True:
        outcome, last = attempt(len(attempts))
        if outcome.status == 0 or max_restarts == 0:
            break
        attempts.append(last)
        stopping = waker.shutdown_seen
        why_not = why_not_restart(attempts, max_restarts, signal.Signals(stopping).name if stopping else None)
        if why_not is None:
            log(f"restarting the job in place (restart {len(attempts)} of {max_restarts}) after "
                f"{last.seconds:.1f} s: {last.cause()}")
            why_not = restart(len(attempts), last)
        if why_not is not None:
            return outcome._replace(what=f"{outcome.what} ({describe_attempts(attempts, why_not)})")
    if attempts and outcome.status == 0:
        log(f"the job succeeded after {len(attempts)} restart(s) in place")
    return outcome
