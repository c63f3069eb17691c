"""This host's ranks' steps as their step recorders write them (the open event files of
smtrain.profiler.events), for the live metrics: each poll returns what was added since the last, whole lines
only, and follows a file the recorder renamed (its minute was over) to its end before the next."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, NamedTuple, Optional

from .events import BETWEEN, STEP, StepEvent, StepSummary, bin_centre_ms, bin_of, open_files, parse

__all__ = ["RankWindow", "StepTail", "windows"]

SUFFIX = "_pythontimeline.json.tmp"


class _Tail:
    """One rank's open event file, read on from where the last read stopped."""

    def __init__(self, path: Path, node: str) -> None:
        self.node = node
        self.file = open(path, "rb")  # kept open: a rename leaves it readable to its end
        self.inode = os.fstat(self.file.fileno()).st_ino
        self.rest = b""  # a line not yet whole
        self.meta = ""  # the file's metadata lines (its base time, its phases' names), which every parse needs

    def read(self) -> list[Any]:
        data = self.rest + self.file.read()
        whole, _, self.rest = data.rpartition(b"\n")
        if not whole:
            return []
        lines = [line for line in whole.decode("utf-8", "replace").split("\n") if line.strip() not in ("", "[")]
        self.meta += "".join(line + "\n" for line in lines if '"ph": "M"' in line)
        return parse("[\n" + self.meta + "\n".join(line for line in lines if '"ph": "M"' not in line), self.node)

    def close(self) -> None:
        self.file.close()


class StepTail:
    """Every rank's open event file in `<profiler>/framework`, followed."""

    def __init__(self, profiler_dir: Path) -> None:
        self.folder = open_files(profiler_dir)
        self._tails: dict[str, _Tail] = {}

    def poll(self) -> list[Any]:
        """The step events and summaries written since the last poll."""
        found: list[Any] = []
        current: dict[str, Path] = {}
        try:
            for path in self.folder.glob(f"*{SUFFIX}"):
                current[path.name[: -len(SUFFIX)]] = path
        except OSError:
            pass
        for node in set(self._tails) | set(current):
            tail, path = self._tails.get(node), current.get(node)
            inode = _inode(path) if path is not None else None
            if tail is not None and tail.inode != inode:  # renamed into place: its end, then the next file
                found += tail.read()
                tail.close()
                tail = None
                del self._tails[node]
            if tail is None and path is not None and inode is not None:
                try:
                    tail = self._tails[node] = _Tail(path, node)
                except OSError:
                    continue
            if tail is not None:
                found += tail.read()
        return found

    def close(self) -> None:
        for tail in self._tails.values():
            tail.close()
        self._tails.clear()


def _inode(path: Path) -> Optional[int]:
    try:
        return path.stat().st_ino
    except OSError:
        return None


class RankWindow(NamedTuple):
    """One rank's training steps in a window: how many, the last one's number, and the durations of the steps
    and of the gaps before them as histograms ((ms at a bin's centre, count): smtrain.profiler.events)."""
    steps: int
    last_step: int
    step_bins: tuple[tuple[float, int], ...]
    between_bins: tuple[tuple[float, int], ...]

    def to_json(self) -> list:
        return [self.steps, self.last_step, [list(b) for b in self.step_bins], [list(b) for b in self.between_bins]]

    @classmethod
    def from_json(cls, raw: Any) -> "RankWindow":
        steps, last, step_bins, between_bins = raw
        return cls(int(steps), int(last), tuple((float(ms), int(n)) for ms, n in step_bins),
                   tuple((float(ms), int(n)) for ms, n in between_bins))


def windows(events: list[Any]) -> dict[str, RankWindow]:
    """Per rank (node), its training steps among `events` (one poll's)."""
    counts: dict[str, dict[str, dict[float, int]]] = {}
    steps: dict[str, int] = {}
    last: dict[str, int] = {}
    for e in events:
        if e.mode != "TRAIN" or e.kind not in (STEP, BETWEEN):
            continue
        bins = counts.setdefault(e.node, {STEP: {}, BETWEEN: {}})[e.kind]
        if isinstance(e, StepSummary):
            for ms, n in e.bins:
                bins[ms] = bins.get(ms, 0) + n
            if e.kind == STEP:
                steps[e.node] = steps.get(e.node, 0) + e.count
                last[e.node] = max(last.get(e.node, -1), e.last_step)
        elif isinstance(e, StepEvent):
            ms = bin_centre_ms(bin_of(e.duration * 1e3))
            bins[ms] = bins.get(ms, 0) + 1
            if e.kind == STEP:
                steps[e.node] = steps.get(e.node, 0) + 1
                last[e.node] = max(last.get(e.node, -1), e.step)
    return {node: RankWindow(steps.get(node, 0), last.get(node, -1), tuple(sorted(b[STEP].items())),
                             tuple(sorted(b[BETWEEN].items()))) for node, b in counts.items()}
