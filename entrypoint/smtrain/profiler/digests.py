"""A rank's step events digested on its own host: its statistics (steprules.RankStats) and the few times
the job's phases need, one small JSON file a rank, `<profiler>/framework/rank-digests/<node>.json`.

A worker writes its ranks' digests before it ships its profiler data to the master, so the job's one
report reads a file of a few kilobytes a rank instead of parsing every rank's events at the job's end
(each host digests its own ranks, at once with the others); the report parses the events of a rank
with no digest (the master's own, a folder `train report` is given by hand), and of the few ranks it
draws one by one. Pure but for `write` and `read`.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterable, NamedTuple, Optional, Union

from .events import STEP, StepEvent, StepSummary
from .steprules import RankStats, rank_stats

__all__ = ["DIGEST_DIR", "RankDigest", "digest", "phase_marks", "read", "write"]

DIGEST_DIR = Path("framework") / "rank-digests"


class RankDigest(NamedTuple):
    """One rank's statistics and the times the report takes from its events."""

    stats: RankStats
    first_train_start: Optional[float]  # its first training step's start (the job's phases)
    first_step_start: Optional[float]  # its first step's of any mode
    last_step_end: Optional[float]  # its last step's end
    first_event: float  # the span of all its events, gaps and epochs too (the report's start and end)
    last_event: float

    def to_json(self) -> dict[str, Any]:
        """As its file holds it."""
        return {**self._asdict(), "stats": self.stats._asdict()}

    @classmethod
    def from_json(cls, raw: dict[str, Any]) -> "RankDigest":
        """From its file's content; ValueError (or KeyError, TypeError) when it is not one."""
        s = raw["stats"]
        stats = RankStats(str(s["node"]), {str(k): int(v) for k, v in s["steps"].items()},
                          [float(v) for v in s["step_ms"]], [float(v) for v in s["between_ms"]],
                          {str(k): float(v) for k, v in s["total_s"].items()}, float(s["first_start"]),
                          float(s["last_end"]), tuple((float(ms), int(n)) for ms, n in s["step_bins"]),
                          tuple((float(ms), int(n)) for ms, n in s["between_bins"]),
                          tuple(int(n) for n in s["step_numbers"]))
        times = [raw[k] for k in ("first_train_start", "first_step_start", "last_step_end")]
        return cls(stats, *(None if t is None else float(t) for t in times), float(raw["first_event"]),
                   float(raw["last_event"]))


def digest(events: Iterable[Union[StepEvent, StepSummary]]) -> dict[str, RankDigest]:
    """Each rank's digest of its events (those of one host, or any)."""
    by_node: dict[str, list[Union[StepEvent, StepSummary]]] = {}
    for e in events:
        by_node.setdefault(e.node, []).append(e)
    digests = {}
    for node, stats in rank_stats(e for mine in by_node.values() for e in mine).items():
        mine = by_node[node]
        steps = [e for e in mine if e.kind == STEP]
        train = [e.start for e in steps if e.mode == "TRAIN"]
        digests[node] = RankDigest(stats, min(train, default=None), min((e.start for e in steps), default=None),
                                   max((e.end for e in steps), default=None), min(e.start for e in mine),
                                   max(e.end for e in mine))
    return digests


def phase_marks(digests: Iterable[RankDigest]) -> list[StepEvent]:
    """Stand-ins for the digested ranks' steps where the job's phases look (steprules.phases): their
    first training step's start, their first step's start, their last step's end."""
    marks = []
    for d in digests:
        node = d.stats.node
        if d.first_train_start is not None:
            marks.append(StepEvent(node, STEP, "TRAIN", -1, d.first_train_start, d.first_train_start))
        if d.first_step_start is not None:
            marks.append(StepEvent(node, STEP, "EVAL", -1, d.first_step_start, d.first_step_start))
        if d.last_step_end is not None:
            marks.append(StepEvent(node, STEP, "EVAL", -1, d.last_step_end, d.last_step_end))
    return marks


def write(profiler_dir: Path, digests: dict[str, RankDigest]) -> None:
    """Each digest as its file in `profiler_dir` (written aside, then renamed: never read half-written)."""
    folder = profiler_dir / DIGEST_DIR
    folder.mkdir(parents=True, exist_ok=True)
    for node, d in digests.items():
        aside = folder / f".{node}.json.tmp"
        aside.write_text(json.dumps(d.to_json(), separators=(",", ":")))
        os.replace(aside, folder / f"{node}.json")


def read(folders: Iterable[Path], since: float = 0.0) -> dict[str, RankDigest]:
    """The digests under `folders` (any depth) of ranks whose events reach `since` (an earlier job's,
    in a folder reused by local runs, do not); a file that does not read is left out (its rank's events
    are parsed instead)."""
    found = {}
    for folder in folders:
        for path in sorted(Path(folder).rglob(f"{DIGEST_DIR.parent.name}/{DIGEST_DIR.name}/*.json")):
            try:
                d = RankDigest.from_json(json.loads(path.read_text()))
            except (OSError, ValueError, KeyError, TypeError, AttributeError):
                continue
            if d.last_event >= since:
                found[d.stats.node] = d
    return found
