"""The single role: this host runs its program on its own (one host, no MPI, no TF strategy across
hosts), with the stall watchdog reading the program's progress file, and restarts it in place after a
transient failure where the plan allows (run.attempts, run.restart_rule)."""
from __future__ import annotations

import shlex
import threading
import time
from typing import Optional

from ..common.console import log
from ..config.defaults import STACK_DUMP_WAIT_S
from ..errors import FailureCause
from ..proc.rank_progress import ProgressFile, dump_stacks
from ..proc.supervise import supervise
from ..rank.launcher import with_startup_hook
from .attempts import run_attempts
from .job import HostJob
from .outcome import SUCCESS, JobOutcome, describe_program_failure
from .restart_rule import Attempt
from .stall import Stall, StallWatch
from .watchdog import Watchdog

__all__ = ["run_single"]


def run_single(job: HostJob) -> JobOutcome:
    """A program on its own on this host, under the stall watchdog, restarted in place where the plan
    allows (run.attempts); its outcome."""
    plan = job.plan
    return run_attempts(lambda number: _attempt(job, number), lambda number, failed: _restart(job),
                        plan.restarts.max_restarts, job.waker)


def _attempt(job: HostJob, number: int) -> tuple[JobOutcome, Attempt]:
    """One run of the program (number 0, then one more for each restart) and how it ended."""
    plan = job.plan
    log(f"host {plan.host}: starting {shlex.join(plan.argv)}")
    env = with_startup_hook(plan.child_env(job.inherited_env))
    progress = ProgressFile()
    progress.export(env)
    dog: Optional[Watchdog] = None
    started, started_wall = time.monotonic(), time.time()
    try:
        def start_after_program() -> list[int]:
            nonlocal dog
            if plan.stall_timeout_s > 0:
                dog = _watch_program(job, progress)
            if number == 0:
                job.start_helpers()
            return job.spared_pids

        def why_end() -> Optional[str]:
            return "the program stalled" if dog is not None and dog.stall else None

        result = supervise(plan.argv, env, plan.cwd, plan.grace_period_s, job.waker,
                           on_started=start_after_program, on_wake=why_end)
        counts = progress.read()
    finally:
        if dog is not None:
            dog.stop()
        progress.remove()
    if dog is not None and dog.stall is not None:
        outcome = JobOutcome.of_cause(FailureCause.STALLED, dog.stall.describe(), host=plan.host)
    elif result.exit_code == 0:
        outcome = SUCCESS
    else:
        outcome = describe_program_failure(result, str(plan.program.program_path))
    progressed = bool(counts.steps or counts.beats) or (plan.restarts.max_restarts > 0
                                                        and job.wrote_progress_since(started_wall))
    return outcome, Attempt(outcome, progressed, counts.steps, time.monotonic() - started)


def _restart(job: HostJob) -> Optional[str]:
    """Before a restart of a program on its own: its Pipe channels start again from FIFO 0 (or why not)."""
    return job.restart_pipes()


def _watch_program(job: HostJob, progress: ProgressFile) -> Watchdog:
    """The stall watchdog for a program on its own (no MPI): it reads the program's progress file."""
    plan = job.plan

    def poll(dog: Watchdog) -> None:
        dog.observe(plan.host, 0, progress.read())

    def stalled(stall: Stall) -> None:
        log(f"Stalled: {stall.describe()}; SIGABRT to the program, whose faulthandler logs its stack")
        dump_stacks(spare=job.spared_pids)
        threading.Timer(STACK_DUMP_WAIT_S, job.waker.post).start()

    watch = StallWatch(plan.stall_timeout_s, time.monotonic())
    watch.expect(plan.host, 0)
    return Watchdog(watch, stalled, poll).start()
