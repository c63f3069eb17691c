"""The system monitor: samples this host's utilisation into smdebug's system-metrics files.

`train` starts it on every host as its own process (niced, so it never competes with training; a
hung program cannot stop it), and stops it with SIGTERM when the job ends; if `train` itself is
killed, the kernel sends it SIGTERM (parent-death signal). On SIGTERM it writes what it holds and
prints a one-line summary (p50/p95 CPU and GPU utilisation) to stderr.

Every interval it samples: CPU per core and in total, memory used, I/O wait, disk and network bytes
per second, and, through NVML, each GPU's utilisation and memory. Lines are JSON in smdebug's
system-metrics schema:

    {"Type": "cpu", "Name": "cpu0", "Dimension": "CPUUtilization", "Value": 12.5, "NodeId": "algo-1",
     "Timestamp": 1764000000.25}

in `<out>/system/incremental/<YYYYMMDDHH>/<epoch_s>.<host>.json`, a new file every minute, flushed
every FLUSH_S seconds. (smdebug's own reader only accepts host names `algo-<n>`.)

    python -m smtrain.profiler.monitor --out /opt/ml/output/profiler --host algo-1 --interval-ms 500
"""
from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any, Callable, NamedTuple, Optional, Sequence

from ..common.console import exit_flushed
from ..common.signals import SHUTDOWN_SIGNALS, SignalWaker
from ..config.settings import LIVE_INTERVAL
from .live import Live

__all__ = ["FLUSH_S", "ROTATE_S", "EventWriter", "GpuSampler", "HostSampler", "Sample", "Summary", "event_line",
    "file_path", "main", "percentile", "run"]

FLUSH_S = 2.0
ROTATE_S = 60


class Sample(NamedTuple):
    """One system metric's value, as smdebug's system-metrics files hold it."""
    type: str
    name: str
    dimension: str
    value: float


def event_line(sample: Sample, host: str, timestamp: float) -> str:
    """A sample as one line of smdebug's system-metrics file."""
    return json.dumps({"Type": sample.type, "Name": sample.name, "Dimension": sample.dimension,
                       "Value": round(sample.value, 4), "NodeId": host, "Timestamp": round(timestamp, 6)})


def file_path(out: Path, host: str, started: float) -> Path:
    """smdebug's path of a system-metrics file: system/incremental/<hour>/<epoch_s>.<host>.json."""
    hour = time.strftime("%Y%m%d%H", time.gmtime(started))
    return out / "system" / "incremental" / hour / f"{int(started)}.{host}.json"


class EventWriter:
    """Appends event lines to the current minute's file; rotates every ROTATE_S seconds."""

    def __init__(self, out: Path, host: str) -> None:
        self.out, self.host = out, host
        self._pending: list[str] = []
        self._file_started: Optional[float] = None

    def add(self, samples: Sequence[Sample], timestamp: float) -> None:
        """Queues `samples` as event lines; a new file every ROTATE_S."""
        if self._file_started is None or timestamp - self._file_started >= ROTATE_S:
            self.flush()
            self._file_started = timestamp
        self._pending.extend(event_line(s, self.host, timestamp) for s in samples)

    def flush(self) -> None:
        """Appends the queued lines to the current file."""
        if not self._pending or self._file_started is None:
            return
        path = file_path(self.out, self.host, self._file_started)
        path.parent.mkdir(parents=True, exist_ok=True)
        with open(path, "a") as f:
            f.write("\n".join(self._pending) + "\n")
        self._pending = []


class GpuSampler:
    """NVML through nvidia-ml-py; absent GPUs (or driver) are reported once, then not asked again."""

    def __init__(self, log, gpus: int = -1) -> None:
        self.handles: list[Any] = []
        self.nvml: Any = None
        if gpus == 0:  # the host has none (SM_NUM_GPUS): NVML is not even loaded
            log("no GPU to sample (this host has none); sampling CPU, memory, I/O and network")
            return
        try:
            import pynvml

            pynvml.nvmlInit()
            self.nvml = pynvml
            self.handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())]
        except Exception as e:  # no library, no driver, no device: all mean "no GPU samples"
            log(f"no GPU to sample ({type(e).__name__}: {e}); sampling CPU, memory, I/O and network")
            return
        if not self.handles:
            log("no GPU to sample (NVML found none); sampling CPU, memory, I/O and network")

    def sample(self) -> list[Sample]:
        """Each GPU's utilisation and memory now."""
        samples = []
        for i, handle in enumerate(self.handles):
            rates = self.nvml.nvmlDeviceGetUtilizationRates(handle)
            memory = self.nvml.nvmlDeviceGetMemoryInfo(handle)
            samples += [Sample("gpu", f"gpu{i}", "GPUUtilization", float(rates.gpu)),
                        Sample("gpu", f"gpu{i}", "GPUMemoryUtilization", 100.0 * memory.used / memory.total)]
        return samples


class HostSampler:
    """Samples this host's CPUs, memory, I/O, network and GPUs (psutil, NVML)."""

    def __init__(self, log, gpus: int = -1) -> None:
        import psutil

        self.psutil = psutil
        psutil.cpu_percent(percpu=True)
        psutil.cpu_times_percent()
        self._last = (time.monotonic(), psutil.disk_io_counters(), psutil.net_io_counters())
        self.gpu = GpuSampler(log, gpus)

    def sample(self) -> list[Sample]:
        """CPU (per core and in all), memory, disk and network since the last sample."""
        system = self.psutil
        cores = system.cpu_percent(percpu=True)
        times = system.cpu_times_percent()
        now, disk, net = time.monotonic(), system.disk_io_counters(), system.net_io_counters()
        then, last_disk, last_net = self._last
        self._last = (now, disk, net)
        elapsed = max(now - then, 1e-6)
        samples = [Sample("cpu", f"cpu{i}", "CPUUtilization", v) for i, v in enumerate(cores)]
        samples.append(Sample("cpu", "cpu_total", "CPUUtilization", sum(cores) / max(len(cores), 1)))
        samples.append(Sample("memory", "MemoryUsedPercent", "Memory", system.virtual_memory().percent))
        samples.append(Sample("i/o", "cpu_iowait", "I/OWaitPercentage", getattr(times, "iowait", 0.0)))
        if disk is not None and last_disk is not None:
            samples += [Sample("i/o", "disk", "ReadBytesPerSecond", (disk.read_bytes - last_disk.read_bytes) / elapsed),
                        Sample("i/o", "disk", "WriteBytesPerSecond", (disk.write_bytes - last_disk.write_bytes) / elapsed)]
        samples += [Sample("network", "total", "ReceiveBytesPerSecond", (net.bytes_recv - last_net.bytes_recv) / elapsed),
                    Sample("network", "total", "TransmitBytesPerSecond", (net.bytes_sent - last_net.bytes_sent) / elapsed)]
        return samples + self.gpu.sample()


def percentile(values: Sequence[float], q: float) -> float:
    """The q-th percentile of values (the value at the rounded rank, no interpolation); NaN for none."""
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))]


class Summary:
    """Keeps the utilisation series the end-of-job summary needs (a float per sample)."""

    def __init__(self) -> None:
        self.series: dict[str, list[float]] = {}

    def add(self, samples: Sequence[Sample]) -> None:
        """Keeps the CPU's and each GPU's utilisation for the end-of-job line."""
        for s in samples:
            if s.name == "cpu_total":
                self.series.setdefault("cpu", []).append(s.value)
            elif s.dimension == "GPUUtilization":
                self.series.setdefault(s.name, []).append(s.value)

    def text(self, host: str) -> str:
        """The line the monitor logs at its end: p50 and p95 of each series."""
        parts = [f"{name} p50 {percentile(v, 50):.0f}% p95 {percentile(v, 95):.0f}%" for name, v in self.series.items()]
        return f"host {host} utilisation: " + ("; ".join(parts) if parts else "no samples")


def run(out: Path, host: str, interval_s: float, stop_requested: Callable[[float], bool], log,
        gpus: int = -1, live: Optional[Live] = None) -> Summary:
    """Sample until `stop_requested(timeout)` says so (it waits up to `timeout` s for a stop); `gpus`:
    the host's (-1: as NVML finds them); `live`: the job's live metrics, fed every sample."""
    sampler = HostSampler(log, gpus)
    writer = EventWriter(out, host)
    summary = Summary()
    next_flush = time.monotonic() + FLUSH_S
    next_sample = time.monotonic() + interval_s
    while not stop_requested(max(0.0, next_sample - time.monotonic())):
        if time.monotonic() < next_sample:
            continue  # woken early by a signal that is not a stop
        next_sample += interval_s
        samples = sampler.sample()
        writer.add(samples, time.time())
        summary.add(samples)
        if live is not None:
            live.add(samples)
            if live.due():
                live.tick()
        if time.monotonic() >= next_flush:
            writer.flush()
            next_flush = time.monotonic() + FLUSH_S
    last = sampler.sample()  # the very last moment, too
    writer.add(last, time.time())
    summary.add(last)
    writer.flush()
    if live is not None:
        live.add(last)
        live.tick()
        live.close()
    return summary


def main(argv: Optional[Sequence[str]] = None) -> int:
    """`python -m smtrain.profiler.monitor`: sample this host until stopped."""
    parser = argparse.ArgumentParser(prog="python -m smtrain.profiler.monitor", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, type=Path)
    parser.add_argument("--host", required=True)
    parser.add_argument("--interval-ms", type=float, default=500)
    parser.add_argument("--gpus", type=int, default=-1, help="the host's GPUs (0: NVML is not loaded; -1: ask NVML)")
    parser.add_argument("--tensorboard", type=Path, default=None,
                        help="live metrics: TensorBoard scalars under DIR/smtrain (smtrain.profiler.live)")
    parser.add_argument("--live-s", type=float, default=LIVE_INTERVAL.default, help="live metrics: every this many seconds")
    parser.add_argument("--control", default=None, metavar="HOST:PORT",
                        help="live metrics: the ranks' steps to the master's control server")
    args = parser.parse_args(argv)

    def log(message: str) -> None:
        sys.stderr.write(f"[monitor] {message}\n")
        sys.stderr.flush()

    # The handlers only wake the loop: one that set a threading.Event could deadlock on the
    # Event's lock, held by the very wait it interrupted.
    waker = SignalWaker()
    try:
        os.nice(10)
    except OSError:
        pass
    control = args.control.rpartition(":") if args.control else None
    live: Optional[Live] = None
    if args.tensorboard or control:
        live = Live(args.out, args.host, args.tensorboard, (control[0], int(control[2])) if control else None, log,
                    args.live_s)
    summary = run(args.out, args.host, args.interval_ms / 1000.0,
                  lambda timeout: any(s in SHUTDOWN_SIGNALS for s in waker.wait(timeout)), log, args.gpus, live)
    log(summary.text(args.host))
    return 0


if __name__ == "__main__":
    # Its files are closed and its summary written: no teardown of psutil's modules, which the
    # worker's shipping at the job's end would wait for.
    exit_flushed(main())
