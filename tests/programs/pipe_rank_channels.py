"""AWS's Horovod + Pipe-mode layout ("Distributed training with Horovod and Pipe Mode input"), as its
script reads it, with no smtrain import: rank r reads its own channels `train<sep>r` (--epochs epochs)
and `validation<sep>r` with the original PipeModeDataset API, and rank 0 then reads `eval` alone,
after its training loop. --shared CHANNEL instead: every rank reads that one channel. Each rank writes
what it read, per channel and epoch (hex, one record a line), to SM_OUTPUT_DATA_DIR/got-<rank>-<channel>-<epoch>."""
import argparse
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import horovod.tensorflow as hvd  # noqa: E402
import tensorflow as tf  # noqa: E402
from sagemaker_tensorflow import PipeModeDataset  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--sep", default="_")
parser.add_argument("--shared", default="")
args, _ = parser.parse_known_args()
hvd.init()
out = os.environ["SM_OUTPUT_DATA_DIR"]


def read(channel: str, epochs: int) -> None:
    dataset = PipeModeDataset(channel=channel, record_format="TFRecord")
    for epoch in range(epochs):  # each iterator reads the channel's next FIFO, as in SageMaker's containers
        with open(os.path.join(out, f"got-{hvd.rank()}-{channel}-{epoch}"), "w") as f:
            f.write("".join(record.numpy().hex() + "\n" for record in dataset))


if args.shared:
    read(args.shared, args.epochs)
else:
    read(f"train{args.sep}{hvd.rank()}", args.epochs)
    read(f"validation{args.sep}{hvd.rank()}", 1)
    hvd.allreduce(tf.constant(1.0), name="fit_done")  # the training loop ends on every rank together
    if hvd.rank() == 0:
        read("eval", 1)
print(f"rank {hvd.rank()} done", flush=True)
