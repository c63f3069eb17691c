"""Checkpoint save latency and training-step stall: smtrain.checkpoints.CheckpointStore (synchronous
and asynchronous) against tf.train.CheckpointManager.save, on the same tf_keras model (Adam, ~50 MB
of state), interleaved in one run.

A synchronous save stalls the step by about its latency. This store also fsyncs every file and folder
and records CRC32Cs, which TensorFlow's does not: the price of a checkpoint that a kill or a spot
interruption cannot tear. The asynchronous store's step waits only for the copy of the state into
host memory; its save-to-durable latency (save() until wait() returns) is reported beside.

    /opt/smtrain/venv/bin/python benchmarks/bench_checkpoints.py [--saves 10]
"""
from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path

from figures import parse, print_figures  # benchmarks/figures.py

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import tensorflow as tf  # noqa: E402
import tf_keras as keras  # noqa: E402

from smtrain.checkpoints import CheckpointStore  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--saves", type=int, default=10)
    args = parse(parser, quick=dict(saves=1))
    model = keras.Sequential([keras.layers.Dense(1024, activation="relu", input_shape=(1024,)),
                              keras.layers.Dense(1024, activation="relu"), keras.layers.Dense(1024),
                              keras.layers.Dense(1024), keras.layers.Dense(1)])
    optimizer = keras.optimizers.Adam(1e-4)
    x, y = tf.random.normal((64, 1024)), tf.random.normal((64, 1))

    @tf.function
    def step():
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(model(x) - y))
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))

    step()
    state = tf.train.Checkpoint(model=model, optimizer=optimizer)
    megabytes = sum(v.numpy().nbytes for v in state.model.weights + optimizer.variables()) / 1e6
    with tempfile.TemporaryDirectory() as tmp:
        ours = CheckpointStore(Path(tmp) / "ours", keep=2, log=lambda m: None)
        background = CheckpointStore(Path(tmp) / "async", keep=2, log=lambda m: None, asynchronous=True)
        theirs = tf.train.CheckpointManager(state, str(Path(tmp) / "tf"), max_to_keep=2)
        samples: dict[str, list[float]] = {"plain step": [], "ours: save": [], "tf: save": [],
                                           "ours: step + save": [], "tf: step + save": [],
                                           "async: step + save": [], "async: save to durable": []}
        for i in range(args.saves):  # interleaved, so the page cache and disk state hit both alike
            t = time.perf_counter(); step(); samples["plain step"].append(time.perf_counter() - t)
            t = time.perf_counter(); ours.save(i, state); samples["ours: save"].append(time.perf_counter() - t)
            t = time.perf_counter(); theirs.save(); samples["tf: save"].append(time.perf_counter() - t)
            t = time.perf_counter(); step(); ours.save(1000 + i, state)
            samples["ours: step + save"].append(time.perf_counter() - t)
            t = time.perf_counter(); step(); theirs.save()
            samples["tf: step + save"].append(time.perf_counter() - t)
            t = time.perf_counter(); step(); saved = time.perf_counter(); background.save(2000 + i, state)
            samples["async: step + save"].append(time.perf_counter() - t)
            background.wait()
            samples["async: save to durable"].append(time.perf_counter() - saved)
    median = {k: statistics.median(v) * 1000 for k, v in samples.items()}
    print(f"model + Adam state: {megabytes:.0f} MB; median of {args.saves} (ms)")
    for name, value in median.items():
        print(f"  {name:<20}{value:>9.1f}")
    print(f"save latency, ours / tf: {median['ours: save'] / median['tf: save']:.2f}x")
    print(f"step stall (step + save - plain step): ours {median['ours: step + save'] - median['plain step']:.1f} ms, "
          f"tf {median['tf: step + save'] - median['plain step']:.1f} ms")
    ours_stall = median["ours: step + save"] - median["plain step"]
    tf_stall = median["tf: step + save"] - median["plain step"]
    async_stall = median["async: step + save"] - median["plain step"]
    print(f"asynchronous: step stall {async_stall:.1f} ms, save to durable {median['async: save to durable']:.1f} ms")
    print_figures({"save_ms": median["ours: save"], "save_vs_tf": median["ours: save"] / median["tf: save"],
                   "stall_ms": ours_stall, "stall_vs_tf": ours_stall / tf_stall,
                   "async_stall_ms": async_stall, "async_stall_vs_tf": async_stall / tf_stall,
                   "async_durable_ms": median["async: save to durable"]})


if __name__ == "__main__":
    main()
