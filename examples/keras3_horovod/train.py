"""Horovod with Keras 3 (`import keras`), as Horovod's own Keras MNIST example trains - a small convolutional
network, Adam with the learning rate scaled by the number of ranks, Horovod's DistributedOptimizer, the
broadcast, metric-average and learning-rate warmup callbacks, checkpoints on rank 0 - on MNIST-shaped data
made here (no download), or on the `train` channel's `.npz` files where the job has one (`x`: N x 28 x 28
images, `y`: N labels). Run it with `sagemaker_mpi_enabled` and any number of processes per host."""
import argparse
import glob
import os

import keras
import numpy as np
import horovod.tensorflow.keras as hvd

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=3)
parser.add_argument("--steps-per-epoch", type=int, default=50)
parser.add_argument("--batch-size", type=int, default=64)
args, _ = parser.parse_known_args()

hvd.init()


def mnist_shaped(rank: int) -> tuple[np.ndarray, np.ndarray]:
    """The channel's files where there are any (every rank its share), else digits drawn as noisy strokes."""
    files = sorted(glob.glob(os.path.join(os.environ.get("SM_CHANNEL_TRAIN", "/nonexistent"), "*.npz")))
    if files:
        parts = [np.load(f) for f in files[rank::hvd.size()]]
        return np.concatenate([p["x"] for p in parts]), np.concatenate([p["y"] for p in parts])
    rng = np.random.default_rng(rank)
    labels = rng.integers(0, 10, size=4096)
    images = rng.normal(0.0, 0.3, size=(4096, 28, 28)).astype("float32")
    images[np.arange(4096), 2 + 2 * labels, 4:24] += 1.0  # each class its own stroke
    return images, labels


images, labels = mnist_shaped(hvd.rank())
data = (images[..., np.newaxis].astype("float32"), labels.astype("int64"))

model = keras.Sequential([
    keras.Input((28, 28, 1)),
    keras.layers.Conv2D(16, 3, activation="relu"),
    keras.layers.Conv2D(32, 3, activation="relu"),
    keras.layers.MaxPooling2D(2),
    keras.layers.Dropout(0.25),
    keras.layers.Flatten(),
    keras.layers.Dense(64, activation="relu"),
    keras.layers.Dropout(0.5),
    keras.layers.Dense(10, activation="softmax"),
])
# Horovod: the learning rate scaled by the number of ranks, the optimizer averaging every step's gradients
scaled_lr = 0.001 * hvd.size()
model.compile(loss=keras.losses.SparseCategoricalCrossentropy(), metrics=["accuracy"],
              optimizer=hvd.DistributedOptimizer(keras.optimizers.Adam(scaled_lr)))


class MetricLines(keras.callbacks.Callback):
    """`epoch=0; loss=...; accuracy=...;` on rank 0: lines SageMaker's metric definitions match."""

    def on_epoch_end(self, epoch, logs=None):
        if hvd.rank() == 0:
            print(f"epoch={epoch}; loss={logs['loss']:.4f}; accuracy={logs['accuracy']:.4f};", flush=True)


callbacks = [
    hvd.callbacks.BroadcastGlobalVariablesCallback(0),  # every rank starts from rank 0's weights
    hvd.callbacks.MetricAverageCallback(),  # the metrics averaged over the ranks, before the callbacks below
    hvd.callbacks.LearningRateWarmupCallback(initial_lr=scaled_lr, warmup_epochs=1, verbose=0),
    MetricLines(),
]
if hvd.rank() == 0:  # checkpoints on rank 0 only, where SageMaker syncs them
    checkpoints = os.environ.get("SM_CHECKPOINT_DIR", "checkpoints")
    os.makedirs(checkpoints, exist_ok=True)
    callbacks.append(keras.callbacks.ModelCheckpoint(os.path.join(checkpoints, "checkpoint-{epoch}.keras")))

model.fit(*data, batch_size=args.batch_size, steps_per_epoch=args.steps_per_epoch // hvd.size(), epochs=args.epochs,
          callbacks=callbacks, verbose=0)
if hvd.rank() == 0:
    model.save(os.path.join(os.environ["SM_MODEL_DIR"], "model.keras"))
