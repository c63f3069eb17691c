"""A plain Keras `fit` on one host (no smtrain import) with Keras' BackupAndRestore in the checkpoint
folder, as TensorFlow's fault-tolerance guide writes it; it raises once at global batch --fail-at (a
marker in output/data says it did). Writes output/data/starts.txt (one line per run: the epoch it
resumed at) and, at the end, done.json (epochs trained in the last run, final loss)."""
import argparse
import json
import os

import numpy as np
import tensorflow as tf

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=4)
parser.add_argument("--steps", type=int, default=10)
parser.add_argument("--fail-at", type=int, default=25)
args, _ = parser.parse_known_args()
out = os.environ["SM_OUTPUT_DATA_DIR"]
marker = os.path.join(out, "failed-once")

model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(8, activation="relu"), tf.keras.layers.Dense(1)])
model.compile(optimizer=tf.keras.optimizers.SGD(0.01), loss="mse")
x = np.random.default_rng(0).normal(size=(640, 4)).astype("float32")
dataset = tf.data.Dataset.from_tensor_slices((x, x.sum(axis=1, keepdims=True))).repeat().batch(16)


class FailOnce(tf.keras.callbacks.Callback):
    def __init__(self) -> None:
        super().__init__()
        self.batches, self.first = 0, True

    def on_epoch_begin(self, epoch, logs=None):
        if self.first:
            self.first = False
            with open(os.path.join(out, "starts.txt"), "a") as f:
                f.write(f"{epoch}\n")
        self.batches = epoch * args.steps

    def on_train_batch_begin(self, batch, logs=None):
        self.batches += 1
        if self.batches == args.fail_at and not os.path.exists(marker):
            open(marker, "w").close()
            raise RuntimeError(f"fails once at batch {self.batches}")


backup = tf.keras.callbacks.BackupAndRestore(os.path.join(os.environ["SM_CHECKPOINT_DIR"], "backup"))
history = model.fit(dataset, epochs=args.epochs, steps_per_epoch=args.steps, verbose=0, callbacks=[backup, FailOnce()])
with open(os.path.join(out, "done.json"), "w") as f:
    json.dump({"epochs": len(history.history["loss"]), "loss": history.history["loss"][-1]}, f)
