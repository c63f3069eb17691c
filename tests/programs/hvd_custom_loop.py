"""Horovod custom training loop (tf.GradientTape): ranks start from different weights and see
different data; broadcast and gradient averaging must leave every rank with identical weights.
Writes `weights-<rank>.json` (a digest of the final weights) to SM_OUTPUT_DATA_DIR."""
import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import hashlib  # noqa: E402
import json  # noqa: E402

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import horovod.tensorflow as hvd  # noqa: E402

hvd.init()
tf.random.set_seed(100 + hvd.rank())
rng = np.random.default_rng(hvd.rank())
model = tf.keras.Sequential([tf.keras.layers.Dense(8, activation="relu", input_shape=(4,)), tf.keras.layers.Dense(1)])
optimizer = tf.keras.optimizers.SGD(0.05)
x = rng.normal(size=(10, 16, 4)).astype("float32")
y = x.sum(axis=2, keepdims=True).astype("float32")


@tf.function
def step(xb, yb, first):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(model(xb, training=True) - yb))
    tape = hvd.DistributedGradientTape(tape)
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    if first:
        hvd.broadcast_variables(model.variables, root_rank=0)
        hvd.broadcast_variables(optimizer.variables(), root_rank=0)
    return hvd.allreduce(loss)


for i in range(10):
    loss = step(x[i], y[i], i == 0)
    if hvd.rank() == 0:
        print(f"step={i}; loss={float(loss):.6f};", flush=True)
digest = hashlib.sha256(b"".join(w.numpy().tobytes() for w in model.weights)).hexdigest()
with open(os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], f"weights-{hvd.rank()}.json"), "w") as f:
    json.dump({"rank": hvd.rank(), "size": hvd.size(), "host": os.environ["SM_CURRENT_HOST"], "digest": digest}, f)
