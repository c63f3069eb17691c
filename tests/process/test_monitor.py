"""The system monitor through the real train: smdebug reads its files, busy and idle programs show
as such, the last samples survive SIGTERM and SIGKILL, no monitor outlives train; the report; metric lines."""
from __future__ import annotations

import base64
import io
import json
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

from smtrain.metrics import metric_line
from smtrain.profiler.monitor import EventWriter, Sample
from smtrain.profiler.rules import load_series
from tests.support import SMDEBUG_READ, TRAIN, make_tree, run_train

BUSY = """
import multiprocessing, time
def spin(seconds):
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        pass
if __name__ == "__main__":
    workers = [multiprocessing.Process(target=spin, args=(3,)) for _ in range(multiprocessing.cpu_count())]
    [w.start() for w in workers]; [w.join() for w in workers]
"""


def _cpu_total(base: Path) -> list[float]:
    series = load_series([base / "output" / "profiler"])
    return [v for (h, n, d), values in series.items() if n == "cpu_total" for _, v in values]


def _monitor_pids(base: Path) -> list[int]:
    found = []
    for entry in os.scandir("/proc"):
        if entry.name.isdigit():
            try:
                cmdline = Path(f"/proc/{entry.name}/cmdline").read_bytes()
            except OSError:
                continue
            if b"smtrain.profiler.monitor" in cmdline and str(base).encode() in cmdline:
                found.append(int(entry.name))
    return found


def test_smdebug_reads_the_files_and_gets_the_values_written(tmp_path: Path) -> None:
    writer = EventWriter(tmp_path, "algo-1")
    start = time.time() - 5
    for i in range(10):
        writer.add([Sample("cpu", "cpu0", "CPUUtilization", 10.0 + i), Sample("gpu", "gpu0", "GPUUtilization", 50.0 + i),
                    Sample("memory", "MemoryUsedPercent", "Memory", 33.0)], start + i * 0.5)
    writer.flush()
    out = tmp_path / "read.json"
    done = subprocess.run([*SMDEBUG_READ, str(out), "system", str(tmp_path), str(int(start * 1e6) - 10**6),
                           str(int((start + 10) * 1e6))], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    got = sorted(tuple(e) for e in json.loads(out.read_text()))
    assert ("cpu0", "CPUUtilization", 19.0, "algo-1") in got and ("gpu0", "GPUUtilization", 50.0, "algo-1") in got
    assert len([e for e in got if e[1] == "CPUUtilization"]) == 10
    assert sorted(e[2] for e in got if e[0] == "gpu0") == [50.0 + i for i in range(10)]


def _host_cpu_times() -> tuple[int, int]:
    """(busy, total) jiffies of every core so far, as /proc/stat counts them."""
    fields = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:8]]
    return sum(fields) - fields[3] - fields[4], sum(fields)  # idle and iowait are not busy


@pytest.mark.parametrize("program,busy", [(BUSY, True), ("import time\ntime.sleep(3)\n", False)])
def test_busy_and_idle_programs_show_as_such(tmp_path: Path, program: str, busy: bool) -> None:
    """The monitor's CPU is the host's: a program spinning every core shows as a busy host; a sleeping one as
    whatever else the host does then - measured here from /proc/stat over the same run (a quiet host: idle;
    beside other work: that work)."""
    tree = make_tree(tmp_path)
    tree.write_program("train.py", program)
    before = _host_cpu_times()
    done = run_train(tree, env=tree.env(SM_SYSTEM_MONITOR_INTERVAL_MS="100"))
    after = _host_cpu_times()
    assert done.returncode == 0, done.stderr.decode()
    values = _cpu_total(tree.base)
    assert len(values) >= 20
    mean, host = sum(values) / len(values), 100 * (after[0] - before[0]) / max(after[1] - before[1], 1)
    if busy:
        assert mean > 70, mean
    assert abs(mean - host) < 25, (mean, host)  # the run's whole window against the monitor's samples
    stderr = done.stderr.decode()
    assert stderr.count("[monitor] no GPU to sample") == 1  # said once
    assert "no GPU to sample (this host has none)" in stderr  # told by the plan (SM_NUM_GPUS): NVML not loaded
    assert re.search(r"\[monitor\] host algo-1 utilisation: cpu p50 \d+% p95 \d+%", stderr)


def test_a_host_without_gpus_does_not_load_nvml() -> None:
    import sys

    probe = ("import sys; from smtrain.profiler.monitor import HostSampler; said = []; "
             "HostSampler(said.append, {gpus}).sample(); print('pynvml' in sys.modules, said)")
    for gpus, loaded in ((0, False), (-1, True)):
        done = subprocess.run([sys.executable, "-c", probe.format(gpus=gpus)], capture_output=True, text=True, timeout=60)
        assert done.returncode == 0 and done.stdout.startswith(str(loaded)), done


def test_monitor_can_be_switched_off(tmp_path: Path) -> None:
    tree = make_tree(tmp_path, hyperparameters={"sagemaker_system_monitor": '"off"'})
    tree.write_program("train.py", "pass\n")
    assert run_train(tree).returncode == 0
    assert not (tree.base / "output" / "profiler").exists()


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGKILL])
def test_last_samples_are_on_disk_and_no_monitor_outlives_train(tmp_path: Path, signum: int) -> None:
    tree = make_tree(tmp_path)
    tree.write_program("train.py", "import time\ntime.sleep(60)\n")
    proc = subprocess.Popen([TRAIN], env=tree.env(SM_SYSTEM_MONITOR_INTERVAL_MS="100", SM_GRACE_PERIOD_SECONDS="1"),
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(5)  # longer than a flush interval: files exist; the newest samples are still in memory
    stopped = time.time()
    proc.send_signal(signum)
    proc.wait(30)
    deadline = time.monotonic() + 10
    while _monitor_pids(tree.base) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _monitor_pids(tree.base) == [], "a monitor outlived train"
    series = load_series([tree.base / "output" / "profiler"])
    newest = max(t for values in series.values() for t, _ in values)
    assert newest >= stopped - 0.5, f"the last samples were lost: newest {stopped - newest:.2f} s before the stop"
    if signum == signal.SIGTERM:  # a stop leaves seconds: the report's tables, without its plots
        report = tree.base / "output" / "data" / "profiler-report"
        assert (report / "summary.json").is_file() and "<figure>" not in (report / "profiler-report.html").read_text()


def _wait_for_handler(pid: int, signum: int) -> None:
    """Until the process catches `signum` (/proc/PID/status SigCgt), at most 10 s."""
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        caught = next(line for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith("SigCgt:"))
        if int(caught.split()[1], 16) & (1 << (signum - 1)):
            return
        time.sleep(0.01)
    pytest.fail(f"process {pid} did not install a handler for signal {signum} within 10 s")


def test_monitor_stops_on_sigterm_bursts(tmp_path: Path) -> None:
    """Bursts of SIGTERM at random moments: the monitor must always stop. (When train dies, the
    kernel sends the parent-death signal once per thread of train's that ends, so several SIGTERMs
    arrive at once; a handler that took a lock, as threading.Event.set() does, deadlocked on it.)"""
    import random
    import sys

    rng = random.Random(7)
    for round_ in range(20):
        out = tmp_path / f"round{round_}"
        monitor = subprocess.Popen([sys.executable, "-m", "smtrain.profiler.monitor", "--out", str(out), "--host", "algo-1",
                                    "--interval-ms", "100"], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        _wait_for_handler(monitor.pid, signal.SIGTERM)
        time.sleep(rng.random() * 0.3)
        for _ in range(20):
            if monitor.poll() is None:
                monitor.send_signal(signal.SIGTERM)
            time.sleep(rng.random() * 0.0005)
        try:
            _, stderr = monitor.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            monitor.kill()
            pytest.fail(f"round {round_}: the monitor did not stop within 10 s of SIGTERM")
        # -SIGTERM: a signal of the burst came as Python shut down, after the handlers were reset
        assert monitor.returncode in (0, -signal.SIGTERM), stderr.decode()
        assert b"host algo-1 utilisation: cpu p50" in stderr, stderr.decode()


def test_report_renders_with_plots(tmp_path: Path) -> None:
    import matplotlib.image

    writer = EventWriter(tmp_path / "profiler", "algo-1")
    start = time.time()
    for i in range(200):
        t = start + i * 0.5
        writer.add([Sample("cpu", f"cpu{c}", "CPUUtilization", (i * 7 + c * 30) % 100) for c in range(4)]
                   + [Sample("cpu", "cpu_total", "CPUUtilization", 95.0), Sample("memory", "MemoryUsedPercent", "Memory", 40.0),
                      Sample("gpu", "gpu0", "GPUUtilization", 5.0), Sample("gpu", "gpu0", "GPUMemoryUtilization", 30.0)], t)
    writer.flush()
    out = tmp_path / "report"
    done = subprocess.run([TRAIN, "report", str(tmp_path / "profiler"), "--out", str(out),
                           "--param", "LowGPUUtilization.patience=0", "--param", "CPUBottleneck.patience=0"],
                          capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()
    html = (out / "profiler-report.html").read_text()
    pictures = re.findall(r"<figure><img alt='([^']+)' src='data:image/png;base64,([^']+)'>", html)
    assert [caption for caption, _ in pictures] == ["System utilisation per host", "algo-1: CPU utilisation per core (%)"]
    for caption, data in pictures:
        image = matplotlib.image.imread(io.BytesIO(base64.b64decode(data)), format="png")
        assert image.shape[0] > 100 and image.std() > 0.05, f"{caption} is blank"
    summary = json.loads((out / "summary.json").read_text())
    fired = {r["rule"] for r in summary["rules"] if r["triggered"]}
    assert {"LowGPUUtilization", "CPUBottleneck"} <= fired
    assert summary["hosts"]["algo-1"]["cpu"]["p50"] == 95.0 and summary["hosts"]["algo-1"]["samples"] == 200
    assert "TRIGGERED" in html and "move preprocessing off the training path" in html


def test_report_without_samples_is_a_clear_error(tmp_path: Path) -> None:
    done = subprocess.run([TRAIN, "report", str(tmp_path)], capture_output=True, timeout=60)
    assert done.returncode == 1 and b"no system-monitor samples or step events under" in done.stderr
    done = subprocess.run([TRAIN, "report", str(tmp_path), "--param", "Nope.x=1"], capture_output=True, timeout=60)
    assert done.returncode == 2 and b"unknown rule parameter" in done.stderr


def test_metric_lines_match_sagemaker_metric_definitions() -> None:
    line = metric_line(epoch=3, loss=0.000123456789, val_loss=1.5, accuracy=0.98)
    assert line == "epoch=3; loss=0.000123457; val_loss=1.5; accuracy=0.98;"
    assert re.search(r"\bloss=([-+0-9.eE]+|nan|inf);", line).group(1) == "0.000123457"
    assert re.search(r"\bval_loss=([-+0-9.eE]+|nan|inf);", line).group(1) == "1.5"
    with pytest.raises(ValueError, match="metric name 'bad name'"):
        metric_line(**{"bad name": 1})
