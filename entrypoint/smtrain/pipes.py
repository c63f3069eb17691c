"""Reading Pipe-mode channels from a training program, with current TensorFlow.

SageMaker's PipeModeDataset ended with TF 2.14, and `tf.data.TFRecordDataset` cannot read a FIFO
("Illegal seek"). This module reads the FIFOs itself (`dataset` through smtrain's native tf.data op
where it is built, smtrain.data.native):

    from smtrain import pipes
    for record in pipes.records("train", epoch=0):    # bytes, one record at a time, CRCs checked
        ...
    ds = pipes.dataset("train", epochs=3)              # tf.data.Dataset of scalar tf.string
    ds = ds.map(parse_fn).batch(64)

Each rank reads its own FIFO sequence: `$SM_PIPE_<CHANNEL>_<epoch>` (set by `train`; under
Horovod every local rank gets its own). The record format comes from `$SM_PIPE_FORMAT_<CHANNEL>`
(tfrecord, recordio or lines), unless given.
"""
from __future__ import annotations

import os
import sys
from array import array
from typing import Callable, Iterable, Iterator, Mapping, Optional, Sequence, TypeVar, Union

from . import progress
from .common.frameworks import running_horovod
from .data.fingerprints import fingerprint, to_bytes
from .data.journal import ReadJournal
from .data.native import NativePipes, native_pipes
from .data.fifo import PipeError, open_fifo
from .data.record_reader import CHUNK, CorruptRecord, RecordSplitter
from .data.spool import spool_chunks, spool_folder
from .wire.pipe_assignment import PipeMode, channel_mode, consumed_handoff, pipe_variable
from .wire.record_format import RecordFormat

__all__ = [
    "JOURNAL", "PipeError", "ReadJournal", "RecordFormat", "channel_format", "consumed_fingerprints", "dataset", "epoch_batches",
    "epochs_dataset", "equal_steps", "fifo_prefix", "read_epochs", "records", "resume_from", "shuffled",
]

Format = Union[str, RecordFormat, None]  # "tfrecord", "recordio", "lines"; None: the channel's own
DEFAULT_WAIT_S = 300.0
T = TypeVar("T")
_END = object()  # for a FIFO to appear and its writer to connect


def fifo_prefix(channel: str, environ: Optional[Mapping[str, str]] = None) -> str:
    """The channel's FIFO prefix for this rank (epoch e is `<prefix>_<e>`); PipeError when it is not a Pipe channel."""
    environ = os.environ if environ is None else environ
    name = pipe_variable("", channel)
    if name not in environ:
        raise PipeError(f"channel {channel!r}: {name} is not set; is the channel in Pipe mode?")
    return environ[name]


def channel_format(channel: str, record_format: Format = None, environ: Optional[Mapping[str, str]] = None) -> RecordFormat:
    """`record_format` as given ("tfrecord", "recordio", "lines" or a RecordFormat), else the
    channel's from `$SM_PIPE_FORMAT_<CHANNEL>`, else TFRecord."""
    if isinstance(record_format, RecordFormat):
        return record_format
    environ = os.environ if environ is None else environ
    text = record_format or environ.get(pipe_variable("FORMAT", channel), RecordFormat.TFRECORD.value)
    try:
        return RecordFormat.parse(text)
    except ValueError as e:
        raise PipeError(f"channel {channel!r}: {e}") from None


def read_batches(fd: int, fmt: RecordFormat, where: str, skip: int = 0, skip_corrupt: int = 0) -> Iterator[list[bytes]]:
    """Lists of records from an open stream until EOF (one list per read of up to 1 MiB), after
    dropping the first `skip` records unchecked; corrupt or truncated data raises PipeError naming
    `where`, after the whole records before it (up to `skip_corrupt` TFRecord records whose data CRC
    fails are dropped first)."""
    splitter = RecordSplitter(fmt, skip_corrupt=skip_corrupt)
    try:
        while skip and splitter.fill_from(fd):
            skip -= splitter.skip(skip)
        if skip:
            raise PipeError(f"{where}: the epoch ended {skip} records before the position to resume from")
        while splitter.fill_from(fd):
            batch = splitter.records()
            if batch:
                progress.alive()
                yield batch
        while batch := splitter.records():
            yield batch
        last = splitter.finish()
        if last is not None:
            yield [last]
    except CorruptRecord as e:
        raise PipeError(f"{where}: {e}") from None


def epoch_batches(
    channel: str,
    epoch: int = 0,
    record_format: Format = None,
    timeout: float = DEFAULT_WAIT_S,
    environ: Optional[Mapping[str, str]] = None,
    skip: int = 0,
    skip_corrupt: int = 0,
) -> Iterator[list[bytes]]:
    """The records of one epoch of this rank's `channel`, in lists as they arrive."""
    fmt = channel_format(channel, record_format, environ)
    fd, where = _open_epoch(channel, epoch, timeout, environ)
    try:
        yield from read_batches(fd, fmt, where, skip, skip_corrupt)
    finally:
        os.close(fd)


def _open_epoch(channel: str, epoch: int, timeout: float, environ: Optional[Mapping[str, str]]) -> tuple[int, str]:
    """The open FIFO of one epoch, and how errors name it."""
    path = f"{fifo_prefix(channel, environ)}_{epoch}"
    return open_fifo(path, timeout, CHUNK), f"channel {channel!r} epoch {epoch} ({path})"


def records(
    channel: str,
    epoch: int = 0,
    record_format: Format = None,
    timeout: float = DEFAULT_WAIT_S,
    environ: Optional[Mapping[str, str]] = None,
    skip: int = 0,
    reader_journal: "Optional[ReadJournal]" = None,
) -> Iterator[bytes]:
    """The records of one epoch of this rank's `channel`; `skip` drops that many first records
    without checking or copying them (to resume an epoch at a checkpoint's Pipe position).

    After a restart SageMaker feeds the channel from FIFO epoch 0 again: read FIFO 0 with `skip` as
    the rest of the checkpoint's epoch (see smtrain.checkpoints.PipePosition). With a ShuffleConfig
    that FIFO comes in another order: the reader then keeps the fingerprints of the records it
    delivers (smtrain.data.fingerprints; the checkpoint stores them), and on resuming drops the
    records whose fingerprints the restored checkpoint holds instead of the first `skip`. The
    fingerprints go to `reader_journal` (by default this process's `JOURNAL`)."""
    environ = os.environ if environ is None else environ
    if not shuffled(channel, environ):
        for batch in epoch_batches(channel, epoch, record_format, timeout, environ, skip):
            yield from batch
        return
    demuxed = channel_mode(channel, environ) is PipeMode.DEMUX  # its demultiplexer drops them for every rank
    journal, drop = (JOURNAL if reader_journal is None else reader_journal).start(channel, epoch, skip, demuxed)
    if demuxed and journal.carried:
        _hand_to_demultiplexer(fifo_prefix(channel, environ), journal.fingerprints[:journal.carried])
    # Without fingerprints to resume from, the first `skip` count as consumed: kept, not delivered.
    by_count = skip if journal.carried == 0 else 0
    append = journal.fingerprints.append
    for batch in epoch_batches(channel, epoch, record_format, timeout, environ):
        for record in batch:
            key = fingerprint(record)
            if drop is not None and drop.take(key):
                continue
            append(key)
            if by_count:
                by_count -= 1
                continue
            yield record
    if by_count:
        raise PipeError(f"channel {channel!r} epoch {epoch}: the epoch ended {by_count} records before the position "
                        "to resume from")
    if drop is not None and drop.missing:
        sys.stderr.write(f"[smtrain.pipes] channel {channel!r}: {drop.missing} of the {drop.total} records consumed "
                         "before the restart did not come again in this epoch (did the data change?)\n")


def _hand_to_demultiplexer(prefix: str, consumed: "array[int]") -> None:
    """Leave this rank's consumed fingerprints where its host's demultiplexer reads them before it
    deals FIFO 0 (it waits for every rank to open its FIFO, which this rank does next); whole, by a
    rename. Every host's demultiplexer learns its own ranks' from them, in a job across hosts too."""
    path = consumed_handoff(prefix)
    temporary = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    temporary.write_bytes(to_bytes(consumed))
    os.replace(temporary, path)


# This process's reader journal: what smtrain.checkpoints stores and restores, unless handed another.
JOURNAL = ReadJournal()


def shuffled(channel: str, environ: Optional[Mapping[str, str]] = None) -> bool:
    """Whether the channel has a ShuffleConfig, as `train` exported it with the channel
    (`SM_PIPE_SHUFFLED_<C>`; a per-rank channel read as `C` has its member's)."""
    environ = os.environ if environ is None else environ
    return environ.get(pipe_variable("SHUFFLED", channel)) == "1"


def resume_from(channel: str, fingerprints: "array[int]") -> None:
    """`JOURNAL.resume_from`: the next `records(channel, 0, skip=len(fingerprints))` drops these records."""
    JOURNAL.resume_from(channel, fingerprints)


def consumed_fingerprints(channel: str, consumed: int) -> Optional["array[int]"]:
    """`JOURNAL.consumed`: the fingerprints of the first `consumed` records this rank read of a shuffled channel."""
    return JOURNAL.consumed(channel, consumed)


def read_epochs(
    channel: str,
    count: int,
    start: int = 0,
    record_format: Format = None,
    timeout: float = DEFAULT_WAIT_S,
    environ: Optional[Mapping[str, str]] = None,
) -> Iterator[bytes]:
    """The records of `count` epochs, one after the other."""
    for epoch in range(start, start + count):
        yield from records(channel, epoch, record_format, timeout, environ)


def dataset(
    channel: str,
    epochs: int = 1,
    start: int = 0,
    record_format: Format = None,
    timeout: float = DEFAULT_WAIT_S,
    chunk_mb: int = 16,
    batch_size: int = 0,
    drop_remainder: bool = False,
):  # -> tf.data.Dataset (TensorFlow is imported only here)
    """A `tf.data.Dataset` of scalar `tf.string` records over `epochs` epochs from `start`; with
    `batch_size` N, of 1-D `tf.string` tensors of N records (the last may be shorter unless
    `drop_remainder`), as `.batch(N, drop_remainder)` makes them, batches running on across epochs.

    Read by smtrain's native tf.data op (smtrain.data.native) where it is built, which also frames
    the batches in C++: for small records, batch here and parse the whole batch at once
    (`tf.io.parse_example`), rather than `.batch()` a dataset of single records. Else through
    Python: TFRecord channels spool whole CRC-checked records from the FIFO into chunk files of
    `chunk_mb` in shared memory (bounded: a few chunks at a time) that `tf.data.TFRecordDataset`
    reads; other formats cross from Python in batches through `from_generator`."""
    fmt = channel_format(channel, record_format)
    return epochs_dataset(channel, range(start, start + epochs), fmt, fifo_prefix(channel), timeout, chunk_mb,
                          batch_size=batch_size, drop_remainder=drop_remainder)


Epochs = Union[Sequence[int], Callable[[], Iterable[int]]]


def epochs_dataset(channel: str, epochs: Epochs, fmt: RecordFormat, prefix: str,
                   timeout: float = DEFAULT_WAIT_S, chunk_mb: int = 16, skip_corrupt: int = 0,
                   batch_size: int = 0, drop_remainder: bool = False):
    """The records of the FIFOs `<prefix>_<epoch>` for `epochs`: a sequence, or a function that gives
    the epochs each time an iterator of the dataset is made (sagemaker_tensorflow.PipeModeDataset).
    `batch_size` > 0: batches of records, as `dataset`'s."""
    if batch_size < 0:
        raise PipeError(f"channel {channel!r}: batch_size must be >= 0, got {batch_size}")
    native = native_pipes()
    if native is not None and batch_size and not callable(epochs):
        return native.dataset(prefix, channel, list(epochs), fmt, timeout, skip_corrupt=skip_corrupt,
                              batch_size=batch_size, drop_remainder=drop_remainder)
    records = _records_dataset(native, channel, epochs, fmt, prefix, timeout, chunk_mb, skip_corrupt)
    return records.batch(batch_size, drop_remainder=drop_remainder) if batch_size else records


def _records_dataset(native: Optional[NativePipes], channel: str, epochs: Epochs, fmt: RecordFormat, prefix: str,
                     timeout: float, chunk_mb: int, skip_corrupt: int):
    import tensorflow as tf

    if native is not None:
        if not callable(epochs):
            return native.dataset(prefix, channel, list(epochs), fmt, timeout, skip_corrupt=skip_corrupt)
        numbers = tf.data.Dataset.from_generator(lambda: list(epochs()), output_signature=tf.TensorSpec((), tf.int64))
        return numbers.flat_map(
            lambda epoch: native.dataset(prefix, channel, tf.reshape(epoch, [1]), fmt, timeout, skip_corrupt=skip_corrupt))

    epochs_now: Callable[[], Iterable[int]] = epochs if callable(epochs) else (lambda: epochs)
    environ = {pipe_variable("", channel): prefix}
    if fmt is RecordFormat.TFRECORD:
        def chunk_names():
            yield from spool_chunks(channel, list(epochs_now()), lambda epoch: _open_epoch(channel, epoch, timeout, environ),
                                    spool_folder(channel), chunk_mb << 20, fmt, progress.alive, skip_corrupt=skip_corrupt)

        names = tf.data.Dataset.from_generator(chunk_names, output_signature=tf.TensorSpec(shape=(), dtype=tf.string))
        return names.flat_map(tf.data.TFRecordDataset)  # one chunk after the other, each read whole

    def generate():
        for epoch in epochs_now():
            yield from epoch_batches(channel, epoch, fmt, timeout, environ, skip_corrupt=skip_corrupt)

    batches = tf.data.Dataset.from_generator(generate, output_signature=tf.TensorSpec(shape=(None,), dtype=tf.string))
    return batches.prefetch(2).unbatch()  # prefetch: the FIFO is read while the program computes


def equal_steps(batches: Iterable[T], name: str = "smtrain_equal_steps") -> Iterator[T]:
    """The batches of this rank for as long as every Horovod rank still has one: each rank takes the
    same number of steps, so none waits forever in a collective operation that the others never join.

    For ranks or hosts that receive different numbers of records in an epoch (ShardedByS3Key, per-rank
    channels of different sizes). The ranks that still had batches when the first ran out read the
    rest of theirs without yielding them (so the epoch's FIFO is drained and the next one can come;
    no record is trained twice, the skipped ones not at all this epoch). The cost: one
    allreduce of one integer per step (benchmarks/bench_no_hang.py measures the watchdog beside it). Without Horovod, or with
    one rank, the batches pass through unchanged.

        for batch in pipes.equal_steps(pipes.dataset("train").batch(64)):
            ...
    """
    hvd = running_horovod()
    if hvd is None:
        yield from batches
        return
    import tensorflow as tf

    iterator = iter(batches)
    taken = 0
    while True:
        batch = next(iterator, _END)
        everyone = int(hvd.allreduce(tf.constant(0 if batch is _END else 1, tf.int32), op=hvd.Min, name=name))
        if not everyone:
            if batch is not _END:
                skipped = 1 + sum(1 for _ in iterator)
                sys.stderr.write(f"[smtrain.pipes] equal_steps: another rank ran out of data after {taken} steps; "
                                 f"this rank skipped its last {skipped} batch(es) of the epoch\n")
            return
        taken += 1
        progress.step()
        yield batch  # type: ignore[misc]
