"""The system monitor's own cost: its CPU use over 60 s at 500 ms and 100 ms (percent of one core), also
with the live metrics on (TensorBoard scalars every 5 s, and the steps of a rank whose step recorder writes a
20-ms step beside it followed: smtrain.profiler.live) and the bytes of TensorBoard files that makes an hour;
and the step time of a CPU-bound TensorFlow job with the monitor off, on, and on with the live metrics, in one run.

    /opt/smtrain/venv/bin/python benchmarks/bench_monitor.py [--seconds 60] [--steps 300]
"""
from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from figures import parse, print_figures  # benchmarks/figures.py

STEPS = """
import os, sys, time
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
import tensorflow as tf
x = tf.random.normal((256, 512)); w = tf.Variable(tf.random.normal((512, 512)))
@tf.function
def step():
    with tf.GradientTape() as tape:
        loss = tf.reduce_sum(tf.tanh(tf.matmul(tf.tanh(tf.matmul(x, w)), w)))
    w.assign_sub(1e-6 * tape.gradient(loss, w))
for _ in range(20): step()
times = []
for _ in range(int(sys.argv[1])):
    t = time.perf_counter(); step(); times.append(time.perf_counter() - t)
times.sort(); print(times[len(times) // 2] * 1000)
"""


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


RANK = """
import sys, time
from smtrain.profiler.steps import StepRecorder
from smtrain.wire.profiler_settings import ProfilerSettings
recorder = StepRecorder(ProfilerSettings(sys.argv[1], "algo-1"), 0)
end = time.time() + float(sys.argv[2])
while time.time() < end:
    start = time.time(); time.sleep(0.015); recorder.add_step("TRAIN", start, time.time()); time.sleep(0.005)
recorder.close()
"""


def start_monitor(out: Path, interval_ms: int, live: bool = False) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "smtrain.profiler.monitor", "--out", str(out), "--host", "algo-1",
                             "--interval-ms", str(interval_ms), *(("--tensorboard", str(out / "tb")) if live else ())],
                            stderr=subprocess.DEVNULL)


def monitor_cpu(interval_ms: int, seconds: float, live: bool = False) -> tuple[float, float]:
    """Percent of one core, and with `live` the TensorBoard files' bytes an hour (else 0)."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        rank = subprocess.Popen([sys.executable, "-c", RANK, str(out), str(seconds + 4)]) if live else None
        proc = start_monitor(out, interval_ms, live)
        time.sleep(2)  # past its start-up (imports, NVML probe): the steady cost is what is measured
        before, t = cpu_seconds(proc.pid), time.monotonic()
        time.sleep(seconds)
        used, elapsed = cpu_seconds(proc.pid) - before, time.monotonic() - t
        proc.send_signal(signal.SIGTERM)
        proc.wait(10)
        if rank is not None:
            rank.wait(30)
        written = sum(f.stat().st_size for f in (out / "tb").rglob("*") if f.is_file()) if live else 0
    return 100.0 * used / elapsed, written * 3600 / (elapsed + 2)


def step_ms(steps: int, monitor_ms: int, live: bool = False) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        proc = start_monitor(Path(tmp), monitor_ms, live) if monitor_ms else None
        try:
            return float(subprocess.run([sys.executable, "-c", STEPS, str(steps)], capture_output=True, text=True,
                                        check=True).stdout.split()[-1])
        finally:
            if proc:
                proc.send_signal(signal.SIGTERM)
                proc.wait(10)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seconds", type=float, default=60)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=3)
    args = parse(parser, quick=dict(seconds=2, steps=20, repeat=1))
    figures = {}
    for interval in (500, 100):
        figures[f"monitor_cpu_percent_{interval}ms"] = monitor_cpu(interval, args.seconds)[0]
        print(f"monitor at {interval} ms: {figures[f'monitor_cpu_percent_{interval}ms']:.2f} % of one core "
              f"over {args.seconds:g} s")
    percent, per_hour = monitor_cpu(500, args.seconds, live=True)
    figures["monitor_cpu_percent_500ms_live"], figures["live_tensorboard_mb_per_hour_host_and_rank"] = percent, per_hour / 1e6
    print(f"monitor at 500 ms with the live metrics (one rank's 20-ms steps followed): {percent:.2f} % of one core; "
          f"TensorBoard files {per_hour / 1e6:.2f} MB an hour")
    runs: dict[str, list[float]] = {"off": [], "on (500 ms)": [], "on (100 ms)": [], "live (500 ms)": []}
    for _ in range(args.repeat):  # interleaved
        for label, interval in (("off", 0), ("on (500 ms)", 500), ("on (100 ms)", 100), ("live (500 ms)", 500)):
            runs[label].append(step_ms(args.steps, interval, live=label.startswith("live")))
    base = statistics.median(runs["off"])
    for label, values in runs.items():
        median = statistics.median(values)
        print(f"CPU-bound TF step, monitor {label:<12}: {median:.2f} ms (x{median / base:.3f})  runs {values}")
    figures["step_with_monitor_500ms_vs_off"] = statistics.median(runs["on (500 ms)"]) / base
    figures["step_with_monitor_100ms_vs_off"] = statistics.median(runs["on (100 ms)"]) / base
    figures["step_with_live_metrics_vs_off"] = statistics.median(runs["live (500 ms)"]) / base
    print_figures(figures)


if __name__ == "__main__":
    main()
