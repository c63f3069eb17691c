"""The stall watchdog's judgement (pure): the job has stalled when, after some rank reported
progress, no rank's steps or signs of life (smtrain.progress) have grown for the timeout. The ranks
with the fewest steps (of those, the fewest signs of life) are named: in a job of collective
operations, those are the ranks the others wait for (a rank that never reached `hvd.init` has
shown no sign of life, those waiting in it one)."""
from __future__ import annotations

from typing import NamedTuple, Optional

__all__ = ["RankProgress", "Stall", "StallWatch"]


class RankProgress(NamedTuple):
    host: str
    rank: int
    steps: int
    beats: int = 0  # signs of life other than steps


class Stall(NamedTuple):
    quiet_s: float  # how long no rank made progress
    stopped: tuple[RankProgress, ...]  # the ranks with the fewest steps
    most_steps: int  # the furthest rank's count, for the message

    def describe(self) -> str:
        names = ", ".join(f"rank {r.rank} on {r.host}" for r in self.stopped)
        return (f"no rank made progress for {self.quiet_s:.0f} s; stopped first: {names} "
                f"({self.stopped[0].steps} steps; the furthest rank {self.most_steps})")


class StallWatch:
    def __init__(self, timeout_s: float, now: float) -> None:
        self.timeout_s = timeout_s
        self._steps: dict[tuple[str, int], int] = {}
        self._beats: dict[tuple[str, int], int] = {}
        self._last_change = now

    def expect(self, host: str, rank: int) -> None:
        """A rank of the job (one that never reports counts with 0 steps)."""
        self._steps.setdefault((host, rank), 0)

    def observe(self, host: str, rank: int, steps: int, beats: int, now: float) -> None:
        key = (host, rank)
        if steps > self._steps.get(key, 0) or beats > self._beats.get(key, 0):
            self._steps[key] = max(steps, self._steps.get(key, 0))
            self._beats[key] = max(beats, self._beats.get(key, 0))
            self._last_change = now

    @property
    def armed(self) -> bool:
        return any(self._steps.values()) or any(self._beats.values())

    def check(self, now: float) -> Optional[Stall]:
        quiet = now - self._last_change
        if self.timeout_s <= 0 or not self.armed or quiet < self.timeout_s:
            return None
        ranks = [RankProgress(h, r, s, self._beats.get((h, r), 0)) for (h, r), s in self._steps.items()]
        least = min((r.steps, r.beats) for r in ranks)  # fewest steps; of those, fewest signs of life
        stopped = tuple(sorted(r for r in ranks if (r.steps, r.beats) == least))
        return Stall(quiet, stopped, max(r.steps for r in ranks))
