"""Pipe positions as a checkpoint keeps them: every rank's, with the fingerprints of the records each
consumed of its shuffled channels' current epochs, taken from and handed back to the Pipe reader's
journal (smtrain.data.journal). No storage, no collectives."""
from __future__ import annotations

from array import array
from typing import Mapping, Sequence

from ..data.checkpoint_folder import PipePosition
from ..data.fingerprints import to_bytes
from ..data.journal import ReadJournal

__all__ = ["AllPositions", "own_fingerprints", "resume_pipes"]


class AllPositions(list):
    """Every rank's Pipe positions ({channel: PipePosition}, in rank order), as `all_positions` gives
    them, with the fingerprints of the records each rank consumed of its shuffled channels'
    current epochs (smtrain.data.fingerprints: {channel: little-endian u64s})."""

    def __init__(self, positions: Sequence[Mapping[str, PipePosition]], fingerprints: Sequence[Mapping[str, bytes]]):
        super().__init__(positions)
        self.fingerprints = list(fingerprints)


def own_fingerprints(local: Mapping[str, PipePosition], journal: ReadJournal) -> dict[str, bytes]:
    """This rank's consumed fingerprints of its shuffled channels at `local` (from its reader's journal)."""
    return {c: to_bytes(f) for c, p in local.items() if (f := journal.consumed(c, p.consumed)) is not None}


def resume_pipes(consumed: Mapping[str, "array[int]"], journal: ReadJournal) -> None:
    """Hand consumed fingerprints to the reader's journal, whose next read of each such channel's
    FIFO 0 drops those records (see smtrain.pipes.records)."""
    for channel, fingerprints in consumed.items():
        journal.resume_from(channel, fingerprints)
