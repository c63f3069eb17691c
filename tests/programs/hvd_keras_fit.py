"""Horovod's whole Keras API with tf_keras `fit`: DistributedOptimizer and every callback (broadcast,
metric average, learning-rate warmup and schedule) must leave every rank with identical weights and
identical (averaged) losses. Writes `weights-<rank>.json` (digest, losses, learning rates per epoch)
to SM_OUTPUT_DATA_DIR. With --horovod-keras it imports `horovod.keras` (Horovod's Keras docs, AWS's
Horovod examples) instead of `horovod.tensorflow.keras`, and rank 0 saves the model and loads it back
with `hvd.load_model`."""
import os
import sys

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import hashlib  # noqa: E402
import json  # noqa: E402

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
if "--horovod-keras" in sys.argv:
    import horovod.keras as hvd  # noqa: E402
else:
    import horovod.tensorflow.keras as hvd  # noqa: E402

hvd.init()
tf.random.set_seed(200 + hvd.rank())
rng = np.random.default_rng(hvd.rank())
x = rng.normal(size=(256, 4)).astype("float32")
y = x.sum(axis=1, keepdims=True).astype("float32")
model = tf.keras.Sequential([tf.keras.layers.Dense(8, activation="relu", input_shape=(4,)), tf.keras.layers.Dense(1)])
LR = 0.01 * hvd.size()
model.compile(loss="mse", optimizer=hvd.DistributedOptimizer(tf.keras.optimizers.SGD(LR, momentum=0.9)))


class MetricLines(tf.keras.callbacks.Callback):
    def on_epoch_end(self, epoch, logs=None):
        if hvd.rank() == 0:
            print(f"epoch={epoch}; loss={logs['loss']:.6f};", flush=True)


history = model.fit(x, y, batch_size=32, epochs=3, verbose=0, callbacks=[
    hvd.callbacks.BroadcastGlobalVariablesCallback(0),
    hvd.callbacks.MetricAverageCallback(),
    hvd.callbacks.LearningRateWarmupCallback(initial_lr=LR, warmup_epochs=1, steps_per_epoch=8, verbose=0),
    hvd.callbacks.LearningRateScheduleCallback(initial_lr=LR, start_epoch=1, multiplier=0.5),  # x0.5 per epoch
    MetricLines(),
])
digest = hashlib.sha256(b"".join(w.numpy().tobytes() for w in model.weights)).hexdigest()
loaded_optimizer = None
if "--horovod-keras" in sys.argv and hvd.rank() == 0:
    path = os.path.join(os.environ["SM_MODEL_DIR"], "model.h5")
    model.save(path)
    loaded = hvd.load_model(path)
    loaded_optimizer = f"{type(loaded.optimizer).__module__}.{type(loaded.optimizer).__name__}"
    assert hashlib.sha256(b"".join(w.numpy().tobytes() for w in loaded.weights)).hexdigest() == digest
with open(os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], f"weights-{hvd.rank()}.json"), "w") as f:
    json.dump({"rank": hvd.rank(), "size": hvd.size(), "host": os.environ["SM_CURRENT_HOST"], "digest": digest,
               "losses": [float(v) for v in history.history["loss"]], "initial_lr": LR,
               "lr": [float(v) for v in history.history["lr"]], "loaded_optimizer": loaded_optimizer,
               "api": hvd.__name__}, f)
