"""Horovod ranks that count each step (smtrain.progress) and allreduce in it; rank --stall-rank sleeps
forever after --stall-after steps, leaving the others waiting in the next allreduce."""
import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import horovod.tensorflow as hvd  # noqa: E402
import tensorflow as tf  # noqa: E402

from smtrain import progress  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--stall-rank", type=int, default=-1)
parser.add_argument("--stall-after", type=int, default=5)
args = parser.parse_args()
hvd.init()


def sleeping_in_the_training_loop() -> None:
    with open(os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], "stalled-at"), "w") as f:
        f.write(str(time.time()))
    time.sleep(3600)


for step in range(1000):
    if hvd.rank() == args.stall_rank and step == args.stall_after:
        sleeping_in_the_training_loop()
    progress.step()
    hvd.allreduce(tf.constant(1.0), name="step")
    time.sleep(0.1)
