"""Keras `fit` under MultiWorkerMirroredStrategy from TF_CONFIG (no smtrain import), with Keras'
BackupAndRestore, as TensorFlow's fault-tolerance guide writes it: a restarted run resumes from the
last backup. Its folder must be one every worker reads (the chief writes it): --backup-dir, on
SageMaker an s3:// folder; by default the checkpoint folder (one host).

--epochs N --steps S         N epochs of S steps
--kill-worker I --kill-at B  worker I SIGKILLs itself at global batch B, once (a marker in its host's
                             output/data says it did)
Writes SM_OUTPUT_DATA_DIR/starts-worker<I>.txt (one line per run: the epoch it resumed at) and, at the
end, SM_OUTPUT_DATA_DIR/done-worker<I>.json (epochs trained, final loss).
"""
import argparse
import json
import os
import signal

os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")  # as the image: Keras 3's fit does not run under this strategy
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=4)
parser.add_argument("--steps", type=int, default=10)
parser.add_argument("--kill-worker", type=int, default=-1)
parser.add_argument("--kill-at", type=int, default=-1)
parser.add_argument("--backup-dir", default=os.path.join(os.environ["SM_CHECKPOINT_DIR"], "backup"))
args, _ = parser.parse_known_args()
index = json.loads(os.environ["TF_CONFIG"])["task"]["index"]
out = os.environ["SM_OUTPUT_DATA_DIR"]
marker = os.path.join(out, f"killed-worker{index}")

strategy = tf.distribute.MultiWorkerMirroredStrategy()
with strategy.scope():
    model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(8, activation="relu"),
                                 tf.keras.layers.Dense(1)])
    model.compile(optimizer=tf.keras.optimizers.SGD(0.01), loss="mse")
rng = np.random.default_rng(0)
x = rng.normal(size=(1024, 4)).astype("float32")
y = x.sum(axis=1, keepdims=True)
dataset = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(16)


class Starts(tf.keras.callbacks.Callback):
    def __init__(self) -> None:
        super().__init__()
        self.batches = 0
        self.first = True

    def on_epoch_begin(self, epoch, logs=None):
        if self.first:
            self.first = False
            with open(os.path.join(out, f"starts-worker{index}.txt"), "a") as f:
                f.write(f"{epoch}\n")
        self.batches = epoch * args.steps

    def on_train_batch_begin(self, batch, logs=None):
        self.batches += 1
        if index == args.kill_worker and self.batches == args.kill_at and not os.path.exists(marker):
            open(marker, "w").close()
            os.kill(os.getpid(), signal.SIGKILL)


backup = tf.keras.callbacks.BackupAndRestore(args.backup_dir)
history = model.fit(dataset, epochs=args.epochs, steps_per_epoch=args.steps, verbose=0, callbacks=[backup, Starts()])
with open(os.path.join(out, f"done-worker{index}.json"), "w") as f:
    json.dump({"epochs": len(history.history["loss"]), "loss": history.history["loss"][-1]}, f)
