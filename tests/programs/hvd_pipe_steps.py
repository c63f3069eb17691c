"""Horovod ranks that each take batches (--batch, drop_remainder) from their Pipe channel and allreduce
once per step; each writes its step count to SM_OUTPUT_DATA_DIR/steps-<rank>. Unequal record counts
per rank leave one rank waiting in an allreduce the others never join, unless --equal-steps yes
(smtrain.pipes.equal_steps) makes every rank take the same number of steps."""
import argparse
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import horovod.tensorflow as hvd  # noqa: E402
import tensorflow as tf  # noqa: E402

from smtrain import pipes  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--batch", type=int, default=8)
parser.add_argument("--equal-steps", default="no")
args = parser.parse_args()
hvd.init()
batches = pipes.dataset("train", epochs=1, timeout=60).batch(args.batch, drop_remainder=True)
if args.equal_steps == "yes":
    batches = pipes.equal_steps(batches)
steps = 0
for batch in batches:
    hvd.allreduce(tf.constant(float(batch.shape[0])), name="step")
    steps += 1
with open(os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], f"steps-{hvd.rank()}"), "w") as f:
    f.write(str(steps))
