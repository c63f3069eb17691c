"""A Horovod TensorFlow 2 loop as Horovod's examples write them (no smtrain import) that checkpoints with
tf.train.CheckpointManager every --every steps on rank 0 and resumes from the newest checkpoint at its
start (rank 0 restores, then broadcasts), for in-job restarts. Batches depend on (step, rank) only, so
a resumed run computes what an uninterrupted one does.

--fail-rank R --fail-step S --fail-how raise|kill|always
    rank R fails before step S: `raise` once (a marker in its host's output/data says it did), `kill`
    (SIGKILL itself) once, `always` raise every time
At the end rank 0 writes SM_MODEL_DIR/weights.json: the weights, the steps run, and the step each run
of the program started from (in SM_OUTPUT_DATA_DIR/starts-<rank>.txt: one line per run - the step,
when the run began and when it reached its loop).
"""
import time

BEGAN = time.time()  # this run of the program began (before its imports)

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=50)
parser.add_argument("--every", type=int, default=10)
parser.add_argument("--fail-rank", type=int, default=-1)
parser.add_argument("--fail-step", type=int, default=-1)
parser.add_argument("--fail-how", choices=["raise", "kill", "always"], default="raise")
parser.add_argument("--step-ms", type=float, default=0)
args, _ = parser.parse_known_args()

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import horovod.tensorflow as hvd  # noqa: E402

hvd.init()
rank = hvd.rank()
out = os.environ["SM_OUTPUT_DATA_DIR"]

w = tf.Variable(tf.zeros((8, 1)))
b = tf.Variable(tf.zeros((1,)))
step = tf.Variable(0, dtype=tf.int64)
checkpoint = tf.train.Checkpoint(w=w, b=b, step=step)
manager = tf.train.CheckpointManager(checkpoint, os.path.join(os.environ["SM_CHECKPOINT_DIR"], "tf"), max_to_keep=3)
if rank == 0 and manager.latest_checkpoint:
    checkpoint.restore(manager.latest_checkpoint).expect_partial()
hvd.broadcast_variables([w, b, step], root_rank=0)
with open(os.path.join(out, f"starts-{rank}.txt"), "a") as f:
    f.write(f"{int(step.numpy())} {BEGAN:.3f} {time.time():.3f}\n")


@tf.function
def train_step(x, y):
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean((tf.matmul(x, w) + b - y) ** 2)
    grads = [hvd.allreduce(g) for g in tape.gradient(loss, [w, b])]
    w.assign_sub(0.05 * grads[0])
    b.assign_sub(0.05 * grads[1])
    return loss


marker = os.path.join(out, f"failed-{rank}")
while int(step.numpy()) < args.steps:
    s = int(step.numpy())
    if rank == args.fail_rank and s == args.fail_step and (args.fail_how == "always" or not os.path.exists(marker)):
        open(marker, "w").close()
        if args.fail_how == "kill":
            os.kill(os.getpid(), signal.SIGKILL)
        raise RuntimeError(f"rank {rank} fails at step {s}")
    rng = np.random.default_rng(s * 1000 + rank)
    x = rng.random((32, 8), dtype=np.float32)
    y = x.sum(axis=1, keepdims=True)
    loss = train_step(tf.constant(x), tf.constant(y))
    step.assign_add(1)
    if args.step_ms:
        time.sleep(args.step_ms / 1000)
    if rank == 0 and int(step.numpy()) % args.every == 0:
        manager.save(checkpoint_number=int(step.numpy()))

if rank == 0:
    with open(os.path.join(os.environ["SM_MODEL_DIR"], "weights.json"), "w") as f:
        json.dump({"w": w.numpy().ravel().tolist(), "b": b.numpy().tolist(), "steps": int(step.numpy())}, f)
print(f"rank {rank}: done at step {int(step.numpy())}, loss {float(loss):.6f}", flush=True)
