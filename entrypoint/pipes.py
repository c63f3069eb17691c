"""Reading Pipe-mode channels from a training program, with current TensorFlow.

SageMaker's PipeModeDataset ended with TF 2.14, and `tf.data.TFRecordDataset` cannot read a FIFO
("Illegal seek"). This module reads the FIFOs itself:

    from entrypoint import pipes
    for record in pipes.records("train", epoch=0):    # bytes, one record at a time, CRCs checked
        ...
    ds = pipes.dataset("train", epochs=3)              # tf.data.Dataset of scalar tf.string
    ds = ds.map(parse_fn).batch(64)

Each rank reads its own FIFO sequence: `$SM_PIPE_<CHANNEL>_<epoch>` (set by `train`; under
Horovod every local rank gets its own). The record format comes from `$SM_PIPE_FORMAT_<CHANNEL>`
(tfrecord, recordio or lines), unless given.
"""
from __future__ import annotations

import fcntl
import os
import select
import time
from typing import Iterator, Mapping, Optional

from .records import CorruptRecord, RecordFormat, RecordSplitter

DEFAULT_WAIT_S = 300.0  # for a FIFO to appear and its writer to connect
CHUNK = 1 << 20


class PipeError(RuntimeError):
    """A Pipe-mode channel could not be read: missing FIFO, no writer, corrupt or truncated data."""


def fifo_prefix(channel: str, environ: Optional[Mapping[str, str]] = None) -> str:
    environ = os.environ if environ is None else environ
    name = f"SM_PIPE_{channel.upper()}"
    if name not in environ:
        raise PipeError(f"channel {channel!r}: {name} is not set; is the channel in Pipe mode?")
    return environ[name]


def record_format(channel: str, environ: Optional[Mapping[str, str]] = None) -> RecordFormat:
    environ = os.environ if environ is None else environ
    text = environ.get(f"SM_PIPE_FORMAT_{channel.upper()}", RecordFormat.TFRECORD.value)
    try:
        return RecordFormat.parse(text)
    except ValueError as e:
        raise PipeError(f"channel {channel!r}: {e}") from None


def open_fifo(path: str, timeout: float) -> int:
    """Open a FIFO for reading once it exists and its writer has connected; bounded by `timeout`."""
    deadline = time.monotonic() + timeout
    delay = 0.005
    while not os.path.exists(path):
        if time.monotonic() >= deadline:
            raise PipeError(f"{path}: no such FIFO after {timeout:g} s (is the channel in Pipe mode, and fed?)")
        time.sleep(delay)
        delay = min(delay * 2, 0.2)
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN | select.POLLHUP)
        # Linux reports neither until a writer has connected: data (POLLIN) or an empty epoch (POLLHUP).
        if not poller.poll(max(0.0, deadline - time.monotonic()) * 1000):
            raise PipeError(f"{path}: nobody wrote to the FIFO within {timeout:g} s")
        fcntl.fcntl(fd, fcntl.F_SETFL, fcntl.fcntl(fd, fcntl.F_GETFL) & ~os.O_NONBLOCK)
    except BaseException:
        os.close(fd)
        raise
    return fd


def read_records(fd: int, fmt: RecordFormat, where: str, check_crc: bool = True) -> Iterator[bytes]:
    """Records from an open stream until EOF; corrupt or truncated data raises PipeError naming `where`."""
    splitter = RecordSplitter(fmt, check_crc=check_crc)
    try:
        while chunk := os.read(fd, CHUNK):
            splitter.feed(chunk)
            yield from splitter.records()
        last = splitter.finish()
        if last is not None:
            yield last
    except CorruptRecord as e:
        raise PipeError(f"{where}: {e}") from None


def records(
    channel: str,
    epoch: int = 0,
    fmt: Optional[RecordFormat] = None,
    timeout: float = DEFAULT_WAIT_S,
    environ: Optional[Mapping[str, str]] = None,
) -> Iterator[bytes]:
    """The records of one epoch of this rank's `channel`."""
    path = f"{fifo_prefix(channel, environ)}_{epoch}"
    fmt = fmt or record_format(channel, environ)
    fd = open_fifo(path, timeout)
    try:
        yield from read_records(fd, fmt, f"channel {channel!r} epoch {epoch} ({path})")
    finally:
        os.close(fd)


def read_epochs(
    channel: str,
    count: int,
    start: int = 0,
    fmt: Optional[RecordFormat] = None,
    timeout: float = DEFAULT_WAIT_S,
    environ: Optional[Mapping[str, str]] = None,
) -> Iterator[bytes]:
    """The records of `count` epochs, one after the other."""
    for epoch in range(start, start + count):
        yield from records(channel, epoch, fmt, timeout, environ)


def dataset(
    channel: str,
    epochs: int = 1,
    start: int = 0,
    fmt: Optional[RecordFormat] = None,
    timeout: float = DEFAULT_WAIT_S,
):  # -> tf.data.Dataset (TensorFlow is imported only here)
    """A `tf.data.Dataset` of scalar `tf.string` records over `epochs` epochs from `start`."""
    import tensorflow as tf

    fmt = fmt or record_format(channel)
    prefix = fifo_prefix(channel)
    environ = {f"SM_PIPE_{channel.upper()}": prefix}

    def generate():
        yield from read_epochs(channel, epochs, start, fmt, timeout, environ)

    return tf.data.Dataset.from_generator(generate, output_signature=tf.TensorSpec(shape=(), dtype=tf.string))
