"""PipeModeDataset with the original constructor and semantics, on smtrain's reader.

- The channel must be a Pipe channel of `<config_dir>/inputdataconfig.json`
  (PipeModeDatasetException otherwise, as before), or a File channel that `train` streams as Pipe
  mode (SDK local mode: smtrain.plan.localmode); the default config_dir follows
  $SM_INPUT_CONFIG_DIR, i.e. wherever `train` found the job's config.
- Each new iterator of the dataset reads the channel's next FIFO, `<channel>_<N>`: N is kept in
  `<state_dir>/.<fifo name>-pipe_mode-state` under a file lock, so `.repeat()` reads epoch after
  epoch and a second iterator in the same job takes the next epoch, not the first again. The
  default state_dir is `pipe_state` in the job's base folder ($SAGEMAKER_BASE_DIR, /opt/ml), which
  `train` empties before the program starts: a job run again on the same machine starts at FIFO 0.
- record_format: 'RecordIO', 'TFRecord' or 'TextLine' (case-insensitive). TFRecord CRCs are checked;
  `max_corrupted_records_to_skip` TFRecord records whose data CRC fails are dropped before one is
  an error. Errors name the channel, the epoch's FIFO and the byte offset.
- Under `train`, each rank reads its own FIFOs ($SM_PIPE_<CHANNEL>, one per Horovod local rank,
  fed by the demultiplexer): `.shard()` is not needed. A `.shard(n, i)` on the dataset that asks
  for what the demultiplexers already deal - each rank's share (n the job's ranks, i this rank), or,
  where the channel is dealt across the job's hosts, each host's (n the hosts, i this host) - is
  that share already: it is ignored, and the log says so; any other is applied. With a `pipe_dir`
  other than the default, the FIFOs are `<pipe_dir>/<channel>_<N>` as before.
- benchmark=True prints each epoch's record count, bytes and rate to stdout at its end, and every
  `benchmark_records_interval` records when that is > 0.
"""
from __future__ import annotations

import fcntl
import json
import os
import sys
import time
from pathlib import Path
from typing import Iterator

from smtrain.wire.pipe_assignment import pipe_variable
from smtrain.wire.record_format import RecordFormat
from smtrain.pipes import DEFAULT_WAIT_S, epochs_dataset

__all__ = ["PipeModeDataset", "PipeModeDatasetException"]

DEFAULT_PIPE_DIR = "/opt/ml/input/data"
DEFAULT_CONFIG_DIR = "/opt/ml/input/config"
DEFAULT_STATE_DIR = "/opt/ml/pipe_state"
FORMATS = {"recordio": RecordFormat.RECORDIO, "tfrecord": RecordFormat.TFRECORD, "textline": RecordFormat.LINES}


class PipeModeDatasetException(Exception):
    """An error using a PipeModeDataset."""


class PipeIndex:
    """The channel's next FIFO number, shared by every iterator (and process) using `state_dir`."""

    def __init__(self, state_dir: str, fifo_name: str) -> None:
        Path(state_dir).mkdir(parents=True, exist_ok=True)
        self.state = Path(state_dir) / f".{fifo_name}-pipe_mode-state"
        self.lock = Path(state_dir) / f".{fifo_name}-pipe_mode-lock"

    def take(self) -> int:
        """The next FIFO number; the one after it for the next caller."""
        with open(self.lock, "a") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                index = int(self.state.read_text() or 0) if self.state.exists() else 0
                self.state.write_text(str(index + 1))
                return index
            finally:
                fcntl.flock(lock, fcntl.LOCK_UN)

    def next_epoch(self) -> range:
        """What one new iterator reads: the next FIFO."""
        epoch = self.take()
        return range(epoch, epoch + 1)


def _fifo_prefix(channel: str, pipe_dir: str) -> str:
    """This rank's FIFOs: train's assignment for the channel, unless another pipe_dir is given."""
    assigned = os.environ.get(pipe_variable("", channel))
    if assigned and os.path.normpath(pipe_dir) == DEFAULT_PIPE_DIR:
        return assigned
    return os.path.join(pipe_dir, channel)


def _benchmarked(channel: str, records: Iterator, every: int) -> Iterator:
    count, size, started = 0, 0, time.monotonic()
    for record in records:
        count += 1
        size += len(record)
        if every and count % every == 0:
            _report(channel, count, size, started)
        yield record
    _report(channel, count, size, started)


def _report(channel: str, count: int, size: int, started: float) -> None:
    took = max(time.monotonic() - started, 1e-9)
    sys.stdout.write(f"PipeModeDataset {channel}: {count} records, {size} bytes in {took:.3f} s "
                     f"({count / took:.0f} records/s, {size / took / 1e6:.1f} MB/s)\n")
    sys.stdout.flush()


def PipeModeDataset(channel: str, record_format: str = "RecordIO", state_dir: str = DEFAULT_STATE_DIR,
                    pipe_dir: str = DEFAULT_PIPE_DIR, config_dir: str = DEFAULT_CONFIG_DIR,
                    benchmark: bool = False, benchmark_records_interval: int = 0,
                    max_corrupted_records_to_skip: int = 0):  # -> tf.data.Dataset
    """A tf.data.Dataset of scalar tf.string records from a SageMaker Pipe-mode channel."""
    fmt = FORMATS.get(str(record_format).lower())
    if fmt is None:
        raise PipeModeDatasetException(f"record_format {record_format!r}: expected 'RecordIO', 'TFRecord' or 'TextLine'")
    if max_corrupted_records_to_skip < 0:
        raise PipeModeDatasetException(f"max_corrupted_records_to_skip must be >= 0, got {max_corrupted_records_to_skip}")
    if config_dir == DEFAULT_CONFIG_DIR:  # where train found the config (SAGEMAKER_BASE_DIR, local runs)
        config_dir = os.environ.get("SM_INPUT_CONFIG_DIR", config_dir)
    config_path = os.path.join(config_dir, "inputdataconfig.json")
    try:
        with open(config_path) as f:
            config = json.load(f)
    except (OSError, ValueError) as e:
        raise PipeModeDatasetException(f"{config_path}: cannot read the input data config: {e}") from None
    if channel not in config:
        raise PipeModeDatasetException(f"Channel {channel} not found in Training Job InputDataConfig ({config_path})")
    emulated = pipe_variable("", channel) in os.environ  # train streams a File channel's files (local mode)
    if str(config[channel].get("TrainingInputMode", "")).lower() != "pipe" and not emulated:
        raise PipeModeDatasetException(f"Channel {channel} is not a PipeMode channel ({config_path})")
    if state_dir == DEFAULT_STATE_DIR:  # under the job's base folder, which train clears of an earlier job's
        state_dir = os.path.join(os.environ.get("SAGEMAKER_BASE_DIR") or "/opt/ml", "pipe_state")
    prefix = _fifo_prefix(channel, pipe_dir)
    index = PipeIndex(state_dir, os.path.basename(prefix))
    dataset = epochs_dataset(channel, index.next_epoch, fmt, prefix, DEFAULT_WAIT_S,
                             skip_corrupt=max_corrupted_records_to_skip)
    if benchmark:
        import tensorflow as tf

        plain = dataset
        dataset = tf.data.Dataset.from_generator(
            lambda: _benchmarked(channel, (r.numpy() for r in plain), benchmark_records_interval),
            output_signature=tf.TensorSpec(shape=(), dtype=tf.string))
    return _dealt_shards(channel, dataset)


def _dealt_shards(channel: str, dataset):  # -> tf.data.Dataset
    """The dataset whose `.shard(n, i)` ignores a shard that the demultiplexers deal already (the module's
    docstring), where `train` deals the channel to the ranks."""
    dealt = os.environ.get(pipe_variable("DEALT", channel), "none")
    if dealt not in ("job", "host"):
        return dataset
    rank = (int(os.environ.get("SM_SIZE", "1")), int(os.environ.get("SM_RANK", "0")))  # the rank launcher's
    try:
        hosts = json.loads(os.environ.get("SM_HOSTS", "[]"))
        host = (len(hosts), hosts.index(os.environ.get("SM_CURRENT_HOST", "")))
    except ValueError:
        host = None
    applied = dataset.shard

    def shard(num_shards, index, name=None):  # -> tf.data.Dataset
        try:
            asked = (int(num_shards), int(index))
        except TypeError:  # tensors: applied as given
            asked = None
        if asked is not None and (asked == rank or (dealt == "job" and asked == host)):
            whose = "each rank's" if asked == rank else "each host's"
            sys.stderr.write(f"PipeModeDataset {channel}: .shard({asked[0]}, {asked[1]}) ignored: train deals {whose} "
                             "share of this channel already, so every record is read once an epoch (docs/guide.md, Pipe mode)\n")
            return dataset
        return applied(num_shards, index, name=name)

    dataset.shard = shard
    return dataset
