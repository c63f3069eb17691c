"""A Horovod TensorFlow job as users write one (a tf.function step with DistributedGradientTape, the
variables broadcast from rank 0), --steps steps; records when each rank started and when its script
ended (wall clock, shared by every simulated host): its interpreter's exit comes after."""
import os
import sys
import time

started = time.time()
out = os.environ["SM_OUTPUT_DATA_DIR"]
rank = int(os.environ["SM_RANK"])
args = dict(zip(sys.argv[1::2], sys.argv[2::2]))
os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
import horovod.tensorflow as hvd  # noqa: E402
import tensorflow as tf  # noqa: E402

hvd.init()
with open(os.path.join(out, f"start-{rank}"), "w") as f:
    f.write(repr(started))
w = tf.Variable(tf.random.normal((64, 1), seed=1))
optimizer = tf.keras.optimizers.SGD(0.01)
x, y = tf.random.normal((32, 64), seed=rank), tf.random.normal((32, 1), seed=rank)


@tf.function
def step(first: bool) -> tf.Tensor:
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean((x @ w - y) ** 2)
    tape = hvd.DistributedGradientTape(tape)
    optimizer.apply_gradients(zip(tape.gradient(loss, [w]), [w]))
    if first:
        hvd.broadcast_variables([w], root_rank=0)
    return loss


for i in range(int(args.get("--steps", "10"))):
    step(i == 0)
with open(os.path.join(out, f"end-{rank}"), "w") as f:
    f.write(repr(time.time()))
