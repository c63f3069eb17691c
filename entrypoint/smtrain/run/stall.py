"""The stall watchdog's judgement (pure): when a job has stalled, and which ranks stopped.

It acts only on evidence that some rank stopped while others wait for it, or on progress that the
program itself reported and that then stopped. Three kinds of evidence, checked in this order:

- `COLLECTIVE` (Horovod): its stall inspector, on rank 0, names ranks that have not submitted a
  tensor the others submitted; once the others have waited for a rank for the timeout without a
  break (`smtrain.rank.collectives`), and that rank showed no progress or sign of life meanwhile,
  that rank is named, alone.
- `INIT` (Horovod): some ranks are waiting in `hvd.init()` while others never reached it, and
  nothing changed for the timeout: those that never reached it are named.
- `STEPS` (smtrain's helpers): once any rank reported a step, no rank's steps or signs of life grew
  for the timeout. The ranks with the fewest steps are named when the ranks differ; when every rank
  stopped at the same count, the reason says so and names no culprit.

A sign of life on its own (reaching `hvd.init`, a Pipe read, a metric line, a save) never starts the
clock of any rule: a script that reports no steps and whose ranks all wait nowhere is never ended for
being quiet.
"""
from __future__ import annotations

import enum
from typing import NamedTuple, Optional

from ..wire.progress_file import Counts, InitPhase

__all__ = ["RankProgress", "Stall", "StallEvidence", "StallWatch"]


class StallEvidence(enum.Enum):
    """What shows a stall: Horovod's stall inspector, ranks waiting in hvd.init(), or steps that stopped."""
    COLLECTIVE = "collective"
    INIT = "init"
    STEPS = "steps"


class RankProgress(NamedTuple):
    """A rank's step count when the stall was found."""
    host: str
    rank: int
    steps: int
    beats: int = 0  # signs of life other than steps


class Stall(NamedTuple):
    """A stall found: its evidence, how long the ranks were quiet, which ranks."""
    evidence: StallEvidence
    quiet_s: float  # how long the named ranks (or, for STEPS, every rank) made no progress
    stopped: tuple[RankProgress, ...]  # the ranks named; for STEPS with equal counts, every rank
    most_steps: int  # the furthest rank's count, for the message
    ranks: int = 1  # how many ranks the job has

    def describe(self) -> str:
        """What the job's failure says of the stall: which ranks stopped and the evidence."""
        names = ", ".join(f"rank {r.rank} on {r.host}" for r in self.stopped)
        quiet = f"{self.quiet_s:.0f} s"
        if self.evidence is StallEvidence.COLLECTIVE:
            return (f"{names} stopped: the other ranks have waited for {'it' if len(self.stopped) == 1 else 'them'} "
                    f"in a Horovod collective for {quiet} (Horovod's stall inspector)")
        if self.evidence is StallEvidence.INIT:
            return f"{names} never reached hvd.init(); the other ranks have waited in it for {quiet}"
        least = self.stopped[0].steps
        if self.ranks == 1:
            return f"no rank made progress for {quiet}; {names} stopped at {least} steps"
        if least == self.most_steps:
            return (f"no rank made progress for {quiet}; all {self.ranks} ranks stopped together at {least} steps "
                    f"(none is behind the others)")
        return f"no rank made progress for {quiet}; stopped first: {names} ({least} steps; the furthest rank {self.most_steps})"


class _Rank:
    def __init__(self, host: str, rank: int, now: float) -> None:
        self.host, self.rank = host, rank
        self.counts = Counts()
        self.last_progress = now
        self.waited_s = 0.0  # the stall inspector's last word: how long the others have waited for it
        self.waited_at = float("-inf")  # ... and when it said so
        self.waited_fresh_s = 0.0  # how long that word holds

    def progress(self) -> RankProgress:
        return RankProgress(self.host, self.rank, self.counts.steps, self.counts.beats)


class StallWatch:
    """The stall watchdog's judgement (pure): what the ranks report, and when it adds up to a stall."""

    def __init__(self, timeout_s: float, now: float) -> None:
        self.timeout_s = timeout_s
        self._ranks: dict[int, _Rank] = {}
        self._started = now
        self._last_change = now  # any rank's counts
        self._init_since = now  # the ranks' init phases

    def expect(self, host: str, rank: int) -> None:
        """A rank of the job (one that never reports counts with nothing reached)."""
        self._ranks.setdefault(rank, _Rank(host, rank, self._started))

    def observe(self, host: str, rank: int, counts: Counts, now: float) -> None:
        """Takes in a rank's counts at `now`; any change is progress."""
        state = self._ranks.setdefault(rank, _Rank(host, rank, now))
        old = state.counts
        if counts.init != old.init:
            self._init_since = now
        if counts.steps > old.steps or counts.beats > old.beats or counts.init != old.init:
            state.counts = Counts(max(counts.steps, old.steps), max(counts.beats, old.beats), counts.init)
            state.last_progress = self._last_change = now
            if counts.init is InitPhase.NOT_REACHED:
                self._init_since = now  # a rank still on its way to init is not stuck

    def waited_for(self, waits: dict[int, float], check_s: float, now: float) -> None:
        """Horovod's stall inspector (interval `check_s`): the other ranks have waited `waits[rank]`
        seconds for each rank, as of `now`. While they still wait, the next word comes one interval
        later (and a second, the rank launcher's reporting step)."""
        for rank, seconds in waits.items():
            state = self._ranks.setdefault(rank, _Rank("?", rank, self._started))
            state.waited_s, state.waited_at, state.waited_fresh_s = seconds, now, 1.5 * check_s + 2.0

    def check(self, now: float) -> Optional[Stall]:
        """The stall at `now`, if there is one (a collective's wait, the init, or no step for the timeout)."""
        if self.timeout_s <= 0 or not self._ranks:
            return None
        return self._collective(now) or self._init(now) or self._steps(now)

    def _stall(self, evidence: StallEvidence, quiet_s: float, stopped: list[_Rank]) -> Stall:
        most = max(r.counts.steps for r in self._ranks.values())
        return Stall(evidence, quiet_s, tuple(sorted(r.progress() for r in stopped)), most, len(self._ranks))

    def _collective(self, now: float) -> Optional[Stall]:
        stopped = [r for r in self._ranks.values()
                   if now - r.waited_at <= r.waited_fresh_s and r.waited_s >= self.timeout_s
                   and r.last_progress <= r.waited_at - r.waited_s]
        if not stopped:
            return None
        return self._stall(StallEvidence.COLLECTIVE, min(r.waited_s for r in stopped), stopped)

    def _init(self, now: float) -> Optional[Stall]:
        phases = [r.counts.init for r in self._ranks.values()]
        quiet = now - self._init_since
        if InitPhase.WAITING not in phases or InitPhase.NOT_REACHED not in phases or quiet < self.timeout_s:
            return None
        return self._stall(StallEvidence.INIT, quiet,
                           [r for r in self._ranks.values() if r.counts.init is InitPhase.NOT_REACHED])

    def _steps(self, now: float) -> Optional[Stall]:
        quiet = now - self._last_change
        if not any(r.counts.steps for r in self._ranks.values()) or quiet < self.timeout_s:
            return None
        ranks = list(self._ranks.values())
        if len({r.counts.steps for r in ranks}) > 1:  # the fewest steps; of those, the fewest signs of life
            least = min((r.counts.steps, r.counts.beats) for r in ranks)
            ranks = [r for r in ranks if (r.counts.steps, r.counts.beats) == least]
        return self._stall(StallEvidence.STEPS, quiet, ranks)
