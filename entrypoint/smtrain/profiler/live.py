"""The job seen while it runs, from the system monitor (smtrain.profiler.monitor): every few seconds (the live
metrics' interval setting) this host's utilisation (the means of the samples since the last time) and its ranks'
training steps (what their step recorders wrote since: smtrain.profiler.live_steps) become TensorBoard scalars,
and the ranks' steps go to the master, which names a rank the others wait for while the job runs
(smtrain.run.stragglers).

The scalars are TensorBoard event files (`Scalars`), one run (folder) for the host
and one for each of its ranks, under `smtrain/` of the job's TensorBoard folder (SM_TENSORBOARD_DIR, which
SageMaker uploads while the job runs; else `<profiler>/tensorboard`): the program's own summaries beside them
are left alone. Tags:

    system/cpu_percent, system/memory_percent, system/io_wait_percent   the host's means over the interval
    system/disk_read_mb_per_s, system/disk_write_mb_per_s
    system/network_receive_mb_per_s, system/network_transmit_mb_per_s
    system/gpu<i>_percent, system/gpu<i>_memory_percent                  each GPU, where the host has them
    steps/steps_per_s                                                    a rank's training steps a second
    steps/step_ms, steps/between_ms                                      its median step, and gap before one

The step (TensorBoard's x axis) is the seconds since the monitor started, the same for every run."""
from __future__ import annotations

import statistics
import time
from pathlib import Path
from typing import Any, BinaryIO, Callable, Optional, Sequence

from ..data.record_reader import encode_tfrecord
from ..wire.control_protocol import ControlClient, MessageType
from .events import rank_of
from .live_steps import RankWindow, StepTail, windows

__all__ = ["Live", "Scalars", "system_scalars"]

CONNECT_S = 0.5  # how long one attempt to reach the master's control server may hold the sampling back


class Scalars:
    """TensorBoard event files of scalars, one a run (a folder under `root`): TFRecord-framed `Event` protocol
    buffers (TensorBoard's own message classes, which need no TensorFlow: its writer would load TensorFlow
    into the monitor, seconds of CPU and hundreds of MB), appended as they come."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self._files: dict[str, BinaryIO] = {}

    def add(self, run: str, values: dict[str, float], step: int, wall: float) -> None:
        """One event holding `values` (tag -> value) at `step` and `wall` time, for run `run`."""
        from tensorboard.compat.proto import event_pb2, summary_pb2  # protobuf alone (no TensorFlow)

        file = self._files.get(run)
        if file is None:
            folder = self.root / run
            folder.mkdir(parents=True, exist_ok=True)
            file = self._files[run] = open(folder / f"events.out.tfevents.{int(wall)}.{run.replace('/', '.')}", "ab")
            file.write(encode_tfrecord(event_pb2.Event(wall_time=wall, file_version="brain.Event:2").SerializeToString()))
        summary = summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag, simple_value=value)
                                             for tag, value in values.items()])
        file.write(encode_tfrecord(event_pb2.Event(wall_time=wall, step=step, summary=summary).SerializeToString()))

    def flush(self) -> None:
        for file in self._files.values():
            file.flush()

    def close(self) -> None:
        for file in self._files.values():
            file.close()
        self._files.clear()


_SYSTEM = {("cpu_total", "CPUUtilization"): ("cpu_percent", 1.0), ("MemoryUsedPercent", "Memory"): ("memory_percent", 1.0),
           ("cpu_iowait", "I/OWaitPercentage"): ("io_wait_percent", 1.0),
           ("disk", "ReadBytesPerSecond"): ("disk_read_mb_per_s", 1e-6), ("disk", "WriteBytesPerSecond"): ("disk_write_mb_per_s", 1e-6),
           ("total", "ReceiveBytesPerSecond"): ("network_receive_mb_per_s", 1e-6),
           ("total", "TransmitBytesPerSecond"): ("network_transmit_mb_per_s", 1e-6)}


def system_scalars(samples: Sequence[Any]) -> dict[str, float]:
    """The host's tags from the monitor's samples (smtrain.profiler.monitor.Sample): each the mean of its samples."""
    values: dict[str, list[float]] = {}
    for s in samples:
        if (s.name, s.dimension) in _SYSTEM:
            tag, scale = _SYSTEM[(s.name, s.dimension)]
            values.setdefault(f"system/{tag}", []).append(s.value * scale)
        elif s.dimension == "GPUUtilization":
            values.setdefault(f"system/{s.name}_percent", []).append(s.value)
        elif s.dimension == "GPUMemoryUtilization":
            values.setdefault(f"system/{s.name}_memory_percent", []).append(s.value)
    return {tag: statistics.fmean(v) for tag, v in values.items()}


class Live:
    """What the monitor adds while the job runs: `add` each sample, `tick` every `interval_s` (the live
    metrics' interval setting), `close` at its end."""

    def __init__(self, profiler_dir: Path, host: str, tensorboard: Optional[Path],
                 control: Optional[tuple[str, int]], log: Callable[[str], None], interval_s: float) -> None:
        self.host, self.control, self.log, self.interval_s = host, control, log, interval_s
        self.scalars = Scalars(tensorboard / "smtrain") if tensorboard is not None else None
        self.tail = StepTail(profiler_dir)
        self.samples: list[Any] = []
        self.started = time.monotonic()
        self.last = self.started
        self._client: Optional[ControlClient] = None

    def add(self, samples: Sequence[Any]) -> None:
        self.samples.extend(samples)

    def due(self) -> bool:
        return time.monotonic() - self.last >= self.interval_s

    def tick(self) -> None:
        """The means and the ranks' steps since the last tick: to TensorBoard, and to the master."""
        now = time.monotonic()
        elapsed, self.last = max(now - self.last, 1e-6), now
        ranks = windows(self.tail.poll())
        step, wall = int(now - self.started), time.time()
        if self.scalars is not None:
            system = system_scalars(self.samples)
            if system:
                self.scalars.add(self.host, system, step, wall)
            for node, window in sorted(ranks.items()):
                self.scalars.add(f"{self.host}/rank-{rank_of(node)}", _rank_scalars(window, elapsed), step, wall)
            self.scalars.flush()
        self.samples = []
        if self.control is not None and ranks:
            self._send(ranks)

    def _send(self, ranks: dict[str, RankWindow]) -> None:
        """To the master; where it is not reached (yet, or any more), at the next tick again."""
        steps = {node: w.to_json() for node, w in ranks.items()}
        if self._client is not None and self._client.send(MessageType.RANK_STEPS, host=self.host, ranks=steps):
            return
        if self._client is not None:
            self._client.close()
        host, port = self.control  # type: ignore[misc]
        self._client = ControlClient.open(host, port, time.monotonic() + CONNECT_S, MessageType.RANK_STEPS,
                                          host=self.host, ranks=steps)

    def close(self) -> None:
        if self.scalars is not None:
            self.scalars.close()
        self.tail.close()
        if self._client is not None:
            self._client.close()


def _rank_scalars(window: RankWindow, elapsed: float) -> dict[str, float]:
    values = {"steps/steps_per_s": window.steps / elapsed}
    if window.step_bins:
        values["steps/step_ms"] = _median(window.step_bins)
    if window.between_bins:
        values["steps/between_ms"] = _median(window.between_bins)
    return values


def _median(bins: tuple[tuple[float, int], ...]) -> float:
    """The median of a histogram ((value, count), in order): the bin holding its middle."""
    half, seen = sum(n for _, n in bins) / 2, 0
    for value, n in bins:
        seen += n
        if seen >= half:
            return value
    return bins[-1][0]
