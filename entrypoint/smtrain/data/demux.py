"""The host's Pipe-mode demultiplexer: one channel's FIFO, dealt to the host's P local ranks.

Horovod ranks on one host must not share a FIFO. When SageMaker gives one FIFO per epoch for a
channel, `train` starts this process per channel; it reads `<data>/<C>_<e>` and deals whole
records round-robin to `<data>/.smtrain-pipes/<C>-<r>_<e>`, which local rank r reads as its own
channel. Every rank gets the same number of records in an epoch: the records are dealt in whole
rounds of P, and the at most P-1 records left at the end of an epoch are dropped and reported
(a rank that took one more step than the others would leave them waiting in a collective
operation; carrying them into the next epoch would break the count-based resume of a checkpoint). Records are passed on as framed, so each rank's reader still
checks their CRCs. Writes block when a rank's pipe is full (back-pressure, no unbounded buffer);
every rank's FIFO is closed at the end of each epoch; a rank that never opens its FIFO, or dies,
is dropped after a bounded wait instead of hanging the others.

    python -m smtrain.data.demux --data /opt/ml/input/data --channel train --ranks 4 --format tfrecord
"""
from __future__ import annotations

import argparse
import errno
import fcntl
import itertools
import os
import sys
import time
from pathlib import Path
from typing import NamedTuple, Optional, Sequence

from ..common.console import log, set_prefix
from ..pipes import PipeError, open_fifo
from .records import CorruptRecord, RecordFormat, RecordSplitter, write_spans

FOLDER = ".smtrain-pipes"
PIPE_SIZE = 1 << 20  # per rank: smooths out round-robin without holding much
F_SETPIPE_SZ = 1031


class EpochResult(NamedTuple):
    records: tuple[int, ...]  # records dealt to each rank
    dropped: tuple[int, ...]  # ranks that never opened their FIFO or went away
    left_over: int = 0  # records at the epoch's end too few for one more round, not dealt


def rank_prefix(data_dir: Path, channel: str, local_rank: int) -> Path:
    return data_dir / FOLDER / f"{channel}-{local_rank}"


def _open_target(path: Path, deadline: float) -> Optional[int]:
    """Open a rank's FIFO for writing once the rank has opened it; None if it has not by `deadline`."""
    while True:
        try:
            fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        except OSError as e:
            if e.errno != errno.ENXIO or time.monotonic() >= deadline:
                return None
            time.sleep(0.005)
            continue
        os.set_blocking(fd, True)
        _enlarge(fd)
        return fd


def _enlarge(fd: int) -> None:
    """A FIFO's buffer to PIPE_SIZE."""
    try:
        fcntl.fcntl(fd, F_SETPIPE_SZ, PIPE_SIZE)
    except OSError:
        pass  # above the system's pipe-max-size: the default size still works


def demux_epoch(source: Path, targets: Sequence[Path], fmt: RecordFormat, rank_wait_s: float,
                source_wait_s: float) -> EpochResult:
    deadline = time.monotonic() + rank_wait_s
    fds: list[Optional[int]] = [_open_target(t, deadline) for t in targets]
    counts = [0] * len(targets)
    for rank, fd in enumerate(fds):
        if fd is None:
            log(f"{targets[rank].name}: rank {rank} did not open its FIFO within {rank_wait_s:g} s; dropping it")
    try:
        src = open_fifo(str(source), source_wait_s)
    except PipeError:
        for fd in fds:
            if fd is not None:
                os.close(fd)
        raise
    _enlarge(src)  # fewer, larger reads from the source: SageMaker's FIFO has the default 64 KiB
    splitter = RecordSplitter(fmt, check_crc=False)  # the ranks check CRCs; here only framing matters
    live = [r for r, fd in enumerate(fds) if fd is not None]
    turn = itertools.cycle(live)
    left_over = 0
    try:
        while live and splitter.fill_from(src):
            spans: dict[int, list[tuple[int, int]]] = {}
            found = splitter.frame_spans()
            whole = len(found) - len(found) % len(live)  # whole rounds only: equal counts per rank
            if whole < len(found):
                splitter.rewind(found[whole][0])  # an unfinished round waits for more records
            for span in found[:whole]:
                rank = next(turn)
                spans.setdefault(rank, []).append(span)
                counts[rank] += 1
            with splitter.view() as view:
                for rank, rank_spans in spans.items():
                    try:
                        write_spans(fds[rank], view, rank_spans)
                    except BrokenPipeError:
                        log(f"{targets[rank].name}: rank {rank} went away; dropping it")
                        os.close(fds[rank])
                        fds[rank] = None
                        live.remove(rank)
                        turn = itertools.cycle(live) if live else turn
        left_over = len(splitter.frame_spans())
        splitter.finish()
    except CorruptRecord as e:
        # The ranks must not take a cut-short epoch for a whole one: the next rank gets the bad bytes,
        # so its own reader fails with a clear error, and the job with it.
        log(f"{source}: {e}; passing the rest to rank {live[0] if live else '-'}, whose reader will fail")
        if live:
            with splitter.view() as view:
                try:
                    write_spans(fds[next(turn)], view, [splitter.leftover_span()])
                except BrokenPipeError:
                    pass
    finally:
        os.close(src)
        for fd in fds:
            if fd is not None:
                os.close(fd)
    return EpochResult(tuple(counts), tuple(r for r, fd in enumerate(fds) if fd is None), left_over)


def run(data_dir: Path, channel: str, ranks: int, fmt: RecordFormat, rank_wait_s: float,
        source_wait_s: float, epochs: Optional[int] = None) -> None:
    (data_dir / FOLDER).mkdir(parents=True, exist_ok=True)
    for epoch in itertools.count() if epochs is None else range(epochs):
        targets = [Path(f"{rank_prefix(data_dir, channel, r)}_{epoch}") for r in range(ranks)]
        for t in targets:
            t.unlink(missing_ok=True)
            os.mkfifo(t)
        try:
            result = demux_epoch(data_dir / f"{channel}_{epoch}", targets, fmt, rank_wait_s, source_wait_s)
        finally:
            for t in targets:
                t.unlink(missing_ok=True)
        log(f"{channel} epoch {epoch}: dealt {sum(result.records)} records as {list(result.records)}"
            + (f"; {result.left_over} left over at the end (fewer than one per rank) were not dealt"
               if result.left_over else ""))


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m smtrain.data.demux", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", required=True, type=Path)
    parser.add_argument("--channel", required=True)
    parser.add_argument("--ranks", required=True, type=int)
    parser.add_argument("--format", default="tfrecord")
    parser.add_argument("--epochs", type=int, default=None, help="default: until stopped")
    parser.add_argument("--rank-wait", type=float, default=300.0, help="seconds a rank gets to open its FIFO")
    parser.add_argument("--source-wait", type=float, default=7 * 24 * 3600.0)
    args = parser.parse_args(argv)
    set_prefix(f"[demux {args.channel}] ")
    try:
        run(args.data, args.channel, args.ranks, RecordFormat.parse(args.format), args.rank_wait, args.source_wait,
            args.epochs)
    except (PipeError, ValueError) as e:
        log(f"error: {e}")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
