"""A benchmark's quick run, as the tests make one (benchmarks/figures.py's `--quick`): the smallest run that takes
its paths, checked to end 0 with its figures as its last lines."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"


def run_quick(name: str, *extra: str, timeout: float = 240) -> list[str]:
    """`benchmarks/<name> --quick [extra]`, checked; its output's lines."""
    return check_quick(name, extra, quick(name, *extra, timeout=timeout))


def quick(name: str, *extra: str, timeout: float = 240) -> subprocess.CompletedProcess:
    """`benchmarks/<name> --quick [extra]`, run to its end, unchecked."""
    return subprocess.run([sys.executable, str(BENCHMARKS / name), "--quick", *extra], cwd=BENCHMARKS.parent,
                          capture_output=True, text=True, timeout=timeout)


def check_quick(name: str, extra: tuple[str, ...], done: subprocess.CompletedProcess) -> list[str]:
    """That a quick run ended 0 with numeric `figure <name> <value>` lines as its last lines; its output's lines."""
    assert done.returncode == 0, f"{name} {' '.join(extra)} ended {done.returncode}:\n{done.stderr[-3000:]}"
    lines = done.stdout.strip().splitlines()
    figures = [line for line in lines if line.startswith("figure ")]
    assert figures, f"{name} printed no figure:\n{done.stdout[-2000:]}"
    assert lines[-len(figures):] == figures, f"{name}: its figures are not its last lines"
    for line in figures:
        float(line.split()[2])
    return lines
