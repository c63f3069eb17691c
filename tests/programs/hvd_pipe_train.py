"""Horovod training whose data comes through Pipe mode (smtrain.pipes.dataset) on every rank.

Records are tf.train.Example with features id (int64), x (4 floats), y (float). Every rank writes
the ids it trained on and a digest of its final weights to SM_OUTPUT_DATA_DIR/pipe-<rank>.json.
"""
import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import hashlib  # noqa: E402
import json  # noqa: E402

import tensorflow as tf  # noqa: E402
import horovod.tensorflow as hvd  # noqa: E402

from smtrain import pipes  # noqa: E402

hvd.init()
features = {"id": tf.io.FixedLenFeature([], tf.int64), "x": tf.io.FixedLenFeature([4], tf.float32),
            "y": tf.io.FixedLenFeature([1], tf.float32)}
ds = pipes.dataset("train", epochs=2).map(lambda r: tf.io.parse_single_example(r, features)).batch(8)
tf.random.set_seed(7 + hvd.rank())
model = tf.keras.Sequential([tf.keras.layers.Dense(8, activation="relu", input_shape=(4,)), tf.keras.layers.Dense(1)])
optimizer = tf.keras.optimizers.SGD(0.01)
seen = []
for step, batch in enumerate(ds):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(model(batch["x"], training=True) - batch["y"]))
    tape = hvd.DistributedGradientTape(tape)
    optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
    if step == 0:
        hvd.broadcast_variables(model.variables, root_rank=0)
        hvd.broadcast_variables(optimizer.variables(), root_rank=0)
    seen += batch["id"].numpy().tolist()
    if hvd.rank() == 0:
        print(f"step={step}; loss={float(loss):.5f};", flush=True)
digest = hashlib.sha256(b"".join(w.numpy().tobytes() for w in model.weights)).hexdigest()
with open(os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], f"pipe-{hvd.rank()}.json"), "w") as f:
    json.dump({"rank": hvd.rank(), "host": os.environ["SM_CURRENT_HOST"], "ids": seen, "digest": digest}, f)
