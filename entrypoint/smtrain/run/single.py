"""Running a launch plan on one host: prepare, start the program and helpers, report the outcome.
The pieces every role shares (prepare, helpers, finish) live here too."""
from __future__ import annotations

import shlex
import shutil
import signal
import threading
import time
from typing import Optional

from ..common.console import log, redact
from ..config.defaults import STACK_DUMP_WAIT_S
from ..errors import ExitCode, FailureKind
from ..plan.launch import LaunchPlan
from ..plan.program import check_program
from .codesetup import fetch_code, install_requirements
from .helpers import HelperGroup
from .outcome import FileState, describe_program_failure, failure_text, oom_kill_count, report_failure, report_success
from .stall import Stall, StallWatch
from .supervise import ProcessResult, SignalWaker, parent_death_signal, supervise
from .watchdog import ProgressFile, Watchdog, dump_stacks

__all__ = ["finish", "prepare", "program_failure", "run_single", "start_helpers"]


def prepare(plan: LaunchPlan, python: str) -> None:
    """Everything before the program can start on this host: folders, code, requirements, checks."""
    for folder in plan.folders:
        folder.mkdir(parents=True, exist_ok=True)
    for stale in plan.cleared:
        shutil.rmtree(stale, ignore_errors=True)
    if plan.program.fetch_from:
        fetch_code(plan.program.fetch_from, plan.program.program_dir)
    if plan.requirements and plan.requirements.is_file():
        install_requirements(python, plan.requirements)
    check_program(plan.program)


def start_helpers(plan: LaunchPlan, helpers: HelperGroup) -> None:
    """The demultiplexers and the system monitor, as the plan says, into `helpers`."""
    for argv in plan.demux:
        log(f"starting the demultiplexer: {shlex.join(argv)}")
        helpers.start(f"demultiplexer {argv[argv.index('--channel') + 1]}", argv)
    if plan.monitor:
        # should train be killed, the monitor gets SIGTERM: it writes the last samples, then goes
        helpers.start("system monitor", plan.monitor, preexec_fn=parent_death_signal(signal.SIGTERM))


def finish(plan: LaunchPlan, status: int, reason: str, failure_at_start: FileState) -> int:
    """Report the outcome SageMaker's way and return the exit status."""
    if status == 0:
        log("the job succeeded" if plan.mpi or plan.strategy else "the program succeeded")
        report_success(plan.success_file)
        return 0
    log(reason.splitlines()[0])
    if not report_failure(plan.failure_file, reason, failure_at_start, redact):
        log(f"kept the failure file the program wrote: {plan.failure_file}")
    return status


def program_failure(result: ProcessResult, program: str, oom_before: object) -> tuple[int, str]:
    """The job's status and failure text for a program (or mpirun) that did not end with status 0."""
    oom_after = oom_kill_count()
    oom_killed = isinstance(oom_before, int) and oom_after is not None and oom_after > oom_before
    failure = describe_program_failure(result, program, oom_killed)
    return failure.status, failure_text(failure.kind, failure.what, failure.stderr_tail)


def run_single(plan: LaunchPlan, inherited_env: dict[str, str], python: str, waker: SignalWaker) -> int:
    """Run the program on this host and return the exit status `train` should end with."""
    failure_at_start = FileState.of(plan.failure_file)
    prepare(plan, python)
    oom_before = oom_kill_count()
    log(f"host {plan.host}: starting {shlex.join(plan.argv)}")
    env = plan.child_env(inherited_env)
    progress = ProgressFile()
    progress.export(env)
    dog: Optional[Watchdog] = None
    try:
        with HelperGroup() as helpers:

            def start_after_program() -> list[int]:
                nonlocal dog
                if plan.stall_timeout_s > 0:
                    dog = _watch_program(plan, progress, helpers, waker)
                start_helpers(plan, helpers)
                return helpers.pids

            def why_end() -> Optional[str]:
                return "the program stalled" if dog is not None and dog.stall else None

            result = supervise(plan.argv, env, plan.cwd, plan.grace_period_s, waker,
                               on_started=start_after_program, on_wake=why_end)
    finally:
        if dog is not None:
            dog.stop()
        progress.remove()
    if dog is not None and dog.stall is not None:
        return finish(plan, int(ExitCode.STALLED), failure_text(FailureKind.STALLED, dog.stall.describe()),
                      failure_at_start)
    if result.exit_code == 0:
        return finish(plan, 0, "", failure_at_start)
    return finish(plan, *program_failure(result, str(plan.program.program_path), oom_before), failure_at_start)


def _watch_program(plan: LaunchPlan, progress: ProgressFile, helpers: HelperGroup, waker: SignalWaker) -> Watchdog:
    """The stall watchdog for a program on its own (no MPI): it reads the program's progress file."""
    def poll(dog: Watchdog) -> None:
        dog.observe(plan.host, 0, progress.read())

    def stalled(stall: Stall) -> None:
        log(f"Stalled: {stall.describe()}; SIGABRT to the program, whose faulthandler logs its stack")
        dump_stacks(spare=helpers.pids)
        threading.Timer(STACK_DUMP_WAIT_S, waker.post).start()

    watch = StallWatch(plan.stall_timeout_s, time.monotonic())
    watch.expect(plan.host, 0)
    return Watchdog(watch, stalled, poll).start()
