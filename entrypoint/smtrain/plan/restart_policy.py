"""Whether and how often the job is restarted in place after a transient failure
(`sagemaker_max_restarts`): decided once, shown by `train --dry-run`; which failures count is
run.restart_rule's judgement.

A job is not restarted in place, whatever the setting, where a restart could not resume it exactly:
- a program on its own (no control channel: restarts serve jobs across ranks and hosts);
- processes beside the program that hold the job's state (a parameter server): a restart would lose it;
- Pipe-mode channels: the records already read cannot be read again from the checkpoint's positions.
"""
from __future__ import annotations

from typing import Any, NamedTuple, Optional

from ..wire.pipe_assignment import PipeAssignment
from .coordination import Coordination

__all__ = ["RestartPolicy", "restart_policy"]


class RestartPolicy(NamedTuple):
    """How many in-job restarts this job may have, and why none where the job cannot have them."""

    asked: int  # sagemaker_max_restarts / SMTRAIN_MAX_RESTARTS
    refused: Optional[str]  # why this job is not restarted in place although restarts were asked for

    @property
    def max_restarts(self) -> int:
        """The restarts the job may have."""
        return 0 if self.refused else self.asked

    def to_json(self) -> dict[str, Any]:
        return {"max_restarts": self.max_restarts, "asked": self.asked, "refused": self.refused}


def restart_policy(asked: int, coordination: Optional[Coordination],
                   pipes: tuple[PipeAssignment, ...]) -> RestartPolicy:
    """The policy for a job that asked for `asked` restarts (see the module's docstring)."""
    if asked == 0:
        return RestartPolicy(0, None)
    if coordination is None:
        return RestartPolicy(asked, "a program on its own is not restarted in place (restarts serve MPI and "
                                    "TF strategy jobs)")
    if coordination.companions:
        return RestartPolicy(asked, f"the job's {coordination.companions[0].name}s hold its state, which a restart "
                                    "would lose")
    if pipes:
        channels = ", ".join(sorted({p.channel for p in pipes}))
        return RestartPolicy(asked, f"it reads Pipe-mode channels ({channels}), whose records already read cannot "
                                    "be read again")
    return RestartPolicy(asked, None)
