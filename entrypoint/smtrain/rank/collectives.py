"""What Horovod knows about a stall, read from the coordinator's stderr (pure).

Horovod's stall inspector runs on rank 0. Every `HOROVOD_STALL_CHECK_TIME_SECONDS` (C) it logs the
tensors that some ranks submitted and others have not, for longer than C, with the missing ranks:

    [2026-11-25 10:00:00.000000: W .../stall_inspector.cc:105] One or more tensors were submitted to be
    reduced, gathered or broadcasted by subset of ranks and are waiting for remainder of ranks for more
    than 3 seconds. This may indicate ...
    Missing ranks:
    1: [allreduce.step]

`StallInspectorLines` turns those lines into (rank, C) facts; `CollectiveWaits` turns the facts into
how long each rank has been waited for without a break. While a collective stays stalled, every check
names its missing ranks again, C apart; once it completes, at least one check finds no tensor waiting
longer than C (the next tensor must wait C before it counts), so a gap of more than 1.5 C between two
reports of a rank means the wait ended and a new one began: a rank that is merely slower every step is
never taken for one that stopped.
"""
from __future__ import annotations

import re
from typing import Callable

__all__ = ["CollectiveWaits", "StallInspectorLines", "check_interval_s"]

HEADER = re.compile(rb"waiting for remainder of ranks for more than (\d+) seconds")
MISSING_RANKS = b"Missing ranks:"
RANK_LINE = re.compile(rb"^(\d+)!?: \[")


def check_interval_s(timeout_s: float) -> int:
    """The stall inspector's interval the toolkit sets (unless the user set one): a sixth of the stall
    timeout, 2 to 10 s, so that a stall is seen within the timeout plus about 2 intervals."""
    return int(min(10.0, max(2.0, timeout_s / 6)))


class StallInspectorLines:
    """Reads the program's stderr, whole lines at a time; calls `on_missing(rank, check_s)` for each
    rank that a stall warning names."""

    def __init__(self, on_missing: Callable[[int, float], None]) -> None:
        self._on_missing = on_missing
        self._check_s: "float | None" = None  # inside a warning: its C

    def __call__(self, lines: bytes) -> None:
        if self._check_s is None and b"remainder of ranks" not in lines:
            return
        for line in lines.rstrip(b"\n").split(b"\n"):
            if self._check_s is not None:
                match = RANK_LINE.match(line)
                if match:
                    self._on_missing(int(match.group(1)), self._check_s)
                    continue
                if line.strip() == MISSING_RANKS:
                    continue
                self._check_s = None
            header = HEADER.search(line)
            if header:
                self._check_s = float(header.group(1))


class CollectiveWaits:
    """How long each rank named by the stall inspector has been waited for, without a break."""

    def __init__(self) -> None:
        self._since: dict[int, float] = {}
        self._last: dict[int, float] = {}

    def named(self, rank: int, check_s: float, at: float) -> float:
        """The inspector named `rank` at `at` (its clock); how long the others have waited for it:
        at least C before the first report of an unbroken series."""
        if rank not in self._since or at - self._last[rank] > 1.5 * check_s:
            self._since[rank] = at - check_s
        self._last[rank] = at
        return at - self._since[rank]
