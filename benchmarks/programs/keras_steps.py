"""Training steps of one model with `fit`, timed: Keras 3 (`--keras 3`, `import keras`) or tf_keras
(`--keras tf`, `tf.keras` under TF_USE_LEGACY_KERAS=1), with Horovod's DistributedOptimizer (`--horovod on`,
run under MPI) or without. An MNIST-sized MLP (784-512-512-10), batch 64 per rank, SGD with momentum, data in
memory; `--norm sync` puts Horovod's SyncBatchNormalization after each hidden layer (Keras 3's from
smtrain.horovod_keras, tf_keras's from horovod.tensorflow). Rank 0 prints `step_ms <median of the timed steps>`."""
import argparse
import os
import statistics
import time

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--keras", choices=["3", "tf"], default="3")
parser.add_argument("--horovod", choices=["on", "off"], default="on")
parser.add_argument("--steps", type=int, default=60)
parser.add_argument("--warmup", type=int, default=10)
parser.add_argument("--batch-size", type=int, default=64)
parser.add_argument("--norm", choices=["none", "sync"], default="none")
args, _ = parser.parse_known_args()
if args.keras == "3":
    import keras
else:
    import tensorflow as tf

    keras = tf.keras
rank = 0
if args.horovod == "on":
    import horovod.tensorflow.keras as hvd

    hvd.init()
    rank = hvd.rank()

rng = np.random.default_rng(rank)
steps = args.warmup + args.steps
x = rng.normal(size=(steps * args.batch_size, 784)).astype("float32")
y = rng.integers(0, 10, size=steps * args.batch_size)
if args.norm == "sync" and args.keras == "3":
    from smtrain.horovod_keras import SyncBatchNormalization
elif args.norm == "sync":
    from horovod.tensorflow import SyncBatchNormalization


def hidden():
    return [keras.layers.Dense(512, activation="relu"), *([SyncBatchNormalization()] if args.norm == "sync" else [])]


model = keras.Sequential([keras.Input((784,)), *hidden(), *hidden(), keras.layers.Dense(10)])
optimizer = keras.optimizers.SGD(0.01, momentum=0.9)
if args.horovod == "on":
    optimizer = hvd.DistributedOptimizer(optimizer)
model.compile(optimizer=optimizer, loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))


class Timer(keras.callbacks.Callback):
    def __init__(self):
        super().__init__()
        self.times = []

    def on_train_batch_begin(self, batch, logs=None):
        self.began = time.perf_counter()

    def on_train_batch_end(self, batch, logs=None):
        if batch >= args.warmup:
            self.times.append(time.perf_counter() - self.began)


timer = Timer()
model.fit(x, y, batch_size=args.batch_size, epochs=1, shuffle=False, verbose=0, callbacks=[timer])
if rank == 0:
    print(f"step_ms {statistics.median(timer.times) * 1000:.3f}", flush=True)
