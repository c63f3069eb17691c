"""Horovod's Keras API on a Keras 3 model (`import keras`), each rank its own data and its own first
weights until a broadcast makes them rank 0's:
  --mode fit        model.fit with hvd.DistributedOptimizer (--passes N: backward_passes_per_step,
                    --compression fp16), the first weights broadcast with hvd.broadcast_variables;
  --mode loop       a custom loop: its own tape, `apply_gradients` in a tf.function;
  --mode tape       a custom loop with horovod.tensorflow's DistributedGradientTape and a plain optimizer;
  --mode callbacks  model.fit with Horovod's callbacks: broadcast, metric average, learning-rate warmup
                    and schedule (the learning rate read at each batch of epoch 0 and each epoch's end), the
                    best model saved (rank 0) and loaded back with hvd.load_model;
  --mode elastic    Horovod's elastic Keras state: sync (rank 0's weights everywhere), commit, restore.
In fit and loop modes rank 0 also trains a copy in this process alone, from the same first weights,
on the union of every rank's batches - what the average must equal. Writes `keras3-<rank>.json` to
SM_OUTPUT_DATA_DIR. --api horovod.keras imports that module instead of horovod.tensorflow.keras. As in the
image, TF_USE_LEGACY_KERAS=1: tf.keras is tf_keras, beside the Keras 3 this script uses."""
import argparse
import importlib
import json
import os

os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")  # the image's setting: tf.keras is tf_keras, `keras` Keras 3
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import keras  # noqa: E402
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from horovod.tensorflow import broadcast_variables  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--mode", choices=["fit", "loop", "tape", "callbacks", "elastic"], default="fit")
parser.add_argument("--passes", type=int, default=1)
parser.add_argument("--compression", choices=["none", "fp16"], default="none")
parser.add_argument("--api", default="horovod.tensorflow.keras")
parser.add_argument("--model", choices=["dense", "embedding"], default="dense")  # embedding: sparse gradients
parser.add_argument("--sparse-as-dense", default="false")
parser.add_argument("--local-bias", default="false")  # fit: the last layer's bias registered as rank-local
args, _ = parser.parse_known_args()
hvd = importlib.import_module(args.api)
hvd.init()
STEPS, BATCH, LR = 8, 16, 0.05


def data(rank: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(1000 + rank)
    if args.model == "embedding":
        ids = rng.integers(0, 20, size=(STEPS * BATCH, 3))
        return ids, (ids.sum(axis=1, keepdims=True) / 30.0 + 0.25 * rank).astype("float32")
    x = rng.normal(size=(STEPS * BATCH, 4)).astype("float32")
    return x, (x @ np.array([[1.0], [-2.0], [0.5], [3.0]], "float32") + 0.25 * rank).astype("float32")


def new_model() -> keras.Model:
    if args.model == "embedding":
        return keras.Sequential([keras.Input((3,), dtype="int32"), keras.layers.Embedding(20, 4),
                                 keras.layers.Flatten(), keras.layers.Dense(1)])
    return keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="tanh"), keras.layers.Dense(1)])


keras.utils.set_random_seed(7 + hvd.rank())  # different first weights on every rank
model = new_model()
x, y = data(hvd.rank())
found: dict = {"rank": hvd.rank(), "size": hvd.size(), "api": hvd.__name__}
options = {"backward_passes_per_step": args.passes} if args.passes > 1 else {}  # horovod.keras has no such option
if args.compression == "fp16":
    options["compression"] = hvd.Compression.fp16
if args.sparse_as_dense.lower() == "true":  # the SDK's "true" arrives as True
    options["sparse_as_dense"] = True
optimizer = hvd.DistributedOptimizer(keras.optimizers.SGD(LR), **options)
found["optimizer"] = f"{type(optimizer).__module__}.{type(optimizer).__name__}"
if args.mode == "callbacks":
    class Rates(keras.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            if not found.get("lr"):  # epoch 0: the warmup's rate at each batch
                found.setdefault("warmup", []).append(float(np.asarray(self.model.optimizer.learning_rate)))

        def on_epoch_end(self, epoch, logs=None):
            found.setdefault("lr", []).append(float(np.asarray(self.model.optimizer.learning_rate)))

    best = os.path.join(os.environ["SM_MODEL_DIR"], "best.keras")
    callbacks = [
        hvd.callbacks.BroadcastGlobalVariablesCallback(0),
        hvd.callbacks.MetricAverageCallback(),
        hvd.callbacks.LearningRateWarmupCallback(initial_lr=LR, warmup_epochs=1, steps_per_epoch=STEPS, verbose=0),
        hvd.callbacks.LearningRateScheduleCallback(initial_lr=LR, start_epoch=1, multiplier=0.5),
        Rates()]
    if hvd.rank() == 0 and hasattr(hvd.callbacks, "BestModelCheckpoint"):  # horovod.keras has none
        checkpoint = hvd.callbacks.BestModelCheckpoint(monitor="loss")
        checkpoint.filepath = best
        callbacks.append(checkpoint)
    model.compile(loss="mse", optimizer=optimizer)
    history = model.fit(x, y, batch_size=BATCH, epochs=3, verbose=0, shuffle=False, callbacks=callbacks)
    found.update(losses=[float(v) for v in history.history["loss"]], initial_lr=LR)
    if hvd.rank() == 0 and os.path.exists(best):  # the lowest loss is the last epoch's
        loaded = hvd.load_model(best)
        found["loaded"] = {"optimizer": type(loaded.optimizer).__name__,
                           "distributed": getattr(loaded.optimizer, "_smtrain_distributed", False),
                           "iterations": int(loaded.optimizer.iterations.numpy()),
                           "weights": [w.numpy().tolist() for w in loaded.weights]}
elif args.mode == "elastic":
    model.compile(loss="mse", optimizer=optimizer)
    model.fit(x, y, batch_size=BATCH, epochs=1, verbose=0, shuffle=False)  # the optimizer's slots exist now
    state = hvd.elastic.KerasState(model, epoch=hvd.rank())
    state.sync()  # rank 0's model, optimizer and epoch everywhere
    synced = [w.numpy().tolist() for w in model.weights]
    state.commit()
    model.fit(x, y, batch_size=BATCH, epochs=1, verbose=0, shuffle=False)
    state.restore()
    found.update(synced=synced, epoch=state.epoch, iterations=int(model.optimizer.iterations.numpy()),
                 restored=[w.numpy().tolist() for w in model.weights] == synced)
else:
    broadcast_variables(model.variables, root_rank=0)
    first = [w.numpy() for w in model.weights]
    if args.mode == "fit":
        if args.local_bias.lower() == "true":
            optimizer.register_local_var(model.layers[-1].bias)  # Horovod's: its gradient stays this rank's
        model.compile(loss="mse", optimizer=optimizer)
        model.fit(x, y, batch_size=BATCH, epochs=1, verbose=0, shuffle=False)
    else:
        if args.mode == "tape":
            from horovod.tensorflow import DistributedGradientTape

            optimizer = keras.optimizers.SGD(LR)

        @tf.function
        def step(xb, yb):
            with tf.GradientTape() as tape:
                loss = keras.ops.mean(keras.ops.square(model(xb, training=True) - yb))
            if args.mode == "tape":
                tape = DistributedGradientTape(tape)
            grads = tape.gradient(loss, model.trainable_variables)
            optimizer.apply_gradients(zip(grads, model.trainable_variables))

        for i in range(STEPS):
            step(x[i * BATCH:(i + 1) * BATCH], y[i * BATCH:(i + 1) * BATCH])
    if hvd.rank() == 0:  # one process, each batch the union of the ranks' batches; the passes' gradients summed
        alone = new_model()
        alone.set_weights(first)
        union = [data(r) for r in range(hvd.size())]
        ux = np.concatenate([np.concatenate([u[0][i * BATCH:(i + 1) * BATCH] for u in union]) for i in range(STEPS)])
        uy = np.concatenate([np.concatenate([u[1][i * BATCH:(i + 1) * BATCH] for u in union]) for i in range(STEPS)])
        plain = keras.optimizers.SGD(LR * args.passes, gradient_accumulation_steps=args.passes if args.passes > 1 else None)
        alone.compile(loss="mse", optimizer=plain)
        alone.fit(ux, uy, batch_size=BATCH * hvd.size(), epochs=1, verbose=0, shuffle=False)
        found["union"] = [w.numpy().tolist() for w in alone.weights]
found["weights"] = [w.numpy().tolist() for w in model.weights]
found["optimizer_tracks_model"] = bool({v.path for v in model.weights} & {v.path for v in optimizer.variables})
with open(os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], f"keras3-{hvd.rank()}.json"), "w") as f:
    json.dump(found, f)
