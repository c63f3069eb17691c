"""Every benchmark still runs: each one's `--quick` mode (the smallest run that takes its paths) through to its
figures, so that a changed signature fails here and not for the next person who measures. A new benchmark is
found by its name (bench_ and .py, in benchmarks/); bench_image.py needs the image and runs in tests/image/test_image.py.

The benchmarks whose quick run still starts several TensorFlow jobs (11-28 s each on a 2-core machine, about 2.5
minutes together) are a tier of their own, so that the whole test command stays within its time:
`SMTRAIN_BENCHMARKS=all scripts/test.sh tests/process/test_benchmarks.py` (CONTRIBUTING.md)."""
from __future__ import annotations

import os

import pytest

from tests.harness.benchmarks import BENCHMARKS, run_quick

ELSEWHERE = {"bench_image.py"}
# What a benchmark needs besides --quick: Horovod's script (a stand-in here); the Pipe benchmark's mode across hosts
# (its --demux-only runs a part of what its default mode runs).
RUNS = {
    "bench_hvd_synthetic.py": [("--script", str(BENCHMARKS.parent / "tests" / "programs" / "synthetic_stand_in.py"))],
    "bench_pipes.py": [(), ("--job-dealing",)],
}
MODES = ("--job-dealing",)  # in a case's name
TENSORFLOW_JOBS = {"bench_cpu_threads.py", "bench_keras3.py", "bench_monitor.py", "bench_no_hang.py", "bench_pipes.py",
                   "bench_restart.py", "bench_step_profiler.py"}
ALL = os.environ.get("SMTRAIN_BENCHMARKS") == "all"


def _cases() -> list:
    heavy = pytest.mark.skipif(not ALL, reason="its quick run starts TensorFlow jobs: the tier SMTRAIN_BENCHMARKS=all")
    return [pytest.param(path.name, extra, id=" ".join((path.name, *(a for a in extra if a in MODES))),
                         marks=[heavy] if path.name in TENSORFLOW_JOBS else [])
            for path in sorted(BENCHMARKS.glob("bench_*.py")) if path.name not in ELSEWHERE
            for extra in RUNS.get(path.name, [()])]


@pytest.mark.parametrize("name,extra", _cases())
def test_every_benchmark_runs_through_to_its_figures_in_its_quick_mode(name: str, extra: tuple[str, ...]) -> None:
    run_quick(name, *extra)
