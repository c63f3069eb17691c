"""The local feeder: SageMaker's side of Pipe mode, so Pipe mode runs without SageMaker (whose SDK
local mode cannot do it).

For each Pipe channel it creates `input/data/<channel>_<epoch>` FIFOs one epoch after the other and
streams the channel's objects into each, whole and in order; with a ShuffleConfig seed, the order
of objects is shuffled anew for every epoch, reproducibly; with `S3DistributionType: ShardedByS3Key`
each host gets every N-th object (N hosts), from its place in the hosts. `train` runs it itself,
with `--emulate`, for File channels that it streams as Pipe mode (smtrain.plan.localmode).

    python -m smtrain.data.feeder --base /opt/ml --source train=/data/train --source eval=/data/eval.manifest --epochs 3

A source is a folder (every file below it, sorted), a glob pattern, or a manifest file: a JSON list
`[{"prefix": "/data/"}, "a.tfrecord", "b.tfrecord", ...]` as SageMaker's ManifestFile, which may
name an object more than once.
"""
from __future__ import annotations

import argparse
import errno
import glob
import json
import os
import random
import signal
import sys
import threading
import time
from pathlib import Path
from typing import Optional, Sequence

from ..config.load import load_config
from ..config.model import InputMode
from ..common.console import log, set_prefix
from ..errors import ConfigError
from .fifo import WriterStop

__all__ = ["SPLICE_CHUNK", "Feeder", "channel_objects", "epoch_order", "feed_channel", "host_share", "main"]

SPLICE_CHUNK = 1 << 20


def channel_objects(source: str) -> list[Path]:
    """The objects of a channel source, in SageMaker's order (sorted keys; a manifest's own order)."""
    path = Path(source)
    if path.is_dir():
        return sorted(p for p in path.rglob("*") if p.is_file())
    if path.is_file() and (path.suffix == ".manifest" or source.endswith(".json")):
        try:
            entries = json.loads(path.read_text())
        except (OSError, ValueError) as e:
            raise ConfigError(f"manifest {path}: not a JSON list: {e}") from None
        if not isinstance(entries, list) or not entries or not isinstance(entries[0], dict) or "prefix" not in entries[0]:
            raise ConfigError(f'manifest {path}: expected [{{"prefix": "/folder/"}}, "key", ...]')
        prefix = str(entries[0]["prefix"])
        return [Path(prefix) / str(key) for key in entries[1:]]
    if path.is_file():
        return [path]
    matches = sorted(Path(p) for p in glob.glob(source, recursive=True) if Path(p).is_file())
    if not matches:
        raise ConfigError(f"channel source {source!r}: no folder, file, manifest or glob matches")
    return matches


def host_share(objects: Sequence[Path], host_index: int, host_count: int) -> list[Path]:
    """ShardedByS3Key: this host's objects (every host_count-th, from its index in the hosts)."""
    return list(objects[host_index::host_count])


def epoch_order(objects: Sequence[Path], seed: Optional[int], epoch: int) -> list[Path]:
    """Objects in the order of one epoch: as given without a seed, else shuffled by (seed, epoch)."""
    order = list(objects)
    if seed is not None:
        random.Random(f"{seed}:{epoch}").shuffle(order)
    return order


def _stream(obj: Path, fd: int) -> None:
    with open(obj, "rb") as f:
        try:
            while os.splice(f.fileno(), fd, SPLICE_CHUNK):
                pass
        except OSError as e:
            if e.errno not in (errno.EINVAL, errno.ENOSYS):
                raise
            while chunk := f.read(SPLICE_CHUNK):
                os.write(fd, chunk)


def feed_channel(data_dir: Path, channel: str, objects: Sequence[Path], seed: Optional[int],
                 epochs: Optional[int], stop: WriterStop) -> int:
    """Feed `epochs` epochs (None: until stopped); returns how many were fed completely. Each FIFO is
    written from the moment its reader opens it."""
    epoch = 0
    while epochs is None or epoch < epochs:
        path = data_dir / f"{channel}_{epoch}"
        path.unlink(missing_ok=True)
        os.mkfifo(path)
        try:
            fd = stop.open_writer(path)
            if fd is None:
                return epoch
            try:
                for obj in epoch_order(objects, seed, epoch):
                    _stream(obj, fd)
            except BrokenPipeError:
                log(f"channel {channel} epoch {epoch}: the reader closed the FIFO early")
            finally:
                os.close(fd)
        finally:
            path.unlink(missing_ok=True)
        epoch += 1
    return epoch


class Feeder:
    """Feeds several channels at once, one thread each."""

    def __init__(self, data_dir: Path, sources: dict[str, list[Path]], seeds: dict[str, Optional[int]],
                 epochs: Optional[int]) -> None:
        self.stop = WriterStop()
        self.fed: dict[str, int] = {}
        self._errors: list[BaseException] = []
        self._threads = [
            threading.Thread(target=self._feed, args=(data_dir, c, objs, seeds.get(c), epochs), daemon=True)
            for c, objs in sources.items()
        ]

    def _feed(self, data_dir: Path, channel: str, objects: list[Path], seed: Optional[int], epochs: Optional[int]) -> None:
        try:
            self.fed[channel] = feed_channel(data_dir, channel, objects, seed, epochs, self.stop)
        except BaseException as e:  # reported by join()
            self._errors.append(e)

    def start(self) -> "Feeder":
        """Starts one thread per channel; returns self."""
        for t in self._threads:
            t.start()
        return self

    def join(self, timeout: Optional[float] = None) -> bool:
        """Until every channel's thread has ended or `timeout` passed; raises the first thread's error. Whether
        all ended."""
        deadline = None if timeout is None else time.monotonic() + timeout
        for t in self._threads:
            t.join(None if deadline is None else max(0.0, deadline - time.monotonic()))
        if self._errors:
            raise self._errors[0]
        return not any(t.is_alive() for t in self._threads)


def main(argv: Optional[Sequence[str]] = None) -> int:
    """`python -m smtrain.data.feeder`: play SageMaker's side of Pipe mode from local files."""
    parser = argparse.ArgumentParser(prog="python -m smtrain.data.feeder", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base", default=os.environ.get("SAGEMAKER_BASE_DIR", "/opt/ml"))
    parser.add_argument("--source", action="append", default=[], metavar="CHANNEL=SOURCE", required=True)
    parser.add_argument("--epochs", type=int, default=None, help="default: until stopped")
    parser.add_argument("--emulate", action="store_true",
                        help="File channels too (train, emulating Pipe mode where local mode delivers File mode)")
    args = parser.parse_args(argv)
    set_prefix("[feeder] ")
    try:
        config = load_config({**os.environ, "SAGEMAKER_BASE_DIR": args.base})
        pipe_channels = {c.name: c for c in config.channels if args.emulate or c.mode is InputMode.PIPE}
        here = config.resources.hosts.index(config.resources.current_host)
        sources: dict[str, list[Path]] = {}
        for item in args.source:
            name, _, source = item.partition("=")
            if name not in pipe_channels:
                raise ConfigError(f"--source {item}: {name!r} is not a Pipe channel of inputdataconfig.json "
                                  f"(Pipe channels: {sorted(pipe_channels)})")
            sources[name] = channel_objects(source)
            if pipe_channels[name].s3_distribution_type == "ShardedByS3Key":
                sources[name] = host_share(sources[name], here, len(config.resources.hosts))
    except ConfigError as e:
        log(f"error: {e}")
        return 78
    config.paths.input_data_dir.mkdir(parents=True, exist_ok=True)
    feeder = Feeder(config.paths.input_data_dir, sources, {n: pipe_channels[n].shuffle_seed for n in sources},
                    args.epochs).start()
    log(f"feeding {', '.join(f'{n} ({len(o)} objects)' for n, o in sources.items())}")
    terminated: list[int] = []  # the handler only records; the loop acts (no locks taken in a handler)
    signal.signal(signal.SIGTERM, lambda signum, frame: terminated.append(signum))
    try:
        while not feeder.join(0.2) and not terminated:
            pass
    except KeyboardInterrupt:
        pass
    feeder.stop.set()
    feeder.join(5)
    return 0


if __name__ == "__main__":
    sys.exit(main())
