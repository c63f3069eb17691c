"""A training loop as users write it, timed from outside the loop (no callback, nothing added per
step): `--loop keras` (tf_keras `fit` on a tf.data pipeline) or `--loop function` (a `tf.function`
step with a GradientTape over the same pipeline); --width sizes the model's step.

It runs --blocks blocks of --steps steps. Started with step profiling (the start-up hook on
PYTHONPATH, as `train` starts a rank), it takes the hooks off and on between blocks (the patched
methods' originals put back; on, off, off, on, ...), so that both are measured in one process, in
adjacent blocks: writes {"blocks": [[on, seconds per step], ...]} to --out."""
import argparse
import json
import os
import time

os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
import tensorflow as tf  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--loop", choices=["keras", "function"], required=True)
parser.add_argument("--steps", type=int, default=300)
parser.add_argument("--warmup", type=int, default=30)
parser.add_argument("--blocks", type=int, default=10)
parser.add_argument("--micro", type=int, default=0, help="then time the hooks alone: blocks of this many calls")
parser.add_argument("--width", type=int, default=768)
parser.add_argument("--batch", type=int, default=128)
parser.add_argument("--out", required=True)
args = parser.parse_args()

x = tf.random.normal((args.batch * 8, 256))
y = tf.random.normal((args.batch * 8, 1))
data = tf.data.Dataset.from_tensor_slices((x, y)).batch(args.batch).repeat().prefetch(tf.data.AUTOTUNE)
model = tf.keras.Sequential([tf.keras.Input((256,)), tf.keras.layers.Dense(args.width, activation="relu"),
                             tf.keras.layers.Dense(args.width, activation="relu"), tf.keras.layers.Dense(1)])
optimizer = tf.keras.optimizers.SGD(0.001)

if args.loop == "keras":
    model.compile(loss="mse", optimizer=optimizer)

    def run(steps: int) -> None:
        model.fit(data, steps_per_epoch=steps, epochs=1, verbose=0)
else:
    loss_fn = tf.keras.losses.MeanSquaredError()

    @tf.function
    def step(images, labels):
        with tf.GradientTape() as tape:
            loss = loss_fn(labels, model(images, training=True))
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        return loss

    def run(steps: int) -> None:
        for images, labels in data.take(steps):
            loss = step(images, labels)
        float(loss)



def patched_methods() -> list[tuple[type, str, object, object]]:
    """(class, name, patched, original) for every method the step profiler's hooks replaced."""
    import sys

    from smtrain.profiler.hooks import PATCHES

    found = []
    for module in (sys.modules.get(name) for name in PATCHES):
        for cls in (v for v in vars(module).values() if isinstance(v, type)) if module is not None else ():
            for name, method in list(vars(cls).items()):
                if getattr(method, "__smtrain_patched__", False):
                    found.append((cls, name, method, method.__wrapped__))
    return found


def hooks(patches: list, on: bool) -> None:
    for cls, name, patched, original in patches:
        setattr(cls, name, patched if on else original)


run(args.warmup)
patches = patched_methods()
blocks: list[tuple[bool, float]] = []
for block in range(args.blocks):
    on = bool(patches) and block % 4 in (0, 3)  # on, off, off, on, ...: neither comes first more often
    hooks(patches, on)
    started = time.perf_counter()
    run(args.steps)
    blocks.append((on, (time.perf_counter() - started) / args.steps))
hooks(patches, True)


def micro() -> list[tuple[bool, float]]:
    """Seconds per call of what the hooks wrap at each step, on and off alternately: a Keras step's two
    batch callbacks on an empty CallbackList (inside fit: on_train_begin first), or a call of a
    tf.function step that computes a gradient (about the least a step function can do)."""
    if args.loop == "keras":
        callbacks = tf.keras.callbacks.CallbackList([], add_history=False, add_progbar=False, model=model)
        callbacks.on_train_begin()

        def call(i: int) -> None:
            callbacks.on_train_batch_begin(i)
            callbacks.on_train_batch_end(i)
    else:
        v = tf.Variable(1.0)

        @tf.function
        def tiny():
            with tf.GradientTape() as tape:
                y = v * v
            return tape.gradient(y, v)

        tiny()

        def call(i: int) -> None:
            tiny()
    out = []
    for block in range(2 * args.blocks):
        on = bool(patches) and block % 4 in (0, 3)
        hooks(patches, on)
        started = time.perf_counter()
        for i in range(args.micro):
            call(i)
        out.append((on, (time.perf_counter() - started) / args.micro))
    hooks(patches, True)
    return out


with open(args.out, "w") as f:
    json.dump({"blocks": blocks, "patched": len(patches), "micro": micro() if args.micro else []}, f)
