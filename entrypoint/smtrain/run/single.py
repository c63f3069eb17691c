"""The single role: this host runs its program on its own (one host, no MPI, no TF strategy across
hosts), with the stall watchdog reading the program's progress file; one loop runs its attempts, another
after a transient failure where the plan allows (run.attempts)."""
from __future__ import annotations

import shlex
import threading
from typing import Optional

from ..common.console import log
from ..config.defaults import STACK_DUMP_WAIT_S
from ..config.settings import GRACE_PERIOD, STALL_TIMEOUT
from ..errors import FailureCause
from ..proc.rank_progress import ProgressFile, dump_stacks
from ..proc.supervise import supervise
from ..rank.startup_hook import with_startup_hook
from .attempt import Attempt
from .attempts import Attempts
from .job import HostJob
from .outcome import SUCCESS, JobOutcome, describe_program_failure
from .stall import Stall

__all__ = ["run_single"]


def run_single(job: HostJob) -> JobOutcome:
    """A program on its own on this host, under the stall watchdog, its attempts one after the other; its outcome."""
    attempts = Attempts(job.plan, job.waker, job.wrote_progress_since)
    return attempts.run(lambda number: _attempt(job, Attempt(number)), lambda number, cause: job.rewind_pipes())


def _attempt(job: HostJob, attempt: Attempt) -> tuple[Attempt, JobOutcome]:
    """One run of the program, and its outcome."""
    plan = job.plan
    log(f"host {plan.host}: starting {shlex.join(plan.argv)}")
    env = with_startup_hook(plan.child_env(job.inherited_env))
    progress = ProgressFile()
    progress.export(env)
    try:
        def stalled(stall: Stall) -> None:
            log(f"Stalled: {stall.describe()}; SIGABRT to the program, whose faulthandler logs its stack")
            dump_stacks(spare=job.spared_pids)
            threading.Timer(STACK_DUMP_WAIT_S, job.waker.post).start()

        def start_after_program() -> list[int]:
            if plan.settings[STALL_TIMEOUT] > 0:  # the stall watchdog reads the program's progress file
                attempt.watch(plan.settings[STALL_TIMEOUT], ((plan.host, 0),), stalled,
                              poll=lambda: attempt.observe(plan.host, 0, progress.read()))
            job.start_helpers()
            return job.spared_pids

        def why_end() -> Optional[str]:
            return "the program stalled" if attempt.stall is not None else None

        result = supervise(plan.argv, env, plan.cwd, plan.settings[GRACE_PERIOD], job.waker,
                           on_started=start_after_program, on_wake=why_end)
        attempt.observe(plan.host, 0, progress.read())
    finally:
        attempt.stop_watching()
        progress.remove()
    if attempt.stall is not None:
        return attempt, JobOutcome.of_cause(FailureCause.STALLED, attempt.stall.describe(), host=plan.host)
    if result.exit_code == 0:
        return attempt, SUCCESS
    return attempt, describe_program_failure(result, str(plan.program.program_path))

