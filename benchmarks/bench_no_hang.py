"""Per-step cost of what keeps jobs from hanging, against the same Horovod loop without it, at 1 ms
and 50 ms steps: the stall watchdog for a loop that counts its steps (progress.step() every step, the
rank launchers' reports, the master's checks), the stall watchdog for a plain loop that reports
nothing (Horovod's stall inspector every 10 s, read from rank 0's stderr by its launcher) and
pipes.equal_steps (one allreduce of one integer per step). "off" is the stall timeout 0. Each run is a real
`train` of a one-host MPI job with 2 ranks; a step is a sleep of the step time plus an allreduce of
a 1-MB gradient, as a training step would do.

    /opt/smtrain/venv/bin/python benchmarks/bench_no_hang.py --steps 300 --repeat 3 [--step-ms 1 50]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from figures import parse, print_figures  # benchmarks/figures.py

PROGRAM = """
import argparse, os, time
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
import tensorflow as tf, horovod.tensorflow as hvd
from smtrain import pipes, progress
parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int)
parser.add_argument("--step-ms", type=float)
parser.add_argument("--mode")
args = parser.parse_args()
hvd.init()
steps, step_s, mode = args.steps, args.step_ms / 1000, args.mode
gradient = tf.ones((256 * 1024,))
batches = range(steps + 10)
loop = pipes.equal_steps(batches) if mode == "equal_steps" else iter(batches)
count = progress.step if mode == "watchdog" else (lambda: None)
for _ in zip(range(10), loop):  # warm-up
    hvd.allreduce(gradient, name="g")
start = time.perf_counter()
for _ in zip(range(steps), loop):
    count()
    time.sleep(step_s)
    hvd.allreduce(gradient, name="g")
if hvd.rank() == 0:
    print("ms_per_step", (time.perf_counter() - start) / steps * 1000, flush=True)
"""
MODES = {"off": "0", "watchdog": "1800", "plain_watchdog": "1800", "equal_steps": "0"}  # mode -> stall timeout


def step_ms(base: Path, steps: int, step: float, mode: str, ranks: int) -> float:
    config = base / "input" / "config"
    config.mkdir(parents=True, exist_ok=True)
    (config / "resourceconfig.json").write_text('{"current_host": "algo-1", "hosts": ["algo-1"]}')
    (config / "hyperparameters.json").write_text(json.dumps({
        "sagemaker_program": '"loop.py"', "sagemaker_mpi_enabled": "true",
        "sagemaker_mpi_num_of_processes_per_host": str(ranks), "sagemaker_stall_timeout_seconds": MODES[mode],
        "steps": str(steps), "step-ms": str(step), "mode": json.dumps(mode)}))
    (base / "code").mkdir(exist_ok=True)
    (base / "code" / "loop.py").write_text(PROGRAM)
    env = {**os.environ, "SAGEMAKER_BASE_DIR": str(base), "SM_SYSTEM_MONITOR": "off"}
    done = subprocess.run([str(Path(sys.executable).parent / "train")], env=env, capture_output=True, text=True,
                          timeout=600)
    if done.returncode != 0:
        raise SystemExit(f"train exited {done.returncode}: {done.stderr[-3000:]}")
    return float(next(line.split()[1] for line in done.stdout.splitlines() if line.startswith("ms_per_step")))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--step-ms", type=float, nargs="+", default=[1.0, 50.0], help="the step lengths measured")
    parser.add_argument("--ranks", type=int, default=2)
    args = parse(parser, quick=dict(steps=20, repeat=1, step_ms=[1.0], ranks=1))
    figures = {}
    with tempfile.TemporaryDirectory() as tmp:
        for step in args.step_ms:
            steps = args.steps if step < 10 else max(20, args.steps // 10)
            runs: dict[str, list[float]] = {mode: [] for mode in MODES}
            for _ in range(args.repeat):  # interleaved, so slow spells hit every mode alike
                for mode in MODES:
                    runs[mode].append(step_ms(Path(tmp) / mode, steps, step, mode, args.ranks))
            median = {mode: statistics.median(values) for mode, values in runs.items()}
            print(f"{step:g} ms steps, {steps} steps, median of {args.repeat} (ms per step): "
                  + ", ".join(f"{mode} {value:.3f}" for mode, value in median.items()) + f"  runs {runs}")
            for mode in ("watchdog", "plain_watchdog", "equal_steps"):
                figures[f"{mode}_vs_off_{step:g}ms"] = median[mode] / median["off"]
    print_figures(figures)


if __name__ == "__main__":
    main()
