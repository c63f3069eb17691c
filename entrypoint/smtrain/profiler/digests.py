"""A rank's step events digested on its own host: its statistics (steprules.RankStats) and the few times
the job's phases need, one small JSON file a rank, `<profiler>/framework/rank-digests/<node>.json`.

Each rank writes its own at its exit, from what it wrote and without reading it back
(smtrain.profiler.steps); before a worker ships its profiler data to the master it digests the ranks
that left none covering all their files (killed, restarted in place: digest_files.covering). So the
job's one report reads a file of a few kilobytes a rank instead of parsing every rank's events at the
job's end; it parses the events of a rank with no such digest, and of the few ranks it draws one by
one. Pure but for `write` and `read`.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterable, NamedTuple, Optional, Union

from .digest_files import DIGEST_DIR, covering, digest_path
from .events import STEP, StepEvent, StepSummary
from .steprules import RankStats, rank_stats

__all__ = ["DIGEST_DIR", "RankDigest", "digest", "phase_marks", "read", "write"]

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


def write(profiler_dir: Path, digests: dict[str, RankDigest], read_open: Optional[dict[str, dict[str, int]]] = None) -> None:
    """Each digest as its file in `profiler_dir` (written aside, then renamed: never read half-written);
    `read_open`: the open event files each digest read, by node (digest_files.open_files)."""
    for node, d in digests.items():
        path = digest_path(profiler_dir, node)
        path.parent.mkdir(parents=True, exist_ok=True)
        aside = path.with_name(f".{path.name}.tmp")
        opened = (read_open or {}).get(node)
        aside.write_text(json.dumps({**d.to_json(), **({"open_files": opened} if opened else {})}, separators=(",", ":")))
        os.replace(aside, path)


def read(folders: Iterable[Path], since: float = 0.0) -> dict[str, RankDigest]:
    """The digests under `folders` (any depth) of ranks whose events reach `since` (an earlier job's,
    in a folder reused by local runs, do not) that cover all their rank's event files
    (digest_files.covering); a file that does not read is left out (its rank's events are parsed
    instead)."""
    found = {}
    for node, raw in covering(folders, since).items():
        try:
            d = RankDigest.from_json(raw)
        except (ValueError, KeyError, TypeError, AttributeError):
            continue
        if d.stats.node == node:
            found[node] = d
    return found
