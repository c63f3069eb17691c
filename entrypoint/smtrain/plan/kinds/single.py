"""A program on its own: one host, or a host outside the distribution's hosts (sagemaker-training's
Process runner). No control channel: `run.single` watches the program's progress file. No
hyperparameter asks for it: a host runs it where the kind asked for does not run."""
from __future__ import annotations

from ...config.model import TrainingConfig
from ..kind import HostPart, Kind, KindInputs

__all__ = ["SINGLE", "Single"]


class Single(Kind):
    """The program as the user's entry point runs it, reading each Pipe channel directly."""

    name = "single"
    offer = "single-host programs"

    def runs_on(self, config: TrainingConfig, groups: tuple[str, ...], hosts: tuple[str, ...]) -> bool:
        return True

    def plan(self, given: KindInputs) -> HostPart:
        pipes = given.pipes()
        return HostPart(given.launch.argv, given.base_env(pipes), pipes, 1)


SINGLE = Single()
