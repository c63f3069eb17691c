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

A channel dealt across the job's hosts (`--job`; FullyReplicated under MPI on several hosts: every host
receives the same stream): every host's demultiplexer deals it alike to the job's readers, which they agree
through the master before each attempt's first epoch (smtrain.data.job_dealing); this host's ranks get their
blocks, the other hosts' blocks go to /dev/null in the kernel, and a rank that goes away keeps its share.
After each epoch the master compares what the hosts dealt, and says where their streams differed.

A channel with a ShuffleConfig: after a restart, FIFO 0 comes in another order than the interrupted
epoch, so before dealing it the demultiplexer leaves out the records this host's ranks (dealt across the
job's hosts: the job's ranks, gathered by the master) consumed, whose
fingerprints (smtrain.data.fingerprints) each rank's reader leaves beside its FIFO before opening it
(`consumed_handoff`: from the checkpoint the program restored), and the ranks' readers skip nothing
more. It holds on every host of a job, and after a restart in place as after a spot restart.

    python -m smtrain.data.demux --data /opt/ml/input/data --channel train --ranks 4 --format tfrecord
"""
from __future__ import annotations

import argparse
import errno
import os
import sys
import time
from pathlib import Path
from typing import Callable, NamedTuple, Optional, Sequence

from ..common.console import log, set_prefix
from ..wire.pipe_assignment import JobAddress, consumed_handoff, demux_folder, demux_prefix, rank_ended_marker
from ..wire.record_format import RecordFormat
from .dealer import PIPE_SIZE, Dealer, drain
from .demux_restarts import Restarts, consumed_before_restart, wait_readable
from .fifo import PipeError, open_fifo, set_pipe_size
from .fingerprints import Fingerprints
from .job_dealing import JobDealt, JobLink, agree
from .record_reader import CorruptRecord

__all__ = ["EpochResult", "demux_epoch", "main", "run", "settle_readers"]


class EpochResult(NamedTuple):
    """How one epoch was dealt: records per rank, ranks dropped, records left over."""
    records: dict[int, int]  # records dealt to each reading rank of this host (nothing when passed through)
    dropped: tuple[int, ...]  # ranks that never opened their FIFO or went away
    left_over: int = 0  # records at the epoch's end too few for one more round, not dealt
    passed_bytes: Optional[int] = None  # one reader: the bytes passed to it (None: records were dealt)
    source_read: bool = True  # the source epoch was opened (and read to its end); False: left for the next
    job_records: Optional[int] = None  # dealt across the job's hosts: the records of the whole stream
    first: Optional[int] = None  # dealt across the job's hosts: the fingerprint of the stream's first record


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


def demux_epoch(source: Path, targets: dict[int, Path], fmt: RecordFormat, rank_wait_s: float,
                source_wait_s: float, drop: Optional[Fingerprints] = None,
                opened: Optional[dict[int, int]] = None, restarts: Optional[Restarts] = None,
                job: Optional[JobDealt] = None) -> EpochResult:
    """Deal one epoch to the ranks in `targets` (their FIFOs; those in `opened` already open for
    writing); `drop`: records to leave out (a resumed shuffled epoch's consumed ones). The source is
    opened only when some rank reads. With `restarts` (SageMaker's own FIFOs), a source once opened
    is read to its end whatever happens to the ranks, and a restart asked for ends the dealing. With
    `job`, the stream is dealt to the job's readers, of which `targets` are this host's."""
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
    if len(live) == 1 and drop is None and (job is None or len(job.readers) == 1):
        return _pass_through(src, live[0], fds, targets[live[0]].name, source, restarts, tuple(targets.values()))
    if job is None:
        dealt, names = fds, {r: t.name for r, t in targets.items()}
    else:  # the job's readers, by global rank: those of other hosts without a FIFO here
        dealt = {g: fds.get(g - job.first_rank) for g in job.readers}
        names = {g: targets[g - job.first_rank].name if g - job.first_rank in targets else f"rank {g}"
                 for g in job.readers}
    dealer = Dealer(source, src, dealt, names, fmt, splice=drop is None, stop=None if restarts is None else stop,
                    fixed=job is not None)
    try:
        if drop is not None:
            dealer.deal_kept(drop)
        else:
            dealer.deal_all()
    except CorruptRecord as e:
        dealer.pass_on_corrupt(e)
    finally:
        if job is not None:  # back to this host's local ranks
            for g, fd in dealt.items():
                if g - job.first_rank in fds:
                    fds[g - job.first_rank] = fd
        dropped = tuple(r for r, fd in fds.items() if fd is None)
        if restarts is not None:  # SageMaker's FIFO is never closed before its end
            dealer.close_ranks()
            restarts.released(targets.values())
            dealer.drain(stop)
        dealer.close()
    if job is None:
        return EpochResult(dealer.counts, dropped, dealer.left_over)
    counts = {g - job.first_rank: n for g, n in dealer.counts.items() if g - job.first_rank in targets}
    return EpochResult(counts, dropped, dealer.left_over, job_records=sum(dealer.counts.values()) + dealer.left_over,
                       first=dealer.first)


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


def run(data_dir: Path, channel: str, ranks: int, fmt: RecordFormat, rank_wait_s: float,
        source_wait_s: float, epochs: Optional[int] = None, restarts: Optional[Restarts] = None,
        job: Optional[JobAddress] = None) -> None:
    """Deal epoch after epoch to the ranks that read epoch 0, leaving out of the first (FIFO 0: a
    restarted job's resumed epoch) what the ranks consumed before. Ends when no rank reads any more -
    or, with `restarts` (SageMaker's own FIFOs), waits then for a restart in place, whose ranks get
    SageMaker's next epoch as their FIFO 0 (smtrain.data.demux_restarts). With `job`, the channel is
    dealt across the job's hosts: the readers, and what they consumed, are agreed with every host's
    demultiplexer through the master (smtrain.data.job_dealing) before each attempt's first epoch."""
    folder = demux_folder(data_dir)
    folder.mkdir(parents=True, exist_ok=True)
    for r in range(ranks):  # an earlier attempt's (a restart in place): this one's ranks start after us
        rank_ended_marker(folder, r).unlink(missing_ok=True)
        consumed_handoff(demux_prefix(data_dir, channel, r)).unlink(missing_ok=True)
    readers: Optional[list[int]] = None
    drop: Optional[Fingerprints] = None
    dealt: Optional[JobDealt] = None  # the job's readers, agreed
    link = JobLink(job, channel) if job is not None else None
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
                if link is not None and not stop():
                    dealt, drop = agree(link, readers, drop, stop)
            if readers and not stop():
                result = demux_epoch(data_dir / f"{channel}_{source}", {r: targets[r] for r in readers}, fmt,
                                     rank_wait_s, source_wait_s, drop if epoch == 0 else None, opened, restarts, dealt)
                if link is not None and result.job_records is not None:
                    link.epoch_dealt(epoch, result.first, result.job_records)
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
        if link is not None:
            link.close()
        if restarts is None:
            if result is not None:
                log(f"{channel}: no rank reads it any more")
            return
        restarts.wait()
        restarts.begin(source)
        readers, drop, dealt, epoch = None, None, None, 0


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
            + (f"; left out {drop.dropped} consumed before the restart" if drop is not None and epoch == 0 else "")
            + (f" (of the {result.job_records} records the job's hosts deal alike)" if result.job_records is not None else ""))
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
    parser.add_argument("--job", type=JobAddress.parse, default=None, metavar="HOST:PORT:THIS_HOST:HOSTS:FIRST_RANK",
                        help="deal the channel across the job's hosts, agreed through the master's control server")
    args = parser.parse_args(argv)
    set_prefix(f"[demux {args.channel}] ")
    restarts = Restarts(args.data, args.channel, args.ranks) if args.restartable else None
    if restarts is not None:
        restarts.install()
    try:
        run(args.data, args.channel, args.ranks, RecordFormat.parse(args.format), args.rank_wait, args.source_wait,
            args.epochs, restarts, args.job)
    except (PipeError, ValueError) as e:
        log(f"error: {e}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
