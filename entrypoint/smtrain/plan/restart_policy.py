"""Whether and how often the job is restarted in place after a transient failure
(`sagemaker_max_restarts`): decided once, shown by `train --dry-run`; which failures count is
run.restart_rule's judgement.

A restarted attempt sees what a new job (a spot restart) would see: its checkpoint folder, and each
Pipe channel from FIFO 0 with whole epochs. A program on its own is restarted as a job across hosts
is. A job is not restarted in place, whatever the setting, where a restart could not resume it exactly:
- processes beside the program that hold the job's state (a parameter server): a restart would lose it;
- SageMaker's own Pipe-mode channels: their FIFOs are SageMaker's, one pass per epoch, and a restart
  could not start them again. Channels `train` streams itself from files (Pipe emulation, as under
  SDK local mode) start again from FIFO 0;
- a shuffled channel dealt by the demultiplexers of a job across hosts: a worker's demultiplexer
  leaves out what its ranks consumed by the newest checkpoint's fingerprints, which only the master's
  host holds during the job (SageMaker restores them to every host on a spot restart, not in a job).
"""
from __future__ import annotations

from typing import Any, NamedTuple, Optional

from ..wire.pipe_assignment import PipeAssignment, PipeMode
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


def restart_policy(asked: int, coordination: Optional[Coordination], pipe_channels: tuple[str, ...],
                   pipes: tuple[PipeAssignment, ...] = ()) -> RestartPolicy:
    """The policy for a job that asked for `asked` restarts (see the module's docstring); `pipe_channels`:
    SageMaker's Pipe-mode channels (not those `train` streams from files); `pipes`: what the ranks read."""
    if asked == 0:
        return RestartPolicy(0, None)
    if coordination is not None and coordination.companions:
        return RestartPolicy(asked, f"the job's {coordination.companions[0].name}s hold its state, which a restart "
                                    "would lose")
    if pipe_channels:
        return RestartPolicy(asked, f"it reads SageMaker's Pipe-mode channels ({', '.join(sorted(pipe_channels))}), "
                                    "whose FIFOs a restart cannot start again")
    dealt_shuffled = sorted({p.channel for p in pipes if p.mode is PipeMode.DEMUX and p.shuffled})
    if dealt_shuffled and coordination is not None and coordination.workers:
        return RestartPolicy(asked, f"its shuffled channels ({', '.join(dealt_shuffled)}) are dealt by each host's "
                                    "demultiplexer, which on a worker host cannot see the master's checkpoints")
    return RestartPolicy(asked, None)
