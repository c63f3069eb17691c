"""Whether and how often the job is restarted in place after a transient failure
(`sagemaker_max_restarts`): decided once, shown by `train --dry-run`; which failures count is
run.attempts' judgement.

A restarted attempt sees what a new job (a spot restart) would see: its checkpoint folder, and each
Pipe channel from FIFO 0 with whole epochs. A program on its own is restarted as a job across hosts
is. A job is not restarted in place, whatever the setting, where a restart could not resume it exactly:
- processes beside the program that hold the job's state (a parameter server): a restart would lose it;
- SageMaker's own Pipe-mode channels that a program would read directly: their FIFOs are SageMaker's,
  one pass per epoch, and the program's own reader would close one before its end. Where restarts are
  asked for, every SageMaker channel goes through a demultiplexer (to one reader, too, and each
  per-rank channel a local rank reads through one of its own: plan.fifo_plan), which reads
  SageMaker's epoch to its end and deals the next one as the restarted attempt's FIFO 0
  (smtrain.data.demux_restarts): none is left to refuse, unless the plan read one directly.
Channels `train` streams itself from files (Pipe emulation, as under SDK local mode) start again from
FIFO 0. Shuffled ones too: each host's demultiplexer leaves out what its ranks consumed, as they hand
it over from the checkpoint they restored.
"""
from __future__ import annotations

from typing import Any, NamedTuple, Optional

from ..wire.pipe_assignment import PipeAssignment, PipeMode
from .coordination import Coordination
from .fifo_plan import relayed_member

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
    relayed = {m for p in pipes if p.mode is PipeMode.DIRECT and (m := relayed_member(p.prefix))}  # per-rank members
    dealt = {p.channel for p in pipes if p.mode is PipeMode.DEMUX} | relayed
    direct = sorted(c for c in pipe_channels if c not in dealt)
    if direct:
        return RestartPolicy(asked, f"its ranks read SageMaker's Pipe-mode channels ({', '.join(direct)}) directly "
                                    "(per-rank channels), whose FIFOs a restart cannot start again")
    return RestartPolicy(asked, None)
