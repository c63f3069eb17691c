"""A MultiWorkerMirroredStrategy Keras script as users write them for SageMaker's TensorFlow estimator
(no smtrain import): `--model_dir s3://...` gets ModelCheckpoint weights (each non-chief worker writes
to a temporary folder there that Keras deletes), BackupAndRestore, TensorBoard events and a SavedModel;
a second run starts from the newest weights. Each worker reports what it saw to output/data/s3-<i>.json."""
import argparse
import json
import os

import numpy as np
import tensorflow as tf

parser = argparse.ArgumentParser()
parser.add_argument("--model_dir")
args, _ = parser.parse_known_args()

strategy = tf.distribute.MultiWorkerMirroredStrategy()
index = json.loads(os.environ["TF_CONFIG"])["task"]["index"]
with strategy.scope():
    model = tf.keras.Sequential([tf.keras.layers.Input((4,)), tf.keras.layers.Dense(8, activation="relu"),
                                 tf.keras.layers.Dense(1)])
    model.compile(optimizer="adam", loss="mse")
restored = tf.train.latest_checkpoint(f"{args.model_dir}/weights")
if restored:
    model.load_weights(restored)
x = np.random.rand(256, 4).astype("float32")
data = tf.data.Dataset.from_tensor_slices((x, x.sum(axis=1, keepdims=True))).batch(32).repeat()
model.fit(data, epochs=2, steps_per_epoch=4, verbose=2, callbacks=[
    tf.keras.callbacks.ModelCheckpoint(args.model_dir + "/weights/ckpt-{epoch:02d}", save_weights_only=True),
    tf.keras.callbacks.BackupAndRestore(f"{args.model_dir}/backup"),
    tf.keras.callbacks.TensorBoard(log_dir=f"{args.model_dir}/tensorboard"),
])
export = f"{args.model_dir}/export/1" if index == 0 else f"{args.model_dir}/export-worker{index}"
model.save(export)  # every worker takes part; a non-chief's copy is deleted, as TensorFlow's guide does
if index != 0:
    tf.io.gfile.rmtree(export)
out = os.path.join(os.environ.get("SM_OUTPUT_DATA_DIR", "."), f"s3-{index}.json")
with open(out, "w") as f:
    json.dump({"restored": restored, "latest": tf.train.latest_checkpoint(f"{args.model_dir}/weights"),
               "listing": sorted(tf.io.gfile.listdir(args.model_dir)),
               "saved_model": tf.io.gfile.exists(f"{args.model_dir}/export/1/saved_model.pb")}, f)
