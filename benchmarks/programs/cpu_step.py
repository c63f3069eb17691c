"""A CPU Horovod training step (a dense model's forward, backward and allreduce), timed: rank 0
writes the median step time of --steps steps (after --warmup) to SM_OUTPUT_DATA_DIR/step-time."""
import argparse
import os
import statistics
import time

os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
os.environ.setdefault("TF_USE_LEGACY_KERAS", "1")
import tensorflow as tf  # noqa: E402
import horovod.tensorflow as hvd  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=40)
parser.add_argument("--warmup", type=int, default=5)
args, _ = parser.parse_known_args()
hvd.init()
model = tf.keras.Sequential([tf.keras.Input((512,)), tf.keras.layers.Dense(1024, activation="relu"),
                             tf.keras.layers.Dense(1024, activation="relu"), tf.keras.layers.Dense(1)])
optimizer = tf.keras.optimizers.SGD(0.001)
x = tf.random.normal((256, 512))
y = tf.random.normal((256, 1))


@tf.function
def step():
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.square(model(x, training=True) - y))
    tape = hvd.DistributedGradientTape(tape)
    optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
    return loss


times = []
for number in range(args.warmup + args.steps):
    started = time.perf_counter()
    step().numpy()
    if number >= args.warmup:
        times.append(time.perf_counter() - started)
if hvd.rank() == 0:
    with open(os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], "step-time"), "w") as f:
        f.write(repr(statistics.median(times)))
