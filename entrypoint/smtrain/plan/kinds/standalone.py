"""A program on its own: one host, or a host outside the distribution's hosts (sagemaker-training's
Process runner). No control channel: `run.single` watches the program's progress file."""
from __future__ import annotations

from ..coordination import KindInputs, KindPlan

__all__ = ["plan_standalone"]


def plan_standalone(given: KindInputs) -> KindPlan:
    """The program as the user's entry point runs it, reading each Pipe channel directly."""
    pipes = given.pipes()
    return KindPlan(given.launch.argv, given.base_env(pipes), pipes, 1, 0)
