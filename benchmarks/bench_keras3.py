"""Horovod with Keras 3 against Horovod with tf_keras, and against Keras 3 alone: the median step time of
one model's `fit` (benchmarks/programs/keras_steps.py: an MNIST-sized MLP, batch 64 per rank, in graph mode as
`fit` runs it) through the real `train`, 1 host x 2 ranks with Horovod (a SageMaker MPI job), and 1 process
without Horovod whose TensorFlow threads are one rank's share (1 of this 2-core VM's cores, as `train` gives
each of 2 ranks). Alternating rounds, the order rotating; the step times are medians of the rounds, each
ratio the median of the rounds' own ratios (the machine's speed drifts between rounds more than between the
cases of one round).

    /opt/smtrain/venv/bin/python benchmarks/bench_keras3.py [--rounds 5] [--steps 200]

Figures: `keras3_vs_tf_keras_horovod`: tf_keras's step time over Keras 3's, both with Horovod (at least 0.95:
Keras 3 no slower); `keras3_vs_tf_keras_syncbn`: the same with SyncBatchNormalization after each hidden
layer (Keras 3's layer from smtrain.horovod_keras, tf_keras's Horovod's own); `keras3_horovod_over_alone`:
Keras 3's step with Horovod on 2 ranks over its step alone (what a rank pays for averaging, and for sharing
the machine with another rank)."""
from __future__ import annotations

import argparse
import json
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from figures import parse, print_figures  # benchmarks/figures.py

BIN = Path(sys.executable).parent
PROGRAM = Path(__file__).resolve().parent / "programs" / "keras_steps.py"
CASES = {"keras3_horovod": ("3", "on", "none"), "tf_keras_horovod": ("tf", "on", "none"), "keras3_alone": ("3", "off", "none"),
         "keras3_syncbn": ("3", "on", "sync"), "tf_keras_syncbn": ("tf", "on", "sync")}


def run_case(base: Path, keras: str, horovod: str, norm: str, steps: int, ranks: int) -> float:
    shutil.rmtree(base, ignore_errors=True)
    (base / "input" / "config").mkdir(parents=True)
    hyperparameters = {"sagemaker_program": json.dumps(PROGRAM.name), "sagemaker_submit_directory": json.dumps(str(PROGRAM.parent)),
                       "keras": keras, "horovod": horovod, "norm": norm, "steps": str(steps)}
    if horovod == "on":
        hyperparameters.update(sagemaker_mpi_enabled="true", sagemaker_mpi_num_of_processes_per_host=str(ranks))
    (base / "input" / "config" / "hyperparameters.json").write_text(json.dumps(hyperparameters))
    env = {"PATH": f"{BIN}:/usr/bin:/bin", "SAGEMAKER_BASE_DIR": str(base), "SM_SYSTEM_MONITOR": "off",
           "TF_USE_LEGACY_KERAS": "1", "TF_CPP_MIN_LOG_LEVEL": "2", "HOME": str(base)}
    if horovod == "off":  # one rank's share of the threads
        env.update(OMP_NUM_THREADS="1", TF_NUM_INTRAOP_THREADS="1", TF_NUM_INTEROP_THREADS="1")
    done = subprocess.run([str(BIN / "train")], env=env, capture_output=True, text=True, timeout=600)
    found = re.findall(r"^step_ms ([\d.]+)$", done.stdout, re.M)
    if done.returncode != 0 or not found:
        raise RuntimeError(f"{keras}/{horovod}/{norm}: exit {done.returncode}\n{(done.stdout + done.stderr)[-3000:]}")
    return float(found[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=200)
    parser.add_argument("--ranks", type=int, default=2, help="Horovod's ranks (the figures are for 2, this VM's cores)")
    args = parse(parser, quick=dict(rounds=1, steps=5, ranks=1))
    results: dict[str, list[float]] = {name: [] for name in CASES}
    names = list(CASES)
    with tempfile.TemporaryDirectory() as tmp:
        for round_number in range(args.rounds):
            for name in names[round_number % len(names):] + names[:round_number % len(names)]:
                step_ms = run_case(Path(tmp) / name, *CASES[name], args.steps, args.ranks)
                results[name].append(step_ms)
                print(f"round {round_number}: {name} {step_ms:.2f} ms a step", flush=True)
    medians = {name: statistics.median(values) for name, values in results.items()}
    for name, value in medians.items():
        print(f"median {name}: {value:.2f} ms a step")
    def ratio(over: str, under: str) -> float:  # each round's own ratio (its two cases seconds apart), their median
        return statistics.median(a / b for a, b in zip(results[over], results[under]))

    print_figures({"keras3_vs_tf_keras_horovod": ratio("tf_keras_horovod", "keras3_horovod"),
                   "keras3_vs_tf_keras_syncbn": ratio("tf_keras_syncbn", "keras3_syncbn"),
                   "keras3_horovod_over_alone": ratio("keras3_horovod", "keras3_alone"),
                   "keras3_horovod_step_ms": medians["keras3_horovod"], "tf_keras_horovod_step_ms": medians["tf_keras_horovod"],
                   "keras3_alone_step_ms": medians["keras3_alone"], "keras3_syncbn_step_ms": medians["keras3_syncbn"],
                   "tf_keras_syncbn_step_ms": medians["tf_keras_syncbn"]})


if __name__ == "__main__":
    main()
