"""Per-step cost of smtrain.pipes.equal_steps (one allreduce of one integer per step) against the same
Horovod loop without it, at 1 ms and 50 ms steps: 2 ranks on this host through mpirun, each step a
sleep of the step time plus an allreduce of a 1-MB gradient, as a training step would do.

    /opt/smtrain/venv/bin/python benchmarks/bench_equal_steps.py --steps 300 --repeat 3
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from figures import print_figures  # benchmarks/figures.py

PROGRAM = """
import os, sys, time
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
import tensorflow as tf, horovod.tensorflow as hvd
from smtrain import pipes
hvd.init()
steps, step_s, helper = int(sys.argv[1]), float(sys.argv[2]) / 1000, sys.argv[3] == "on"
gradient = tf.ones((256 * 1024,))
batches = range(steps + 10)
loop = pipes.equal_steps(batches) if helper else iter(batches)
for i, _ in zip(range(10), loop):  # warm-up
    hvd.allreduce(gradient, name="g")
start = time.perf_counter()
for _ in zip(range(steps), loop):
    time.sleep(step_s)
    hvd.allreduce(gradient, name="g")
if hvd.rank() == 0:
    print((time.perf_counter() - start) / steps * 1000)
"""


def step_ms(program: Path, steps: int, step: float, helper: str) -> float:
    done = subprocess.run(["mpirun", "--allow-run-as-root", "-np", "2", "--bind-to", "none", sys.executable,
                           str(program), str(steps), str(step), helper],
                          capture_output=True, text=True, timeout=600, check=True)
    return float(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    figures = {}
    with tempfile.TemporaryDirectory() as tmp:
        program = Path(tmp) / "loop.py"
        program.write_text(PROGRAM)
        for step in (1.0, 50.0):
            steps = args.steps if step < 10 else max(20, args.steps // 10)
            runs: dict[str, list[float]] = {"off": [], "on": []}
            for _ in range(args.repeat):  # interleaved
                for helper in runs:
                    runs[helper].append(step_ms(program, steps, step, helper))
            off, on = statistics.median(runs["off"]), statistics.median(runs["on"])
            print(f"{step:g} ms steps ({steps} steps, median of {args.repeat}): without {off:.3f} ms, "
                  f"with equal_steps {on:.3f} ms per step  runs {runs}")
            figures[f"equal_steps_vs_without_{step:g}ms"] = on / off
    print_figures(figures)


if __name__ == "__main__":
    main()
