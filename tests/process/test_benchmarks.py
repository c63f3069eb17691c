"""Every benchmark still runs: each one's `--quick` mode (the smallest run that takes its paths) through to its
figures, so that a changed signature fails here and not for the next person who measures. A new benchmark is
found by its name (bench_ and .py, in benchmarks/); bench_image.py needs the image and runs in tests/image/test_image.py."""
from __future__ import annotations

import pytest

from tests.harness.benchmarks import BENCHMARKS, run_quick

ELSEWHERE = {"bench_image.py"}
# What a benchmark needs besides --quick: Horovod's script (a stand-in here), the other modes of the Pipe benchmark.
RUNS = {
    "bench_hvd_synthetic.py": [("--script", str(BENCHMARKS.parent / "tests" / "programs" / "synthetic_stand_in.py"))],
    "bench_pipes.py": [(), ("--demux-only",), ("--job-dealing",)],
}
MODES = ("--demux-only", "--job-dealing")  # in a case's name


def _cases() -> list:
    return [pytest.param(path.name, extra, id=" ".join((path.name, *(a for a in extra if a in MODES))))
            for path in sorted(BENCHMARKS.glob("bench_*.py")) if path.name not in ELSEWHERE
            for extra in RUNS.get(path.name, [()])]


@pytest.mark.parametrize("name,extra", _cases())
def test_every_benchmark_runs_through_to_its_figures_in_its_quick_mode(name: str, extra: tuple[str, ...]) -> None:
    run_quick(name, *extra)
