"""Executing a launch plan on this host and reporting the outcome."""
from __future__ import annotations

import shlex

from .codesetup import fetch_code, install_requirements
from .console import log
from .outcome import (
    FileState,
    describe_program_failure,
    failure_text,
    oom_kill_count,
    report_failure,
    report_success,
)
from .plan import LaunchPlan
from .program import check_program
from .supervise import SignalWaker, supervise


def run_single(plan: LaunchPlan, inherited_env: dict[str, str], python: str, waker: SignalWaker) -> int:
    """Run the program on this host and return the exit status `train` should end with."""
    failure_at_start = FileState.of(plan.failure_file)
    for folder in plan.folders:
        folder.mkdir(parents=True, exist_ok=True)
    if plan.program.fetch_from:
        fetch_code(plan.program.fetch_from, plan.program.program_dir)
    if plan.requirements and plan.requirements.is_file():
        install_requirements(python, plan.requirements)
    check_program(plan.program)
    oom_before = oom_kill_count()
    log(f"host {plan.host}: starting {shlex.join(plan.argv)}")
    result = supervise(plan.argv, plan.child_env(inherited_env), plan.cwd, plan.grace_period_s, waker)
    if result.exit_code == 0:
        log("the program succeeded")
        report_success(plan.success_file)
        return 0
    oom_after = oom_kill_count()
    oom_killed = oom_before is not None and oom_after is not None and oom_after > oom_before
    kind, what = describe_program_failure(result, str(plan.program.program_path), oom_killed)
    log(f"{kind}: {what}")
    if not report_failure(plan.failure_file, failure_text(kind, what, result.stderr_tail), failure_at_start):
        log(f"kept the failure file the program wrote: {plan.failure_file}")
    return result.exit_code
