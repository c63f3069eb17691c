"""MultiWorkerMirroredStrategy from TF_CONFIG, as SageMaker's TensorFlow container sets it: a custom
training loop over all workers. Its behaviour the cluster tests choose with arguments:

--steps N                            train N steps (default 40), then exit 0
--crash-worker I --crash-at-step S   worker I raises at step S (the others then wait in a collective)
--on-term exit0|continue             on SIGTERM: record it, then exit 0 at once or carry on regardless
--oom-worker I --crash-at-step S     worker I allocates memory at step S until the OOM killer ends it
Writes into SM_OUTPUT_DATA_DIR: running-worker<I> once training runs, crashing-worker<I> as it raises,
sigterm-worker<I> on SIGTERM, weights-worker<I>.json (a digest of the weights) at the end.
"""
import argparse
import hashlib
import json
import os
import signal

os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=40)
parser.add_argument("--crash-worker", type=int, default=-1)
parser.add_argument("--crash-at-step", type=int, default=5)
parser.add_argument("--on-term", default="exit0")
parser.add_argument("--oom-worker", type=int, default=-1)
args, _ = parser.parse_known_args()
task = json.loads(os.environ["TF_CONFIG"])["task"]
me = f"{task['type']}{task['index']}"
out = os.environ["SM_OUTPUT_DATA_DIR"]


def on_term(signum, frame):
    with open(os.path.join(out, f"sigterm-{me}"), "w") as f:
        f.write(str(os.getpid()))
    if args.on_term == "exit0":
        os._exit(0)  # at once, without running TF's shutdown


strategy = tf.distribute.MultiWorkerMirroredStrategy()
signal.signal(signal.SIGTERM, on_term)  # after the strategy: its coordination service takes SIGTERM over
tf.random.set_seed(100 + task["index"])  # different initial weights: the strategy must sync them
with strategy.scope():
    model = tf.keras.Sequential([tf.keras.Input((4,)), tf.keras.layers.Dense(8, activation="relu"),
                                 tf.keras.layers.Dense(1)])
    optimizer = tf.keras.optimizers.SGD(0.01)
rng = np.random.default_rng(task["index"])
x = rng.normal(size=(512, 4)).astype("float32")
y = x.sum(axis=1, keepdims=True)
options = tf.data.Options()
options.experimental_distribute.auto_shard_policy = tf.data.experimental.AutoShardPolicy.OFF
dataset = tf.data.Dataset.from_tensor_slices((x, y)).repeat().batch(16).with_options(options)
iterator = iter(strategy.experimental_distribute_dataset(dataset))


@tf.function
def train_step(batch):
    def step(inputs):
        features, labels = inputs
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(model(features, training=True) - labels))
        optimizer.apply_gradients(zip(tape.gradient(loss, model.trainable_variables), model.trainable_variables))
        return loss

    return strategy.reduce(tf.distribute.ReduceOp.MEAN, strategy.run(step, args=(batch,)), axis=None)


for number in range(args.steps):
    if task["index"] == args.crash_worker and number == args.crash_at_step:
        open(os.path.join(out, f"crashing-{me}"), "w").close()
        raise RuntimeError(f"worker {task['index']} failed on purpose")
    if task["index"] == args.oom_worker and number == args.crash_at_step:
        open(os.path.join(out, f"crashing-{me}"), "w").close()
        hog = []
        while True:
            hog.append(np.ones(4 << 20))  # 32 MB a time, touched
    loss = float(train_step(next(iterator)))
    if number == 0:
        with open(os.path.join(out, f"running-{me}"), "w") as f:
            f.write(str(os.getpid()))
    if task["index"] == 0 and number % 10 == 0:
        print(f"step={number}; loss={loss:.6f};", flush=True)
digest = hashlib.sha256(b"".join(w.numpy().tobytes() for w in model.weights)).hexdigest()
with open(os.path.join(out, f"weights-{me}.json"), "w") as f:
    json.dump({"task": me, "host": os.environ["SM_CURRENT_HOST"], "digest": digest,
               "tf_config": json.loads(os.environ["TF_CONFIG"])}, f)
