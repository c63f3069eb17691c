"""One attempt of a job across hosts, as the master's control server and the master role see it: each host's
state, explicit (`HostState`), and what belongs to this attempt alone - its number and start, the ranks'
progress and failure reports, the stall watchdog, the reason it is being ended early. A restart in place is a
new `Attempt` (the control server's `begin_attempt`): nothing of the last one is reset by hand."""
from __future__ import annotations

import enum
import threading
import time
from typing import Callable, Optional

from ..wire.progress_file import Counts, InitPhase
from ..wire.rank_failure import RankFailure
from .stall import Stall, StallWatch
from .watchdog import Watchdog

__all__ = ["Attempt", "AttemptProgress", "HostState"]


class HostState(enum.Enum):
    """A worker's `train` as the control channel has seen it:

        CONNECTED -> JOINED -> RUNNING -> DONE -> READY | REFUSED -> RUNNING (the next attempt) ...
        any state -> LOST (its connection ended, or it went silent, before the job did) | GONE (after)

    RUNNING: the attempt started there; DONE: its own program ended (TF strategies, with its status);
    READY / REFUSED: after a failed attempt, its part is gone and it can (or cannot) take part in the next."""

    CONNECTED = "connected"
    JOINED = "joined"
    RUNNING = "running"
    DONE = "done"
    READY = "ready"
    REFUSED = "refused"
    LOST = "lost"
    GONE = "gone"


class AttemptProgress:
    """What the ranks of one attempt reported of their progress (from the control server's threads)."""

    def __init__(self) -> None:
        self.steps = 0  # the most steps a rank reported
        self.progressed = False  # a step or sign of life, or Horovod's init returned

    def observe(self, host: str, rank: int, counts: Counts) -> None:
        """Takes in a rank's reported counts."""
        self.steps = max(self.steps, counts.steps)
        if counts.steps or counts.beats or counts.init is InitPhase.DONE:
            self.progressed = True


class Attempt:
    """One attempt (see the module's docstring). The control server's threads add to it (`observe`,
    `waited_for`, `reports`); the master's loop reads it and ends it."""

    def __init__(self, number: int) -> None:
        self.number = number
        self.started, self.started_wall = time.monotonic(), time.time()
        self.progress = AttemptProgress()
        self.reports: list[RankFailure] = []  # its failed ranks' reports (under the control server's lock)
        self.aborted: Optional[str] = None  # why it is being ended early, once it is
        self._watchdog: Optional[Watchdog] = None
        self._lock = threading.Lock()

    def observe(self, host: str, rank: int, counts: Counts) -> None:
        """A rank's progress, for the attempt's account and its stall watchdog."""
        self.progress.observe(host, rank, counts)
        if self._watchdog is not None:
            self._watchdog.observe(host, rank, counts)

    def waited_for(self, waits: dict[int, float], check_s: float) -> None:
        """Horovod's stall inspector's waits per rank, for the stall watchdog."""
        if self._watchdog is not None:
            self._watchdog.waited_for(waits, check_s)

    def watch(self, timeout_s: float, ranks: tuple[tuple[str, int], ...], on_stall: Callable[[Stall], None],
              poll: Optional[Callable[[], None]] = None) -> None:
        """Its stall watchdog, over `ranks` (host, rank), until `stop_watching`; `poll`, if given, is called
        before each check to bring in fresh counts (a progress file's)."""
        watch = StallWatch(timeout_s, time.monotonic())
        for host, rank in ranks:
            watch.expect(host, rank)
        self._watchdog = Watchdog(watch, on_stall, (lambda dog: poll()) if poll else None).start()

    def stop_watching(self) -> None:
        """Its stall watchdog stopped (its finding, if any, stays)."""
        if self._watchdog is not None:
            self._watchdog.stop()

    @property
    def stall(self) -> Optional[Stall]:
        """What the stall watchdog found, if it found the attempt stalled."""
        return self._watchdog.stall if self._watchdog is not None else None

    def abort(self, reason: str) -> bool:
        """Mark it as being ended early for `reason`; whether this was the first reason."""
        with self._lock:
            if self.aborted is not None:
                return False
            self.aborted = reason
            return True
