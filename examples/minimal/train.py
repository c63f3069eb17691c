"""A minimal training script for the image: a Keras model on random data, arguments from the job's
hyperparameters, the model saved where SageMaker uploads it from, metric lines for CloudWatch."""
import argparse
import os

import numpy as np
import tensorflow as tf

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--batch-size", type=int, default=64)
args = parser.parse_args()

x = np.random.rand(2048, 8).astype("float32")
y = x.sum(axis=1, keepdims=True)
model = tf.keras.Sequential([tf.keras.layers.Dense(32, activation="relu"), tf.keras.layers.Dense(1)])
model.compile(optimizer="adam", loss="mse")
history = model.fit(x, y, epochs=args.epochs, batch_size=args.batch_size, verbose=0)
for epoch, loss in enumerate(history.history["loss"]):
    print(f"epoch={epoch}; loss={loss:.4f};", flush=True)
model.save(os.path.join(os.environ["SM_MODEL_DIR"], "model.keras"))
