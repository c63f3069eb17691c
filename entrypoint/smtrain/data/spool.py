"""A tf.data source's spool of a Pipe-mode channel (smtrain.pipes.dataset without the native reader):
whole, CRC-checked records copied from the FIFOs into chunk files in shared memory, which
TFRecordDataset reads one after the other while a thread fills the next."""
from __future__ import annotations

import os
import queue
import shutil
import threading
from pathlib import Path
from typing import Callable, Iterator, Sequence

from ..common.scratch import make_scratch_dir, shm_folder
from ..wire.record_format import RecordFormat
from .fifo import PipeError
from .record_reader import CorruptRecord, RecordSplitter, write_spans

__all__ = ["spool_chunks", "spool_folder"]


def spool_chunks(
    channel: str,
    epochs: Sequence[int],
    open_epoch: Callable[[int], tuple[int, str]],
    folder: Path,
    chunk_bytes: int,
    fmt: RecordFormat,
    alive: Callable[[], None] = lambda: None,
    ahead: int = 2,
    skip_corrupt: int = 0,
) -> Iterator[str]:
    """Copy whole, CRC-checked records from each epoch's FIFO (`open_epoch(epoch)`: its descriptor, and how
    errors name it) into chunk files of about `chunk_bytes` under `folder` (a thread runs up to `ahead`
    chunks ahead, calling `alive` as records come); yield each file's name, deleting the one before. At
    most `ahead` + 2 chunks exist at once."""
    chunks: queue.Queue = queue.Queue(maxsize=ahead)
    stop = threading.Event()

    def spool() -> None:
        index, out, size = 0, -1, 0
        try:
            for epoch in epochs:
                fd, where = open_epoch(epoch)
                splitter = RecordSplitter(fmt, skip_corrupt=skip_corrupt)  # errors name the channel and epoch
                try:
                    while True:
                        got = splitter.fill_from(fd)
                        spans = splitter.frame_spans()
                        if not spans:
                            if got:
                                continue  # not one whole record yet
                            splitter.finish()  # the end of the epoch: raises for a truncated record
                            break
                        if out < 0:
                            out = os.open(folder / f"chunk-{index:06d}.tfrecord", os.O_WRONLY | os.O_CREAT, 0o600)
                        with splitter.view() as view:
                            write_spans(out, view, spans)
                        alive()
                        size += spans[-1][1] - spans[0][0]
                        if size >= chunk_bytes:
                            os.close(out)
                            chunks.put(str(folder / f"chunk-{index:06d}.tfrecord"))
                            index, out, size = index + 1, -1, 0
                        if stop.is_set():
                            return
                except CorruptRecord as e:
                    raise PipeError(f"{where}: {e}") from None
                finally:
                    os.close(fd)
            if out >= 0:
                os.close(out)
                chunks.put(str(folder / f"chunk-{index:06d}.tfrecord"))
            chunks.put(None)
        except BaseException as e:  # handed to the consumer, who raises it after the records before it
            if out >= 0:
                os.close(out)
                chunks.put(str(folder / f"chunk-{index:06d}.tfrecord"))
            chunks.put(e)

    threading.Thread(target=spool, name=f"pipe-spool-{channel}", daemon=True).start()
    previous = None
    try:
        while (item := chunks.get()) is not None:
            if isinstance(item, BaseException):
                raise item
            if previous:
                os.unlink(previous)
            previous = item
            yield item
    finally:
        stop.set()
        shutil.rmtree(folder, ignore_errors=True)


def spool_folder(channel: str) -> Path:
    """A fresh folder in shared memory (a file system where it has room) for one dataset's chunks;
    those a killed reader left are removed first (smtrain.common.scratch)."""
    base = shm_folder()
    try:
        usable = base is not None and shutil.disk_usage(base).free > (256 << 20)
    except OSError:
        usable = False
    return make_scratch_dir(f"smtrain-pipe-{channel}-", base if usable else None)
