"""Every benchmark still runs: each one's `--quick` mode (the smallest run that takes its paths) through to its
figures, so that a changed signature fails here and not for the next person who measures. A new benchmark is
found by its name (bench_ and .py, in benchmarks/); bench_image.py needs the image and runs in tests/image/test_image.py.

The benchmarks whose quick run starts TensorFlow jobs (11-28 s each on a 2-core machine, about 2.5 minutes one
after another) run two at a time, all started by the first of their cases, each case then checking its own: their
jobs have one rank each and spend much of their time starting TensorFlow; the module takes about 2 minutes. Their
figures here only have to be numbers; what they measure is measured alone (benchmarks/README.md)."""
from __future__ import annotations

import subprocess
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Iterator

import pytest

from tests.harness.benchmarks import BENCHMARKS, check_quick, quick, run_quick

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
LANES = 2
QUICK_S = 240  # one quick run's bound; a case waits for its lane's earlier runs too


def _cases() -> list[tuple[str, tuple[str, ...]]]:
    return [(path.name, extra) for path in sorted(BENCHMARKS.glob("bench_*.py")) if path.name not in ELSEWHERE
            for extra in RUNS.get(path.name, [()])]


@pytest.fixture(scope="module")
def tensorflow_runs(request: pytest.FixtureRequest) -> Iterator[dict[tuple[str, tuple[str, ...]], Future]]:
    """The quick run of every TensorFlow benchmark case this session runs, started in LANES lanes, by case."""
    test = test_every_benchmark_runs_through_to_its_figures_in_its_quick_mode.__name__
    chosen = [(item.callspec.params["name"], item.callspec.params["extra"]) for item in request.session.items
              if getattr(item, "originalname", None) == test]
    with ThreadPoolExecutor(max_workers=LANES, thread_name_prefix="benchmark") as pool:
        runs = {(name, extra): pool.submit(quick, name, *extra, timeout=QUICK_S)
                for name, extra in chosen if name in TENSORFLOW_JOBS}
        yield runs
        for run in runs.values():
            run.cancel()


@pytest.mark.parametrize("name,extra", [pytest.param(name, extra, id=" ".join((name, *(a for a in extra if a in MODES))))
                                        for name, extra in _cases()])
def test_every_benchmark_runs_through_to_its_figures_in_its_quick_mode(name: str, extra: tuple[str, ...],
                                                                        request: pytest.FixtureRequest) -> None:
    if name not in TENSORFLOW_JOBS:
        run_quick(name, *extra)
        return
    runs = request.getfixturevalue("tensorflow_runs")
    done: subprocess.CompletedProcess = runs[(name, extra)].result(timeout=QUICK_S * len(runs) / LANES + QUICK_S)
    check_quick(name, extra, done)
