"""Start-up latency: time from starting `train` to the program's first output line.

Measures, interleaved in one run on the same /opt/ml tree and the same tiny program:
  plain     python program.py                 (the floor)
  train     this toolkit's `train` (the profiler on: the default)
  train-off the same with the profiler off (SM_SYSTEM_MONITOR, SM_FRAMEWORK_METRICS off)
  oracle    sagemaker-training's `train` (5.1.4, requirements/common.txt)
and prints medians, the overhead over plain python and the ratios. Then what a worker host adds to
its start-up in an MPI job across hosts (sshd's own start is not new): its sshd's host key made, the
job's key the master gives it checked and trusted (smtrain.starters.mpirun.keys), in the same run.

    /opt/smtrain/venv/bin/python benchmarks/bench_startup.py [--runs 30]
"""
from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from figures import parse, print_figures  # benchmarks/figures.py

HERE = Path(__file__).resolve().parent
BIN = Path(sys.executable).parent
PROGRAM = "import sys\nprint('first line', flush=True)\n"


def make_tree(base: Path) -> dict[str, str]:
    host = socket.gethostname()  # sagemaker-training waits until every host name resolves
    (base / "input" / "config").mkdir(parents=True)
    (base / "code").mkdir()
    (base / "code" / "program.py").write_text(PROGRAM)
    for name, content in {
        "resourceconfig.json": {"current_host": host, "hosts": [host]},
        "hyperparameters.json": {"sagemaker_program": '"program.py"', "epochs": "1"},
        "inputdataconfig.json": {"train": {"TrainingInputMode": "File"}},
    }.items():
        (base / "input" / "config" / name).write_text(json.dumps(content))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SM_", "SAGEMAKER_"))}
    env.update(SAGEMAKER_BASE_DIR=str(base), PYTHONUNBUFFERED="1")
    return env


def time_to_first_line(argv: list[str], env: dict[str, str], cwd: Path) -> float:
    start = time.perf_counter()
    proc = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    elapsed = time.perf_counter() - start
    proc.stdout.read()
    proc.wait()
    if line != b"first line\n" or proc.returncode != 0:
        raise RuntimeError(f"{argv[0]}: unexpected first line {line!r}, status {proc.returncode}")
    return elapsed


def worker_ssh_setup_ms(runs: int) -> float:
    """Median time of a worker's ssh steps: the host key made, the job's key checked and trusted."""
    from smtrain.starters.mpirun.keys import make_host_key, make_job_key, trust_key
    from smtrain.wire.ssh_trust import parse_public_key

    with tempfile.TemporaryDirectory() as tmp:
        key = make_job_key(f"{tmp}/master", ["algo-2"])
        samples = []
        for _ in range(runs):
            start = time.perf_counter()
            make_host_key(f"{tmp}/worker")
            trust_key(f"{tmp}/worker", parse_public_key(key))
            samples.append(time.perf_counter() - start)
    return statistics.median(samples) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--runs", type=int, default=30)
    args = parse(parser, quick=dict(runs=1))
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "ml"
        env = make_tree(base)
        off = {**env, "SM_SYSTEM_MONITOR": "off", "SM_FRAMEWORK_METRICS": "off"}
        commands = {
            "plain": ([sys.executable, str(base / "code" / "program.py")], env),
            "train": ([str(BIN / "train")], env),
            "train-off": ([str(BIN / "train")], off),
            "oracle": ([sys.executable, "-c", "from sagemaker_training.cli.train import main; main()"], env),
        }
        samples: dict[str, list[float]] = {name: [] for name in commands}
        for name, (argv, variables) in commands.items():  # warm the page cache once
            time_to_first_line(argv, variables, base / "code")
        for _ in range(args.runs):
            for name, (argv, variables) in commands.items():
                samples[name].append(time_to_first_line(argv, variables, base / "code"))
    median = {name: statistics.median(values) * 1000 for name, values in samples.items()}
    print(f"time from start to the program's first output line, median of {args.runs} runs (ms)")
    print(f"{'launcher':<28}{'median':>9}{'p90':>9}{'over plain':>12}{'ratio':>8}")
    labels = {"plain": "python program.py", "train": "train (this toolkit)", "train-off": "train, profiler off",
              "oracle": "sagemaker-training 5.1.4"}
    for name in commands:
        p90 = sorted(samples[name])[int(0.9 * (len(samples[name]) - 1))] * 1000
        print(f"{labels[name]:<28}{median[name]:>9.1f}{p90:>9.1f}{median[name] - median['plain']:>12.1f}"
              f"{median[name] / median['plain']:>8.2f}")
    print(f"sagemaker-training / train: {median['oracle'] / median['train']:.1f}x")
    print(f"goal: train adds <= 50 ms over plain python: {'met' if median['train'] - median['plain'] <= 50 else 'NOT met'}")
    ssh_ms = worker_ssh_setup_ms(args.runs)
    print(f"a worker's ssh keys (host key made, the job's key trusted): {ssh_ms:.1f} ms (goal: <= 20 ms)")
    print_figures({"worker_ssh_setup_ms": ssh_ms,"train_over_plain_ms": median["train"] - median["plain"],
                   "train_profiler_off_over_plain_ms": median["train-off"] - median["plain"],
                   "oracle_vs_train": median["oracle"] / median["train"]})


if __name__ == "__main__":
    main()
