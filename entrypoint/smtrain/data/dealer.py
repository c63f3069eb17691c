"""One epoch's records dealt from a source FIFO to several ranks' FIFOs (smtrain.data.demux runs it):
the plan - whole rounds of blocks whose size the epoch's first records fix - and the transport, blocks
spliced in the kernel (smtrain.data.spliced) or written from the buffer the source is read into."""
from __future__ import annotations

import os
import select
from pathlib import Path
from typing import Callable, Optional, Sequence

from ..common.console import log
from ..wire.record_format import RecordFormat
from .demux_restarts import wait_readable
from .fingerprints import Fingerprints, fingerprint
from .record_reader import CorruptRecord, Frames, RecordSplitter, payload, write_pieces, write_spans
from .spliced import SplicedSource

__all__ = ["BLOCK_BYTES", "MAX_BLOCK", "PIPE_SIZE", "ROUND_BYTES", "SAMPLE_RECORDS", "Dealer", "Span", "block_for",
           "deal", "drain"]

PIPE_SIZE = 1 << 20  # per rank: smooths out the dealing without holding much
# Records per rank per round: about BLOCK_BYTES. Larger blocks mean fewer pieces to slice and pass
# per read (one splice, or writev entry, each): 64 KiB against 16 KiB took the demultiplexer of
# 100-byte records to 4 readers from about 0.86x to 0.93-1.04x of one reader (benchmarks/bench_pipes.py,
# when it still copied the blocks; 128 and 256 KiB measured no faster once it spliced them). A round
# (P blocks) stays within ROUND_BYTES: an unfinished round waits in the demultiplexer's buffer (and
# carry pipe, of PIPE_SIZE: smtrain.data.spliced).
BLOCK_BYTES = 64 << 10
ROUND_BYTES = 1 << 20
MAX_BLOCK = 4096
SAMPLE_RECORDS = 64  # the first records of an epoch, whose mean size sets its block

Span = tuple[int, int]


def block_for(first: Frames, ranks: int) -> int:
    """Records per rank per round, from the epoch's first records (`first`, framed) and the number of
    readers: about BLOCK_BYTES of records of their mean size, or ROUND_BYTES / ranks where that is less.
    The mean is over the first SAMPLE_RECORDS records, or fewer where they reach BLOCK_BYTES first
    (one record where it is that large); 0 while `first` holds fewer than that."""
    taken = SAMPLE_RECORDS
    for n in range(1, SAMPLE_RECORDS + 1):
        if n > first.count:
            return 0
        if first.stops[n - 1] - first.start >= BLOCK_BYTES:
            taken = n
            break
    sample_bytes = max(first.stops[taken - 1] - first.start, 1)
    wanted = min(BLOCK_BYTES, ROUND_BYTES // max(ranks, 1))
    return max(1, min(MAX_BLOCK, wanted * taken // sample_bytes))


def deal(frames: Frames, count: int, ranks: Sequence[int], block: int) -> dict[int, list[Span]]:
    """Whole rounds of the first `count` records of `frames` (a multiple of block x ranks): each rank's
    blocks of `block` records, each as the one span that covers it."""
    dealt: dict[int, list[Span]] = {rank: [] for rank in ranks}
    for start in range(0, count, block * len(ranks)):
        for i, rank in enumerate(ranks):
            dealt[rank].append(frames.span(start + i * block, start + (i + 1) * block - 1))
    return dealt


class Dealer:
    """One epoch's dealing of a source FIFO to several ranks' FIFOs, in whole rounds.

    The transport is chosen once: blocks spliced from the source in the kernel (smtrain.data.spliced)
    where the source is a pipe and nothing is left out, else written from the buffer the source is
    read into; splicing falls back to writing for good where a round outgrows the carry pipe, and at
    the epoch's end.

    `fixed`: the ranks dealt to are the job's, over several hosts (smtrain.data.job_dealing): those of
    other hosts have no FIFO here (their blocks go to /dev/null, in the kernel where spliced), and a rank
    that goes away keeps its share, so that every host deals the stream alike."""

    def __init__(self, source: Path, src: int, fds: dict[int, Optional[int]], names: dict[int, str],
                 fmt: RecordFormat, splice: bool, stop: Optional[Callable[[], bool]] = None, fixed: bool = False) -> None:
        self.source, self.src, self.fmt = source, src, fmt
        self.stop = stop  # a restart in place asked for: the dealing ends (its source is drained)
        self.fds = fds  # each rank's FIFO, open for writing; None once the rank is dropped (or on another host)
        self.names = names  # each rank's FIFO's name, for the log
        self.fixed = fixed
        self.live = [r for r, fd in fds.items() if fd is not None or fixed]  # the ranks still dealt to, in order
        self.counts = {r: 0 for r in self.live}  # records dealt to each rank
        self.left_over = 0  # records at the epoch's end too few for one more round, not dealt
        self.first: Optional[int] = None  # the fingerprint of the epoch's first record, once seen
        self.splitter = RecordSplitter(fmt, check_crc=False)  # the ranks check CRCs; here only framing matters
        self.spliced: Optional[SplicedSource] = SplicedSource.open(src, PIPE_SIZE) if splice else None

    # -- the transport --------------------------------------------------------------------------------
    def fill(self) -> int:
        """Read more of the source into the splitter; 0 at its end (or once `stop()` says to stop)."""
        if self.stop is not None and not wait_readable(self.src, self.stop):
            return 0
        return self.splitter.fill_from(self.src) if self.spliced is None else self.spliced.fill(self.splitter)

    def unsplice(self) -> None:
        """From here on, the plain path: the source read, the ranks written."""
        if self.spliced is not None:
            self.spliced.release()
            self.spliced = None

    def drop_rank(self, rank: int) -> None:
        """A rank that went away: its FIFO closed, dealt nothing more."""
        log(f"{self.names[rank]}: rank {rank} went away; "
            + ("its share goes nowhere" if self.fixed else "dropping it"))
        os.close(self.fds[rank])  # type: ignore[arg-type]
        self.fds[rank] = None
        if not self.fixed:
            self.live.remove(rank)

    def reading(self) -> bool:
        """Whether a rank of this host is still dealt to."""
        return any(self.fds[r] is not None for r in self.live)

    def note_first(self, span: Span) -> None:
        """The epoch's first record, at `span` of the buffer: its fingerprint kept (`first`)."""
        if self.first is None:
            with self.splitter.view() as view:
                self.first = fingerprint(payload(self.fmt, view, span))

    def write(self, rank: int, pieces: list) -> None:
        """Write `pieces` to a rank's FIFO; a rank that went away is dropped."""
        if self.fds[rank] is None:
            return
        try:
            write_pieces(self.fds[rank], pieces)  # type: ignore[arg-type]
        except BrokenPipeError:
            self.drop_rank(rank)

    def send(self, found: Frames, count: int, block: int) -> None:
        """The first `count` records of `found` (whole rounds) dealt in blocks of `block`."""
        dealt = deal(found, count, list(self.live), block)
        for rank, spans in dealt.items():
            self.counts[rank] += block * len(spans)
        spliced = self.spliced
        if spliced is not None:  # in the stream's order: round after round
            for spans in zip(*dealt.values()):
                for rank, (a, b) in zip(dealt, spans):
                    fd = self.fds[rank]
                    left = spliced.move(spliced.devnull if fd is None else fd, b - a)
                    if left:
                        self.drop_rank(rank)
                        spliced.move(spliced.devnull, left)
            return
        with self.splitter.view() as view:
            for rank, spans in dealt.items():
                self.write(rank, [view[a:b] for a, b in spans])

    # -- the epoch ------------------------------------------------------------------------------------
    def deal_all(self) -> None:
        """The whole stream in rounds of blocks fixed by its first records; the last, unfinished round
        in equal blocks of what is left (what is left then, fewer than one per rank: `left_over`)."""
        splitter, block = self.splitter, 0
        while self.reading() and self.fill():
            found = splitter.frames()
            if found.count:
                self.note_first(found.span(0, 0))
                block = block or block_for(found, len(self.live))
                whole = found.count - found.count % (block * len(self.live)) if block else 0  # whole rounds only
                if whole < found.count:
                    splitter.rewind(found.start_of(whole))  # an unfinished round waits for more records
                if whole:
                    self.send(found, whole, block)
            if self.spliced is not None and not self.spliced.hold():
                log(f"{self.source}: an unfinished round is larger than the carry pipe; copying from here on")
                self.unsplice()
            if splitter.failed:  # no more whole records will come: the rest goes to a rank below
                break
        self.unsplice()  # the end (or corruption): the last round is dealt from the buffer
        splitter.end_last_line()
        rest = splitter.frames() if self.reading() else Frames(0, [], 0)
        if rest.count:
            self.note_first(rest.span(0, 0))
        share = rest.count // len(self.live) if self.live else 0
        if share:  # the last round: equal blocks of what is left
            self.send(rest, share * len(self.live), share)
        self.left_over = rest.count - share * len(self.live)
        splitter.finish()

    def deal_kept(self, drop: Fingerprints) -> None:
        """A resumed shuffled epoch: the records not in `drop`, dealt one by one in whole rounds (no
        rewinding: each record is judged once)."""
        splitter = self.splitter
        carry: list[bytes] = []
        while self.reading() and self.fill():
            carry = self._send_kept(splitter.frame_spans(), carry, drop)
            if splitter.failed:
                break
        splitter.end_last_line()
        self.left_over = len(self._send_kept(splitter.frame_spans(), carry, drop)) if self.reading() else 0
        splitter.finish()

    def _send_kept(self, found: Sequence[Span], carry: list[bytes], drop: Fingerprints) -> list[bytes]:
        """The records of `found` not in `drop`, after `carry`, dealt in whole rounds; the rest of the
        last round comes back as copies (spans do not outlive the next read)."""
        if found:
            self.note_first(found[0])
        with self.splitter.view() as view:
            pieces = carry + [view[a:b] for a, b in found if not drop.take(fingerprint(payload(self.fmt, view, (a, b))))]
            ranks = list(self.live)
            whole = len(pieces) - len(pieces) % len(ranks)
            for i, rank in enumerate(ranks):
                self.counts[rank] += len(pieces[i:whole:len(ranks)])
                self.write(rank, pieces[i:whole:len(ranks)])
            rest = [bytes(p) for p in pieces[whole:]]
            del pieces  # no slice of the buffer may outlive the view
        return rest

    def pass_on_corrupt(self, error: CorruptRecord) -> None:
        """The ranks must not take a cut-short epoch for a whole one: the next rank gets the bad bytes,
        so its own reader fails with a clear error, and the job with it."""
        live = [r for r in self.live if self.fds[r] is not None]
        log(f"{self.source}: {error}; passing the rest to rank {live[0] if live else '-'}, whose reader will fail")
        if live:
            with self.splitter.view() as view:
                try:
                    write_spans(self.fds[live[0]], view, [self.splitter.leftover_span()])  # type: ignore[arg-type]
                except BrokenPipeError:
                    pass

    def close_ranks(self) -> None:
        """Every rank's FIFO closed: nothing more is dealt."""
        for rank, fd in self.fds.items():
            if fd is not None:
                os.close(fd)
                self.fds[rank] = None
        self.live = []

    def drain(self, acknowledge: Callable[[], bool]) -> None:
        """Read the rest of the source, dealing nothing (what was buffered included): `drain`."""
        self.unsplice()
        drain(self.src, self.source, acknowledge)

    def close(self) -> None:
        """The source, the carry pipe and every rank's FIFO closed."""
        if self.spliced is not None:
            self.spliced.close()
        os.close(self.src)
        for fd in self.fds.values():
            if fd is not None:
                os.close(fd)


def drain(src: int, source: Path, acknowledge: Callable[[], bool]) -> None:
    """Read the rest of SageMaker's FIFO `src`, passing nothing on, calling `acknowledge` between reads
    (smtrain.data.demux_restarts): it is then read to its end, as its agent expects."""
    drained = 0
    buffer = bytearray(PIPE_SIZE)
    while True:
        acknowledge()
        if not select.select([src], [], [], 0.2)[0]:
            continue
        got = os.readv(src, [buffer])
        if not got:
            break
        drained += got
    if drained:
        log(f"{source}: read the rest of the epoch ({drained} bytes), dealing nothing: a restart takes the next")
