"""Training loops as Horovod's TensorFlow 2 examples write them (no smtrain import), for the step
profiler. Every rank writes `steps-<rank>.json` (the steps it ran, by kind) to SM_OUTPUT_DATA_DIR.

--loop keras      tf_keras `fit` with validation (DistributedOptimizer, the broadcast and metric-average
                  callbacks; tensorflow2_keras_mnist.py's shape), then `evaluate` and `predict`
--loop keras3     Keras 3 `fit` with validation on one process (no Horovod)
--loop function   a `tf.function` step with DistributedGradientTape inside (tensorflow2_mnist.py's shape)
--loop eager      eager DistributedGradientTape steps, then eager steps that allreduce each gradient
                  with `hvd.allreduce`, then a metric averaged with `hvd.allreduce`
--slow-rank R --slow-ms M   rank R spends M ms between steps (a callback, or its Python loop)
--input-ms M      every batch takes M ms to produce (a tf.data map; custom loops read it between steps)
"""
import argparse
import json
import os
import time

parser = argparse.ArgumentParser()
parser.add_argument("--loop", choices=["keras", "keras3", "function", "eager"], required=True)
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--steps", type=int, default=12)
parser.add_argument("--val-steps", type=int, default=3)
parser.add_argument("--slow-rank", type=int, default=-1)
parser.add_argument("--slow-ms", type=float, default=0)
parser.add_argument("--input-ms", type=float, default=0)
args, _ = parser.parse_known_args()

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
if args.loop != "keras3":
    os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

if args.loop == "keras3":
    import keras  # noqa: E402

    rank, size = 0, 1
elif args.loop == "keras":
    import horovod.tensorflow.keras as hvd  # noqa: E402

    hvd.init()
    rank, size = hvd.rank(), hvd.size()
else:
    import horovod.tensorflow as hvd  # noqa: E402

    hvd.init()
    rank, size = hvd.rank(), hvd.size()

BATCH = 32
rng = np.random.default_rng(rank)
x = rng.normal(size=(BATCH * args.steps, 8)).astype("float32")
y = (x.sum(axis=1, keepdims=True) > 0).astype("float32")


def dataset(repeat: bool = True) -> tf.data.Dataset:
    ds = tf.data.Dataset.from_tensor_slices((x, y))
    if args.input_ms:
        def slow(a, b):
            time.sleep(args.input_ms / 1000)
            return a, b

        ds = ds.batch(BATCH).map(lambda a, b: tf.numpy_function(slow, [a, b], [tf.float32, tf.float32]))
    else:
        ds = ds.batch(BATCH)
    return ds.repeat() if repeat else ds


def slow_here() -> None:
    if rank == args.slow_rank and args.slow_ms:
        time.sleep(args.slow_ms / 1000)


ran = {"train": 0, "eval": 0, "predict": 0}

if args.loop in ("keras", "keras3"):
    lib = keras if args.loop == "keras3" else tf.keras

    class Count(lib.callbacks.Callback):
        def on_train_batch_end(self, batch, logs=None):
            ran["train"] += 1
            slow_here()

        def on_test_batch_end(self, batch, logs=None):
            ran["eval"] += 1

        def on_predict_batch_end(self, batch, logs=None):
            ran["predict"] += 1

    model = lib.Sequential([lib.Input(shape=(8,)), lib.layers.Dense(16, activation="relu"), lib.layers.Dense(1)])
    optimizer = lib.optimizers.SGD(0.01 * size)
    callbacks = [Count()]
    if args.loop == "keras":
        optimizer = hvd.DistributedOptimizer(optimizer)
        callbacks = [hvd.callbacks.BroadcastGlobalVariablesCallback(0), hvd.callbacks.MetricAverageCallback(), *callbacks]
    model.compile(loss="mse", optimizer=optimizer)
    model.fit(dataset(), steps_per_epoch=args.steps, epochs=args.epochs, validation_data=dataset(),
              validation_steps=args.val_steps, callbacks=callbacks, verbose=0)
    model.evaluate(dataset(), steps=args.val_steps, callbacks=callbacks, verbose=0)
    model.predict(dataset(), steps=2, callbacks=callbacks, verbose=0)
else:
    model = tf.keras.Sequential([tf.keras.layers.Dense(16, activation="relu", input_shape=(8,)), tf.keras.layers.Dense(1)])
    loss = tf.losses.MeanSquaredError()
    opt = tf.optimizers.SGD(0.01 * size)

    @tf.function
    def training_step(images, labels, first_batch):
        with tf.GradientTape() as tape:
            loss_value = loss(labels, model(images, training=True))
        tape = hvd.DistributedGradientTape(tape)
        grads = tape.gradient(loss_value, model.trainable_variables)
        opt.apply_gradients(zip(grads, model.trainable_variables))
        if first_batch:
            hvd.broadcast_variables(model.variables, root_rank=0)
            hvd.broadcast_variables(opt.variables(), root_rank=0)
        return loss_value

    total = args.steps * args.epochs
    if args.loop == "function":
        for batch, (images, labels) in enumerate(dataset().take(total)):
            slow_here()
            training_step(images, labels, batch == 0)
            ran["train"] += 1
    else:
        half = total // 2
        for batch, (images, labels) in enumerate(dataset().take(half)):
            slow_here()
            with tf.GradientTape() as tape:
                loss_value = loss(labels, model(images, training=True))
            tape = hvd.DistributedGradientTape(tape)
            grads = tape.gradient(loss_value, model.trainable_variables)
            opt.apply_gradients(zip(grads, model.trainable_variables))
            if batch == 0:
                hvd.broadcast_variables(model.variables, root_rank=0)
            ran["train"] += 1
        for images, labels in dataset().take(total - half):
            slow_here()
            with tf.GradientTape() as tape:
                loss_value = loss(labels, model(images, training=True))
            grads = tape.gradient(loss_value, model.trainable_variables)
            grads = [hvd.allreduce(g) for g in grads]
            opt.apply_gradients(zip(grads, model.trainable_variables))
            ran["train"] += 1
        hvd.allreduce(loss_value, name="final_loss")

with open(os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], f"steps-{rank}.json"), "w") as f:
    json.dump(ran, f)
print(f"rank {rank} ran {ran}", flush=True)
