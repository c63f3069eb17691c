"""The step recorder's files (smtrain.profiler.steps): the open trace file it appends to and renames
into place, the intervals it folds steps into past the full ones, and what its files hold, kept for
the rank's own digest."""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from .events import StepSummary, as_read, bin_of, file_header, final_path, summary_lines, temp_path, to_lines

__all__ = ["Interval", "Record", "TraceFile", "Written", "merged"]

Record = tuple  # (kind, mode, step, start_s, end_s)


class Interval:
    """One kind and mode's steps past the full ones, over one interval: counted, summed, binned; the
    longest kept whole."""

    def __init__(self, record: Record) -> None:
        self.first, self.start = record[2], record[3]
        self.last, self.end = record[2], record[4]
        self.count, self.total, self.low, self.high = 0, 0.0, float("inf"), 0.0
        self.bins: dict[int, int] = {}
        self.longest: Record = record

    def add(self, record: Record) -> None:
        """One more step of the interval (records come in order)."""
        self.last, self.end = record[2], record[4]  # records come in order
        longest = self.longest
        if record[4] - record[3] > longest[4] - longest[3]:
            record, self.longest = longest, record
        seconds = record[4] - record[3]
        self.count += 1
        self.total += seconds
        if seconds < self.low:
            self.low = seconds
        if seconds > self.high:
            self.high = seconds
        index = bin_of(seconds * 1e3)
        self.bins[index] = self.bins.get(index, 0) + 1

    def summary(self, kind: str, mode: str) -> tuple:
        """The interval as a summary record for the writer."""
        return (kind, mode, self.first, self.last, self.start, self.end, self.count, self.total, self.low,
                self.high, self.bins)


class Written:
    """What the rank's files hold, as the report reads it back (events.as_read), for the rank's own
    digest at its exit: its events (those kept one by one: the first FULL_STEPS of a mode, the windows,
    each interval's longest - about 0.1 MB an hour), and its summaries merged into one per kind and mode
    as they are written (the same statistics: steprules.rank_stats adds summaries up in order)."""

    def __init__(self) -> None:
        self.events: list[Any] = []
        self.summaries: dict[tuple[str, str], StepSummary] = {}

    def add(self, read: list[Any]) -> None:
        """What one write added to the files, as the report reads it."""
        for item in read:
            if not isinstance(item, StepSummary):
                self.events.append(item)
                continue
            key = (item.kind, item.mode)
            old = self.summaries.get(key)
            self.summaries[key] = item if old is None else merged(old, item)

    def all(self) -> list[Any]:
        """Everything written, the summaries merged."""
        return self.events + list(self.summaries.values())


def merged(a: StepSummary, b: StepSummary) -> StepSummary:
    """Two summaries of one kind and mode, in order, as one."""
    bins = dict(a.bins)
    for ms, n in b.bins:
        bins[ms] = bins.get(ms, 0) + n
    return a._replace(last_step=b.last_step, start=min(a.start, b.start), end=max(a.end, b.end),
                      count=a.count + b.count, total_s=a.total_s + b.total_s, min_ms=min(a.min_ms, b.min_ms),
                      max_ms=max(a.max_ms, b.max_ms), bins=tuple(sorted(bins.items())))


class TraceFile:
    """The open trace file: appended to at every flush, renamed into pevents/ when closed."""

    def __init__(self, out: Path, node: str) -> None:
        self.out, self.node = out, node
        self.handle: Any = None
        self.base_us = 0  # the file's start time: its events' `ts` count from it
        self.opened_at = 0.0  # the recorder's clock when the file was opened
        self.last_end_us = 0
        self.pids: dict[str, int] = {}
        self.written = Written()  # every file's, this one's and those closed before

    def write(self, records: list[Record], summaries: list[tuple], now: float) -> None:
        """Append steps and summaries (the file opened with the first)."""
        starts = [r[3] for r in records] + [s[4] for s in summaries]
        if not starts:
            return
        if self.handle is None:
            path = temp_path(self.out, self.node)
            path.parent.mkdir(parents=True, exist_ok=True)
            base_us = int(min(starts) * 1e6)
            self.handle = open(path, "w", encoding="utf-8")
            self.handle.write(file_header(base_us))
            self.base_us, self.opened_at, self.pids = base_us, now, {}
        self.handle.write(to_lines(records, self.base_us, self.pids, os.getpid())
                          + summary_lines(summaries, self.base_us, self.pids, os.getpid()))
        self.handle.flush()
        self.written.add(as_read(records, summaries, self.base_us, self.node))
        ends = [r[4] for r in records] + [s[5] for s in summaries]
        self.last_end_us = max(self.last_end_us, int(max(ends) * 1e6))

    def close(self) -> None:
        """End the JSON array and move the file into pevents/ under its final name."""
        if self.handle is None:
            return
        handle, self.handle = self.handle, None
        end = handle.tell()
        handle.seek(end - 2)  # the last ",\n"
        handle.truncate()
        handle.write("\n]\n")
        handle.close()
        final = final_path(self.out, self.node, self.last_end_us)
        final.parent.mkdir(parents=True, exist_ok=True)
        os.replace(temp_path(self.out, self.node), final)
