"""Horovod's own `tensorflow2_synthetic_benchmark.py`, unmodified, 1 host x 2 ranks: images/s through
the real `train` (a SageMaker MPI job) against plain `mpirun -np 2` and `horovodrun -np 2`, in
alternating rounds (each round runs all three, the order rotating) in one run.

The script is Horovod's (Apache 2.0), not this repository's: download `tensorflow2_synthetic_benchmark.py`
from the `tensorflow2` examples of Horovod's GitHub repository (tag v0.28.1), and pass its path.

    /opt/smtrain/venv/bin/python benchmarks/bench_hvd_synthetic.py --script PATH [--rounds 3]
        [--model MobileNetV2] [--batch-size 32] [--launchers train,mpirun,horovodrun] [--train-env K=V ...] [--train-mpi-options OPTS]

`train`'s resourceconfig.json names a SageMaker CPU instance (`--instance-type ml.c5.large`, 2 vCPUs
like this VM), where `train` binds each rank to its share of the CPUs; `--instance-type local` measures
it as SDK local mode runs it (unbound). `--train-mpi-options` gives `train` the hyperparameter `sagemaker_mpi_custom_mpi_options` (e.g.
`"--bind-to core"`, plain mpirun's binding for 2 ranks). `--train-env` sets variables for `train` alone (e.g. `OMP_NUM_THREADS=2 TF_NUM_INTRAOP_THREADS=2
TF_NUM_INTEROP_THREADS=2` to undo its CPU thread split, `SM_SYSTEM_MONITOR=off`), to find where a
difference comes from.

Every launcher runs the same argv with TF_USE_LEGACY_KERAS=1 (the image's setting). Prints each
run's total img/s, then the medians and `train` against the better of the other two.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from figures import parse, print_figures  # benchmarks/figures.py

BIN = Path(sys.executable).parent
TOTAL = re.compile(r"Total img/sec on 2 \w+\(s\): ([\d.]+)")
THREAD_VARIABLES = ("OMP_NUM_THREADS", "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS")


def _env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SM_", "SAGEMAKER_", "OMPI_", *THREAD_VARIABLES))}
    env.update(TF_USE_LEGACY_KERAS="1", TF_CPP_MIN_LOG_LEVEL="2", PATH=f"{BIN}:{env.get('PATH', '')}", **extra)
    return env


def _total(output: str, what: str) -> float:
    found = TOTAL.findall(output)
    if not found:
        raise RuntimeError(f"{what}: no 'Total img/sec' line:\n{output[-3000:]}")
    return float(found[-1])


def run_train(base: Path, script: Path, script_args: dict[str, str], extra_env: dict[str, str],
              mpi_options: str, instance_type: str) -> float:
    shutil.rmtree(base, ignore_errors=True)
    (base / "input" / "config").mkdir(parents=True)
    hyperparameters = {"sagemaker_program": json.dumps(script.name), "sagemaker_submit_directory": json.dumps(str(script.parent)),
                       "sagemaker_mpi_enabled": "true", "sagemaker_mpi_num_of_processes_per_host": "2",
                       **{k: json.dumps(v) for k, v in script_args.items()}}
    if mpi_options:
        hyperparameters["sagemaker_mpi_custom_mpi_options"] = json.dumps(mpi_options)
    configs = {"resourceconfig.json": {"current_host": "algo-1", "hosts": ["algo-1"], "current_instance_type": instance_type},
               "hyperparameters.json": hyperparameters, "inputdataconfig.json": {}}
    for name, content in configs.items():
        (base / "input" / "config" / name).write_text(json.dumps(content))
    done = subprocess.run([str(BIN / "train")], env=_env(SAGEMAKER_BASE_DIR=str(base), SM_CONTROL_PORT="17410", **extra_env),
                          capture_output=True, text=True, timeout=1800)
    if done.returncode != 0:
        raise RuntimeError(f"train exited {done.returncode}:\n{done.stderr[-3000:]}")
    return _total(done.stdout, "train")


def run_direct(launcher: list[str], script: Path, script_args: dict[str, str]) -> float:
    argv = [*launcher, sys.executable, str(script), *[a for k, v in script_args.items() for a in (f"--{k}", v)]]
    done = subprocess.run(argv, env=_env(), capture_output=True, text=True, timeout=1800, cwd=script.parent)
    if done.returncode != 0:
        raise RuntimeError(f"{argv[0]} exited {done.returncode}:\n{done.stderr[-3000:]}")
    return _total(done.stdout, argv[0])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--script", type=Path, required=True, help="Horovod's tensorflow2_synthetic_benchmark.py")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--model", default="MobileNetV2")
    parser.add_argument("--batch-size", default="32")
    parser.add_argument("--iters", default="5")
    parser.add_argument("--launchers", default="train,mpirun,horovodrun")
    parser.add_argument("--train-env", nargs="*", default=[], metavar="K=V")
    parser.add_argument("--train-mpi-options", default="")
    parser.add_argument("--instance-type", default="ml.c5.large",
                        help="what resourceconfig.json says (a 2-vCPU SageMaker CPU instance, like this VM; 'local' as SDK local mode)")
    args = parse(parser, quick=dict(rounds=1, iters="1"))
    train_env = dict(item.split("=", 1) for item in args.train_env)
    script = args.script.resolve()
    script_args = {"model": args.model, "batch-size": args.batch_size, "num-warmup-batches": "3",
                   "num-batches-per-iter": "3", "num-iters": args.iters}
    base = Path(tempfile.mkdtemp(prefix="bench-hvd-synthetic-")) / "ml"
    launchers = {
        "train": lambda: run_train(base, script, script_args, train_env, args.train_mpi_options, args.instance_type),
        "mpirun": lambda: run_direct([shutil.which("mpirun") or "mpirun", "--allow-run-as-root", "-np", "2",
                                      "-x", "TF_USE_LEGACY_KERAS"], script, script_args),
        "horovodrun": lambda: run_direct([str(BIN / "horovodrun"), "-np", "2"], script, script_args),
    }
    order = args.launchers.split(",")
    results: dict[str, list[float]] = {name: [] for name in order}
    for round_number in range(args.rounds):
        for name in order[round_number % len(order):] + order[:round_number % len(order)]:
            value = launchers[name]()
            results[name].append(value)
            print(f"round {round_number + 1}: {name} {value:.1f} img/s", flush=True)
    shutil.rmtree(base.parent, ignore_errors=True)
    medians = {name: statistics.median(values) for name, values in results.items()}
    for name, values in results.items():
        print(f"{name}: median {medians[name]:.1f} img/s ({min(values):.1f}-{max(values):.1f})")
    figures = {f"hvd_synthetic_{name}_img_s": value for name, value in medians.items()}
    others = [value for name, value in medians.items() if name != "train"]
    if "train" in medians and others:
        figures["hvd_synthetic_train_vs_best_other"] = medians["train"] / max(others)
    print_figures(figures)


if __name__ == "__main__":
    main()
