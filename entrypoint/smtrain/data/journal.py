"""A reader's journal of shuffled Pipe channels: the fingerprints of the records this rank consumed
of each channel's current FIFO (what a checkpoint stores), and those a restored checkpoint hands back
(what the next read of FIFO 0 drops). smtrain.pipes writes it as it reads; smtrain.checkpoints is
handed it to save and restore."""
from __future__ import annotations

import sys
from array import array
from typing import NamedTuple, Optional

from .fingerprints import Fingerprints

__all__ = ["Journal", "ReadJournal"]


class Journal(NamedTuple):
    """One FIFO's consumed fingerprints; the first `carried` were consumed before a restart."""

    fifo: int
    fingerprints: "array[int]"
    carried: int


def _warn(message: str) -> None:
    sys.stderr.write(f"[smtrain.pipes] {message}\n")


class ReadJournal:
    """What a reader consumed of each channel's epoch, for a checkpoint to record and a restart to skip."""

    def __init__(self) -> None:
        self._current: dict[str, Journal] = {}
        self._resumed: dict[str, "array[int]"] = {}

    def resume_from(self, channel: str, fingerprints: "array[int]") -> None:
        """The records this rank consumed of `channel`'s interrupted epoch (a restored checkpoint's)."""
        self._resumed[channel] = array("Q", fingerprints)

    def consumed(self, channel: str, count: int) -> Optional["array[int]"]:
        """The fingerprints of the first `count` records of the FIFO this rank reads of a shuffled
        `channel`, or None when the channel keeps none."""
        journal = self._current.get(channel)
        if journal is None:
            return None
        if count > len(journal.fingerprints):  # a position that is not this reader's: keep what is known
            _warn(f"channel {channel!r}: a position of {count} consumed records, but this rank read "
                  f"{len(journal.fingerprints)} of FIFO {journal.fifo}; the checkpoint keeps those")
        return journal.fingerprints[:count]

    def start(self, channel: str, fifo: int, skip: int, demuxed: bool) -> tuple[Journal, Optional[Fingerprints]]:
        """The journal of a FIFO about to be read with `skip`, and the records to drop from it (None:
        nothing; a `demuxed` channel's demultiplexer drops them before they reach the FIFO)."""
        carried = self._resumed.pop(channel, None) if skip else None
        if skip and carried is None:
            _warn(f"channel {channel!r} has a ShuffleConfig but the checkpoint holds no fingerprints of its "
                  f"consumed records: skipping the first {skip}, which in another order are not the ones consumed")
        elif carried is not None and len(carried) != skip:
            _warn(f"channel {channel!r}: skip={skip}, but the checkpoint holds {len(carried)} consumed records; "
                  f"dropping those {len(carried)}")
        kept = array("Q", carried if carried is not None else ())
        journal = Journal(fifo, kept, len(kept))
        self._current[channel] = journal
        if carried is None or demuxed:
            return journal, None
        return journal, Fingerprints(carried)
