"""Which role this host plays: the one place a plan's role picks the code that runs (cli calls
`run_job`); the distribution kind is the plan's business, not run's."""
from __future__ import annotations

from typing import Mapping

from ..common.signals import SignalWaker
from ..plan.launch import LaunchPlan, Role
from .job import HostJob

__all__ = ["run_job"]


def run_job(plan: LaunchPlan, inherited_env: Mapping[str, str], python: str, waker: SignalWaker, token: str) -> int:
    """Run this host's part of the job the plan describes; the exit status `train` ends with."""
    job = HostJob(plan, inherited_env, python, waker, token)
    if plan.role is Role.SINGLE:
        from .single import run_single

        return job.run(run_single)
    if plan.role is Role.MASTER:
        from .master import Master

        return job.run(lambda prepared: Master(prepared).run())
    from .worker import Worker

    return job.run(lambda prepared: Worker(prepared).run())
