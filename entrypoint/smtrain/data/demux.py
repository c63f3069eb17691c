"""The host's Pipe-mode demultiplexer: one channel's FIFO, dealt to the host's local ranks that read it.

Horovod ranks on one host must not share a FIFO. When SageMaker gives one FIFO per epoch for a
channel, `train` starts this process per channel; it reads `<data>/<C>_<e>` and deals whole
records round-robin to `<data>/.smtrain-pipes/<C>-<r>_<e>`, which local rank r reads as its own
channel.

Which ranks read the channel it learns from them, the same way every run: before the first epoch it
waits until each local rank has either opened its FIFO (a reader) or ended without (the rank
launcher's mark, smtrain.wire.pipe_assignment.rank_ended_marker), however long that takes; a rank that starts
late is waited for, not taken for one that never reads. The readers of epoch 0 are the readers of
every epoch. A channel that no rank reads is never opened (SageMaker's writer waits, as in its own
containers); one that one rank reads is passed to it byte for byte as it comes (`os.splice`: the
speed of a direct read; that rank's reader checks the records); several readers are dealt records.
Records are dealt in rounds: each rank gets a block of k consecutive records (k: about BLOCK_BYTES
of records, less where P blocks would pass ROUND_BYTES; fixed by the mean size of the epoch's first
records and the number of readers, so that the same stream is always dealt the same way - a
count-based resume relies on it). The blocks move from the source to the ranks' FIFOs in the kernel:
the demultiplexer tees the source to look at the records, and splices each block on
(smtrain.data.spliced; the one copy it makes is the one it reads), else, where that cannot be, it
writes them with one write per rank per read of the source. Every rank gets the same number of
records in an epoch: the last, unfinished round is dealt in equal blocks of what is left, and the at
most P-1 records left then are dropped and reported (a rank that took one more step than the others
would leave them waiting in a collective operation; carrying them into the next epoch would break
the count-based resume of a checkpoint). Records are passed on as framed, so each rank's reader
still checks their CRCs. Passing blocks waits while a rank's pipe is full (back-pressure, no
unbounded buffer); every rank's FIFO is closed at the end of each epoch; a rank that never opens its
FIFO, or dies, is dropped after a bounded wait instead of hanging the others.

A channel with a ShuffleConfig: after a restart, FIFO 0 comes in another order than the interrupted
epoch, so before dealing it the demultiplexer leaves out the records this host's ranks consumed, whose
fingerprints (smtrain.data.fingerprints) each rank's reader leaves beside its FIFO before opening it
(`consumed_handoff`: from the checkpoint the program restored), and the ranks' readers skip nothing
more. It holds on every host of a job, and after a restart in place as after a spot restart.

    python -m smtrain.data.demux --data /opt/ml/input/data --channel train --ranks 4 --format tfrecord
"""
from __future__ import annotations

import argparse
import errno
import itertools
import os
import select
import sys
import time
from pathlib import Path
from typing import Callable, NamedTuple, Optional, Sequence

from ..common.console import log, set_prefix
from ..wire.pipe_assignment import consumed_handoff, demux_folder, demux_prefix, rank_ended_marker
from ..wire.record_format import RecordFormat
from .fifo import PipeError, open_fifo, set_pipe_size
from .fingerprints import Fingerprints, fingerprint, from_bytes
from .record_reader import CorruptRecord, Frames, RecordSplitter, payload, write_pieces, write_spans
from .demux_restarts import Restarts, wait_readable
from .spliced import SplicedSource

__all__ = ["BLOCK_BYTES", "MAX_BLOCK", "PIPE_SIZE", "ROUND_BYTES", "SAMPLE_RECORDS", "Dealer", "EpochResult", "Span", "block_for",
    "consumed_before_restart", "deal", "demux_epoch", "main", "run", "settle_readers"]

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


class EpochResult(NamedTuple):
    """How one epoch was dealt: records per rank, ranks dropped, records left over."""
    records: dict[int, int]  # records dealt to each reading rank (nothing when passed through)
    dropped: tuple[int, ...]  # ranks that never opened their FIFO or went away
    left_over: int = 0  # records at the epoch's end too few for one more round, not dealt
    passed_bytes: Optional[int] = None  # one reader: the bytes passed to it (None: records were dealt)
    source_read: bool = True  # the source epoch was opened (and read to its end); False: left for the next


def _try_open_target(path: Path) -> Optional[int]:
    """A rank's FIFO opened for writing, if the rank has it open for reading; else None."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
    except OSError as e:
        if e.errno != errno.ENXIO:
            raise
        return None
    os.set_blocking(fd, True)
    set_pipe_size(fd, PIPE_SIZE)
    return fd


def _open_target(path: Path, deadline: float, stop: Callable[[], bool]) -> Optional[int]:
    """Open a rank's FIFO for writing once the rank has opened it; None if it has not by `deadline`
    (or by `stop()`)."""
    while True:
        try:
            fd = _try_open_target(path)
        except OSError:
            return None
        if fd is not None or time.monotonic() >= deadline or stop():
            return fd
        time.sleep(0.005)


def settle_readers(targets: dict[int, Path], markers: dict[int, Path], poll_s: float = 0.02,
                   stop: Callable[[], bool] = lambda: False) -> dict[int, int]:
    """Wait until each rank has opened its FIFO in `targets` or ended (its file in `markers` exists);
    the FIFOs of those that opened, open for writing. No time bound: a rank may train for hours before
    it reads a channel, and the job's end stops this process (or `stop()`: a restart in place)."""
    opened: dict[int, int] = {}
    pending = set(targets)
    while pending and not stop():
        for rank in sorted(pending):
            fd = _try_open_target(targets[rank])
            if fd is not None:
                opened[rank] = fd
                pending.discard(rank)
            elif markers[rank].exists():
                pending.discard(rank)
        if pending:
            time.sleep(poll_s)
    return opened


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


def demux_epoch(source: Path, targets: dict[int, Path], fmt: RecordFormat, rank_wait_s: float,
                source_wait_s: float, drop: Optional[Fingerprints] = None,
                opened: Optional[dict[int, int]] = None, restarts: Optional[Restarts] = None) -> EpochResult:
    """Deal one epoch to the ranks in `targets` (their FIFOs; those in `opened` already open for
    writing); `drop`: records to leave out (a resumed shuffled epoch's consumed ones). The source is
    opened only when some rank reads. With `restarts` (SageMaker's own FIFOs), a source once opened
    is read to its end whatever happens to the ranks, and a restart asked for ends the dealing."""
    stop = restarts.check if restarts is not None else (lambda: False)
    deadline = time.monotonic() + rank_wait_s
    fds: dict[int, Optional[int]] = {r: (opened or {}).get(r) for r in sorted(targets)}
    for rank in fds:
        if fds[rank] is None:
            fds[rank] = _open_target(targets[rank], deadline, stop)
            if fds[rank] is None and not stop():
                log(f"{targets[rank].name}: rank {rank} did not open its FIFO within {rank_wait_s:g} s; dropping it")
    live = [r for r, fd in fds.items() if fd is not None]
    if not live or stop() or (restarts is not None and not _appears(source, source_wait_s, stop)):
        for fd in fds.values():
            if fd is not None:
                os.close(fd)
        return EpochResult({}, tuple(fds), source_read=False)
    try:
        src = open_fifo(str(source), source_wait_s, PIPE_SIZE)  # fewer, larger reads from the source
    except PipeError:
        for fd in fds.values():
            if fd is not None:
                os.close(fd)
        raise
    if len(live) == 1 and drop is None:
        return _pass_through(src, live[0], fds, targets[live[0]].name, source, restarts, tuple(targets.values()))
    dealer = Dealer(source, src, fds, {r: t.name for r, t in targets.items()}, fmt, splice=drop is None,
                    stop=None if restarts is None else stop)
    try:
        if drop is not None:
            dealer.deal_kept(drop)
        else:
            dealer.deal_all()
    except CorruptRecord as e:
        dealer.pass_on_corrupt(e)
    finally:
        dropped = tuple(r for r, fd in fds.items() if fd is None)
        if restarts is not None:  # SageMaker's FIFO is never closed before its end
            dealer.close_ranks()
            restarts.released(targets.values())
            dealer.drain(stop)
        dealer.close()
    return EpochResult(dealer.counts, dropped, dealer.left_over)


def _appears(source: Path, timeout: float, stop: Callable[[], bool]) -> bool:
    """Whether SageMaker's FIFO `source` exists within `timeout` (else PipeError), or `stop()` came first."""
    deadline = time.monotonic() + timeout
    while not source.exists():
        if stop():
            return False
        if time.monotonic() >= deadline:
            raise PipeError(f"{source}: no such FIFO after {timeout:g} s (is the channel in Pipe mode, and fed?)")
        time.sleep(0.05)
    return True


class Dealer:
    """One epoch's dealing of a source FIFO to several ranks' FIFOs, in whole rounds.

    The transport is chosen once: blocks spliced from the source in the kernel (smtrain.data.spliced)
    where the source is a pipe and nothing is left out, else written from the buffer the source is
    read into; splicing falls back to writing for good where a round outgrows the carry pipe, and at
    the epoch's end."""

    def __init__(self, source: Path, src: int, fds: dict[int, Optional[int]], names: dict[int, str],
                 fmt: RecordFormat, splice: bool, stop: Optional[Callable[[], bool]] = None) -> None:
        self.source, self.src, self.fmt = source, src, fmt
        self.stop = stop  # a restart in place asked for: the dealing ends (its source is drained)
        self.fds = fds  # each rank's FIFO, open for writing; None once the rank is dropped
        self.names = names  # each rank's FIFO's name, for the log
        self.live = [r for r, fd in fds.items() if fd is not None]  # the ranks still dealt to, in order
        self.counts = {r: 0 for r in self.live}  # records dealt to each rank
        self.left_over = 0  # records at the epoch's end too few for one more round, not dealt
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
        log(f"{self.names[rank]}: rank {rank} went away; dropping it")
        os.close(self.fds[rank])  # type: ignore[arg-type]
        self.fds[rank] = None
        self.live.remove(rank)

    def write(self, rank: int, pieces: list) -> None:
        """Write `pieces` to a rank's FIFO; a rank that went away is dropped."""
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
        while self.live and self.fill():
            found = splitter.frames()
            if found.count:
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
        rest = splitter.frames() if self.live else Frames(0, [], 0)
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
        while self.live and self.fill():
            carry = self._send_kept(splitter.frame_spans(), carry, drop)
            if splitter.failed:
                break
        splitter.end_last_line()
        self.left_over = len(self._send_kept(splitter.frame_spans(), carry, drop)) if self.live else 0
        splitter.finish()

    def _send_kept(self, found: Sequence[Span], carry: list[bytes], drop: Fingerprints) -> list[bytes]:
        """The records of `found` not in `drop`, after `carry`, dealt in whole rounds; the rest of the
        last round comes back as copies (spans do not outlive the next read)."""
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
        live = self.live
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


def _pass_through(src: int, rank: int, fds: dict[int, Optional[int]], name: str, source: Path,
                  restarts: Optional[Restarts] = None, targets: Sequence[Path] = ()) -> EpochResult:
    """The one reading rank gets the stream as it comes, in the kernel (splice), until its end. With
    `restarts` (SageMaker's own FIFOs) the stream is read to its end whatever happens to the rank, and
    a restart asked for ends the passing."""
    target = fds[rank]
    assert target is not None
    passed = 0
    try:
        while restarts is None or wait_readable(src, restarts.check):
            moved = os.splice(src, target, PIPE_SIZE)
            if not moved:
                break
            passed += moved
    except BrokenPipeError:
        log(f"{name}: rank {rank} went away; dropping it")
        fds[rank] = None
    finally:
        os.close(target)
        if restarts is not None:
            restarts.released(targets)
            drain(src, source, restarts.check)
        os.close(src)
    return EpochResult({} if fds[rank] is None else {rank: 0}, tuple(r for r, fd in fds.items() if fd is None),
                       passed_bytes=passed)


def consumed_before_restart(prefixes: dict[int, Path], channel: str) -> Optional[Fingerprints]:
    """The records of `channel`'s interrupted epoch that this host's ranks (those that opened their
    FIFO 0 at `prefixes`) consumed before a restart, as each left them before opening it
    (smtrain.pipes, from the checkpoint it restored); None where none did."""
    found = {}
    for rank, prefix in prefixes.items():
        try:
            found[rank] = from_bytes(consumed_handoff(prefix).read_bytes())
        except FileNotFoundError:
            continue
    if not found:
        return None
    drop = Fingerprints(itertools.chain.from_iterable(found.values()))
    log(f"{channel}: resuming: the {drop.total} records local rank{'s' if len(found) > 1 else ''} "
        f"{', '.join(map(str, found))} consumed of the interrupted epoch are left out of FIFO 0")
    return drop


def run(data_dir: Path, channel: str, ranks: int, fmt: RecordFormat, rank_wait_s: float,
        source_wait_s: float, epochs: Optional[int] = None, restarts: Optional[Restarts] = None) -> None:
    """Deal epoch after epoch to the ranks that read epoch 0, leaving out of the first (FIFO 0: a
    restarted job's resumed epoch) what the ranks consumed before. Ends when no rank reads any more -
    or, with `restarts` (SageMaker's own FIFOs), waits then for a restart in place, whose ranks get
    SageMaker's next epoch as their FIFO 0 (smtrain.data.demux_restarts)."""
    folder = demux_folder(data_dir)
    folder.mkdir(parents=True, exist_ok=True)
    for r in range(ranks):  # an earlier attempt's (a restart in place): this one's ranks start after us
        rank_ended_marker(folder, r).unlink(missing_ok=True)
        consumed_handoff(demux_prefix(data_dir, channel, r)).unlink(missing_ok=True)
    readers: Optional[list[int]] = None
    drop: Optional[Fingerprints] = None
    stop = restarts.check if restarts is not None else (lambda: False)
    source, epoch = 0, 0  # SageMaker's epoch FIFO (its number), and the ranks'
    while epochs is None or source < epochs:
        targets = {r: Path(f"{demux_prefix(data_dir, channel, r)}_{epoch}")
                   for r in (range(ranks) if readers is None else readers)}
        for t in targets.values():
            t.unlink(missing_ok=True)
            os.mkfifo(t)
        if restarts is not None:
            restarts.made()
        result: Optional[EpochResult] = None
        try:
            opened = None
            if readers is None:
                opened = settle_readers(targets, {r: rank_ended_marker(folder, r) for r in targets}, stop=stop)
                readers = sorted(opened)
                drop = consumed_before_restart({r: demux_prefix(data_dir, channel, r) for r in readers}, channel)
                if not stop():
                    log(f"{channel}: read by local rank{'s' if len(readers) > 1 else ''} {', '.join(map(str, readers))}"
                        if readers else f"{channel}: no local rank reads it; its FIFO is left unopened")
            if readers and not stop():
                result = demux_epoch(data_dir / f"{channel}_{source}", {r: targets[r] for r in readers}, fmt,
                                     rank_wait_s, source_wait_s, drop if epoch == 0 else None, opened, restarts)
            else:
                for fd in (opened or {}).values():
                    os.close(fd)
        finally:
            for t in targets.values():
                t.unlink(missing_ok=True)
            if restarts is not None:
                restarts.released()
        if result is not None and (result.records or not stop()):  # not the epoch a restart ended unread
            _log_epoch(channel, epoch, ranks, result, drop)
            source += result.source_read
            readers = [r for r in readers or () if r not in result.dropped]
        if readers and not stop():
            epoch += 1
            continue
        if restarts is None:
            if result is not None:
                log(f"{channel}: no rank reads it any more")
            return
        restarts.wait()
        restarts.begin(source)
        readers, drop, epoch = None, None, 0


def _log_epoch(channel: str, epoch: int, ranks: int, result: EpochResult, drop: Optional[Fingerprints]) -> None:
    if not result.records:
        log(f"{channel} epoch {epoch}: no rank read it")
    elif result.passed_bytes is not None:
        log(f"{channel} epoch {epoch}: passed {result.passed_bytes} bytes to rank {next(iter(result.records))}")
    else:
        log(f"{channel} epoch {epoch}: dealt {sum(result.records.values())} records as {list(result.records.values())}"
            + (f" to ranks {list(result.records)}" if list(result.records) != list(range(ranks)) else "")
            + (f"; {result.left_over} left over at the end (fewer than one per rank) were not dealt"
               if result.left_over else "")
            + (f"; left out {drop.dropped} consumed before the restart" if drop is not None and epoch == 0 else ""))
    if drop is not None and epoch == 0 and drop.missing:
        log(f"{channel}: {drop.missing} of the {drop.total} records consumed before the restart did not come "
            "again in FIFO 0 (did the data change?)")


def main(argv: Optional[Sequence[str]] = None) -> int:
    """`python -m smtrain.data.demux`: deal one channel's FIFO to this host's ranks, epoch after epoch."""
    parser = argparse.ArgumentParser(prog="python -m smtrain.data.demux", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, type=Path)
    parser.add_argument("--channel", required=True)
    parser.add_argument("--ranks", required=True, type=int)
    parser.add_argument("--format", default="tfrecord")
    parser.add_argument("--epochs", type=int, default=None, help="default: until stopped")
    parser.add_argument("--rank-wait", type=float, default=300.0, help="seconds a rank gets to open its FIFO")
    parser.add_argument("--source-wait", type=float, default=7 * 24 * 3600.0)
    parser.add_argument("--restartable", action="store_true",
                        help="SageMaker's own FIFOs: read each to its end and serve restarts in place (SIGUSR1)")
    args = parser.parse_args(argv)
    set_prefix(f"[demux {args.channel}] ")
    restarts = Restarts(args.data, args.channel, args.ranks) if args.restartable else None
    if restarts is not None:
        restarts.install()
    try:
        run(args.data, args.channel, args.ranks, RecordFormat.parse(args.format), args.rank_wait, args.source_wait,
            args.epochs, restarts)
    except (PipeError, ValueError) as e:
        log(f"error: {e}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
