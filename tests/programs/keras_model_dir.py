"""A script as users write them for SageMaker's TensorFlow estimator (no smtrain import): it gets
--model_dir s3://... and writes there ModelCheckpoint weights, a CheckpointManager checkpoint, TensorBoard
events and a SavedModel; run again, it restores from them and says so."""
import argparse
import json

import numpy as np
import tensorflow as tf

parser = argparse.ArgumentParser()
parser.add_argument("--model_dir")
parser.add_argument("--epochs", type=int, default=2)
args, _ = parser.parse_known_args()

model = tf.keras.Sequential([tf.keras.layers.Input((4,)), tf.keras.layers.Dense(8, activation="relu"), tf.keras.layers.Dense(1)])
model.compile(optimizer="adam", loss="mse")
ckpt = tf.train.Checkpoint(model=model, step=tf.Variable(0, dtype=tf.int64))
manager = tf.train.CheckpointManager(ckpt, f"{args.model_dir}/manager", max_to_keep=2)
restored = manager.restore_or_initialize()
x = np.random.rand(256, 4).astype("float32")
y = x.sum(axis=1, keepdims=True)
callbacks = [
    tf.keras.callbacks.ModelCheckpoint(args.model_dir + "/weights/ckpt-{epoch:02d}", save_weights_only=True),
    tf.keras.callbacks.TensorBoard(log_dir=f"{args.model_dir}/tensorboard"),
]
model.fit(x, y, epochs=args.epochs, batch_size=32, verbose=2, callbacks=callbacks)
ckpt.step.assign_add(args.epochs)
manager.save()
tf.saved_model.save(model, f"{args.model_dir}/export/1")
loaded = tf.saved_model.load(f"{args.model_dir}/export/1")
latest = tf.train.latest_checkpoint(f"{args.model_dir}/weights")
print("RESULT " + json.dumps({"restored": restored, "step": int(ckpt.step.numpy()), "latest_weights": latest,
                              "events": len(tf.io.gfile.glob(f"{args.model_dir}/tensorboard/train/events.*")),
                              "serves": loaded.signatures is not None}))
