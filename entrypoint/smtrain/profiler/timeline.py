"""Horovod's timeline (HOROVOD_TIMELINE, written by rank 0): how much of the job its collectives took.

The file is a Chrome trace that Horovod appends to and may never close: one process per tensor
(`process_name`), per tensor a `B`/`E` pair for each top-level activity (`NEGOTIATE_ALLREDUCE`: waiting
until every rank has the tensor ready; `ALLREDUCE`, `ALLGATHER`, `BROADCAST`...: the collective itself,
with nested activities such as `MPI_ALLREDUCE` or `MEMCPY_IN_FUSION_BUFFER`). Read leniently, line
by line. Pure apart from reading the file.
"""
from __future__ import annotations

from pathlib import Path
from typing import NamedTuple, Optional

from .events import trace_objects

__all__ = ["TimelineStats", "read_timeline", "summarise_timeline"]


class TimelineStats(NamedTuple):
    """What Horovod's timeline shows: time in collectives, by activity."""
    path: str
    span_s: float  # first to last event
    collective_s: float  # time during which any tensor was in a collective (a union over tensors)
    negotiate_s: float  # ... or waiting for every rank to be ready for one
    tensors: int
    by_activity: dict[str, float]  # top-level activity -> summed seconds over tensors

    @property
    def collective_share(self) -> float:
        return self.collective_s / self.span_s if self.span_s > 0 else 0.0

    @property
    def negotiate_share(self) -> float:
        return self.negotiate_s / self.span_s if self.span_s > 0 else 0.0


def _union(intervals: list[tuple[float, float]]) -> float:
    total, end = 0.0, float("-inf")
    for a, b in sorted(intervals):
        if b <= end:
            continue
        total += b - max(a, end)
        end = b
    return total


def summarise_timeline(events: list[dict], path: str = "") -> Optional[TimelineStats]:
    """The statistics of a Horovod timeline's events; None when it has none."""
    stacks: dict[object, list[tuple[str, float]]] = {}
    spans: dict[str, list[tuple[float, float]]] = {}
    times: list[float] = []
    tensors = set()
    for event in events:
        phase, ts = event.get("ph"), event.get("ts")
        if not isinstance(ts, (int, float)):
            continue
        times.append(float(ts))
        pid = event.get("pid")
        if phase == "B":
            stacks.setdefault(pid, []).append((str(event.get("name", "")), float(ts)))
            tensors.add(pid)
        elif phase == "E" and stacks.get(pid):
            name, start = stacks[pid].pop()
            if not stacks[pid]:  # a top-level activity of this tensor
                spans.setdefault(name, []).append((start, float(ts)))
    if not times:
        return None
    negotiate = [i for name, v in spans.items() if name.startswith("NEGOTIATE") for i in v]
    collective = [i for name, v in spans.items() if not name.startswith("NEGOTIATE") for i in v]
    return TimelineStats(path, (max(times) - min(times)) / 1e6, _union(collective) / 1e6, _union(negotiate) / 1e6,
                         len(tensors), {name: sum(b - a for a, b in v) / 1e6 for name, v in sorted(spans.items())})


def read_timeline(path: Path) -> Optional[TimelineStats]:
    """The timeline's summary, or None when the file is missing or holds no events."""
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    return summarise_timeline(list(trace_objects(text)), str(path))
