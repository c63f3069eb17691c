"""The stop flag a spot interruption sets: SIGTERM caught, so that the program finishes its step,
saves and exits 0."""
from __future__ import annotations

import signal

from .shared import any_rank

__all__ = ["StopSignal"]


class StopSignal:
    """Set by SIGTERM (a spot interruption, or `docker stop`): finish the step, save, exit 0.

    `agreed()` makes every Horovod rank stop at the same step (an allreduce of the flag), so the
    ranks' collective operations stay in step; without Horovod it is the local flag."""

    def __init__(self, signals: tuple[int, ...] = (signal.SIGTERM,)) -> None:
        self.requested = False
        for signum in signals:
            signal.signal(signum, self._handle)

    def _handle(self, signum: int, frame: object) -> None:
        self.requested = True

    def agreed(self) -> bool:
        """Whether any rank was asked to stop (every rank gets the same answer, so all stop at one step)."""
        return any_rank(self.requested)
