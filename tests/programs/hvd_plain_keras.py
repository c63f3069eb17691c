"""A plain Horovod Keras job as users write it (no smtrain import): tf_keras `fit` with
hvd.DistributedOptimizer and Horovod's callbacks, for --epochs epochs of --batches batches, each batch
taking about --batch-seconds. --block-rank R --block-at-batch N: rank R blocks forever in a callback
at batch N of its first epoch (it writes `stopped-at` to SM_OUTPUT_DATA_DIR first)."""
import argparse
import os
import time

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import horovod.tensorflow.keras as hvd  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--batches", type=int, default=10)
parser.add_argument("--batch-seconds", type=float, default=0.5)
parser.add_argument("--block-rank", type=int, default=-1)
parser.add_argument("--block-at-batch", type=int, default=-1)
args, _ = parser.parse_known_args()
hvd.init()
rng = np.random.default_rng(hvd.rank())
x = rng.normal(size=(32 * args.batches, 4)).astype("float32")
y = x.sum(axis=1, keepdims=True)
model = tf.keras.Sequential([tf.keras.layers.Dense(8, activation="relu", input_shape=(4,)), tf.keras.layers.Dense(1)])
model.compile(loss="mse", optimizer=hvd.DistributedOptimizer(tf.keras.optimizers.SGD(0.01 * hvd.size())))


def blocked_in_a_callback() -> None:
    with open(os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], "stopped-at"), "w") as f:
        f.write(str(time.time()))
    time.sleep(3600)


class SlowBatches(tf.keras.callbacks.Callback):
    """Stands in for a model whose steps take a while."""

    def on_train_batch_begin(self, batch, logs=None):
        if hvd.rank() == args.block_rank and batch == args.block_at_batch:
            blocked_in_a_callback()
        time.sleep(args.batch_seconds)


model.fit(x, y, batch_size=32, epochs=args.epochs, verbose=0, callbacks=[
    hvd.callbacks.BroadcastGlobalVariablesCallback(0),
    hvd.callbacks.MetricAverageCallback(),
    SlowBatches(),
])
print(f"rank {hvd.rank()} finished", flush=True)
