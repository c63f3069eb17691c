"""CPU instances, P Horovod ranks on one host: the step time with the toolkit's share of the cores
(OMP_NUM_THREADS and TF's intra-/inter-op pools = cores/P for each rank, and Open MPI yielding the core
while a rank waits) against each rank using every core (what TensorFlow does unless told:
TF_NUM_INTRAOP_THREADS etc. set to the core count) and against the split with Open MPI spinning while it
waits (its default where a host has a slot per rank: OMPI_MCA_mpi_yield_when_idle=0), alternating runs of
the real `train` with single-host MPI, in one run.

    /opt/smtrain/venv/bin/python benchmarks/bench_cpu_threads.py [--ranks 2] [--runs 3] [--steps 40]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from figures import parse, print_figures  # benchmarks/figures.py

from smtrain.plan.mpirun_command import MPI_YIELD
from smtrain.rank.launcher import THREAD_VARIABLES

HERE = Path(__file__).resolve().parent
TRAIN = str(Path(sys.executable).parent / "train")


def run(base: Path, ranks: int, threads: dict[str, str], steps: int) -> float:
    """One job's median step time over `steps` steps; `threads` set by hand (empty: the toolkit's share)."""
    shutil.rmtree(base, ignore_errors=True)
    (base / "input" / "config").mkdir(parents=True)
    (base / "code").mkdir()
    shutil.copy(HERE / "programs" / "cpu_step.py", base / "code" / "train.py")
    configs = {"resourceconfig.json": {"current_host": "algo-1", "hosts": ["algo-1"]},
               "hyperparameters.json": {"sagemaker_program": '"train.py"', "sagemaker_mpi_enabled": "true",
                                        "sagemaker_mpi_num_of_processes_per_host": str(ranks), "steps": str(steps)},
               "inputdataconfig.json": {}}
    for name, content in configs.items():
        (base / "input" / "config" / name).write_text(json.dumps(content))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SM_", "SAGEMAKER_", *THREAD_VARIABLES, MPI_YIELD))}
    env.update(SAGEMAKER_BASE_DIR=str(base), SM_SYSTEM_MONITOR="off", SM_CONTROL_PORT="17400")
    env.update(threads)
    done = subprocess.run([TRAIN], env=env, capture_output=True, timeout=600)
    if done.returncode != 0:
        raise RuntimeError(done.stderr.decode()[-3000:])
    return float((base / "output" / "data" / "step-time").read_text())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--ranks", type=int, default=2)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--steps", type=int, default=40, help="timed steps of each job")
    args = parse(parser, quick=dict(runs=1, steps=2, ranks=1))
    base = Path(tempfile.mkdtemp(prefix="bench-cpu-threads-")) / "ml"
    split, every_core, spinning = [], [], []
    for _ in range(args.runs):
        split.append(run(base, args.ranks, {}, args.steps))
        every_core.append(run(base, args.ranks, {name: str(os.cpu_count()) for name in THREAD_VARIABLES}, args.steps))
        spinning.append(run(base, args.ranks, {MPI_YIELD: "0"}, args.steps))
    shutil.rmtree(base.parent, ignore_errors=True)
    s, e, w = statistics.median(split), statistics.median(every_core), statistics.median(spinning)
    print(f"{os.cpu_count()} cores, {args.ranks} ranks: median step {s * 1000:.1f} ms with the toolkit's share, "
          f"{e * 1000:.1f} ms with every rank using every core, {w * 1000:.1f} ms with MPI spinning while it waits")
    print_figures({"cpu_step_ms_split": s * 1000, "cpu_step_ms_every_core": e * 1000, "cpu_step_ms_spinning": w * 1000,
                   "cpu_step_split_speedup": e / s, "cpu_step_yield_speedup": w / s})


if __name__ == "__main__":
    main()
