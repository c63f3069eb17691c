"""A custom training loop on tf_keras as a user who reaches for Horovod's Keras optimizer writes it: its own
tf.GradientTape, `hvd.DistributedOptimizer(...).apply_gradients` (no DistributedGradientTape), every
rank its own data, in a tf.function (--mode function) or eagerly (--mode eager). Rank 0 also trains a
copy of the model in this process alone, from the same first weights, on the union of every rank's
batches - what averaging must equal. Writes `custom-loop-<rank>.json` (the final weights; rank 0 also
the reference's) to SM_OUTPUT_DATA_DIR."""
import argparse
import json
import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import horovod.tensorflow.keras as hvd  # noqa: E402
from horovod.tensorflow import broadcast_variables  # noqa: E402  (horovod.tensorflow.keras has none)

parser = argparse.ArgumentParser()
parser.add_argument("--mode", choices=["function", "eager"], default="function")
args, _ = parser.parse_known_args()
hvd.init()
STEPS, BATCH = 8, 16


def batches(rank: int) -> tuple[np.ndarray, np.ndarray]:
    x = np.random.default_rng(1000 + rank).normal(size=(STEPS, BATCH, 4)).astype("float32")
    return x, (x @ np.array([[1.0], [-2.0], [0.5], [3.0]], "float32") + 0.25 * rank).astype("float32")


def new_model() -> tf.keras.Model:
    return tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(8, activation="tanh"),
                                tf.keras.layers.Dense(1)])


tf.random.set_seed(7 + hvd.rank())  # different first weights on every rank, until the broadcast
model = new_model()
optimizer = hvd.DistributedOptimizer(tf.keras.optimizers.SGD(0.1))
broadcast_variables(model.variables, root_rank=0)
first = [w.numpy() for w in model.weights]


def step(model, optimizer, xb, yb):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(model(xb, training=True) - yb))
    grads = tape.gradient(loss, model.trainable_variables)
    optimizer.apply_gradients(zip(grads, model.trainable_variables))
    return loss


distributed = tf.function(step) if args.mode == "function" else step
x, y = batches(hvd.rank())
for i in range(STEPS):
    distributed(model, optimizer, x[i], y[i])
found = {"weights": [w.numpy().tolist() for w in model.weights]}
if hvd.rank() == 0:  # the same steps on one process, each batch the union of the ranks' batches
    alone = new_model()
    alone.set_weights(first)
    plain = tf.keras.optimizers.SGD(0.1)
    union = [batches(r) for r in range(hvd.size())]
    for i in range(STEPS):
        step(alone, plain, np.concatenate([u[0][i] for u in union]), np.concatenate([u[1][i] for u in union]))
    found["union"] = [w.numpy().tolist() for w in alone.weights]
with open(os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], f"custom-loop-{hvd.rank()}.json"), "w") as f:
    json.dump(found, f)
