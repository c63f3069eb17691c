"""A training script as written for AWS's TensorFlow 2.21 training container, where `tf.keras` is Keras 3: Keras 3's
own API through `tf.keras` (`tf.keras.ops`, `tf.keras.version()`, a `.keras` file), SDK v2's `--model_dir`
accepted. Not one line of it knows about this image."""
import argparse
import os

import numpy as np
import tensorflow as tf

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--model_dir")
args = parser.parse_args()

x = np.random.default_rng(0).random((512, 8), dtype="float32")
y = tf.keras.ops.sum(tf.keras.ops.convert_to_tensor(x), axis=1, keepdims=True)
model = tf.keras.Sequential([tf.keras.Input((8,)), tf.keras.layers.Dense(16, activation="relu"), tf.keras.layers.Dense(1)])
model.compile(optimizer=tf.keras.optimizers.Adam(0.01), loss="mse")
history = model.fit(x, y, epochs=args.epochs, batch_size=64, verbose=0)
print(f"keras {tf.keras.version()}; loss={history.history['loss'][-1]:.4f};", flush=True)
model.save(os.path.join(os.environ["SM_MODEL_DIR"], "model.keras"))
