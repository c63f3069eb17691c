"""A script written for SageMaker's TensorFlow container that reads a Pipe channel through PipeModeDataset, one
iterator (one FIFO) per epoch, and shards it as such scripts do: `--shard rank` as AWS's Horovod samples
(`.shard(hvd.size(), hvd.rank())`: the rank and size Horovod gives, from the launcher's variables here, so that
the test does not wait for Horovod's start-up), `--shard host` as the README once said for a FullyReplicated
channel (`.shard(len(hosts), host_index)`), `--shard none`. Each rank's records per epoch (hex, one per line)
go to SM_OUTPUT_DATA_DIR/shard-<rank>-<epoch>. No smtrain import."""
import argparse
import json
import os

os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
from sagemaker_tensorflow import PipeModeDataset  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=2)
parser.add_argument("--shard", choices=["rank", "host", "none"], default="none")
args, _ = parser.parse_known_args()
rank, size = int(os.environ["OMPI_COMM_WORLD_RANK"]), int(os.environ["OMPI_COMM_WORLD_SIZE"])
hosts = json.loads(os.environ["SM_HOSTS"])
dataset = PipeModeDataset(channel="train", record_format="TFRecord")
if args.shard == "rank":
    dataset = dataset.shard(size, rank)
elif args.shard == "host":
    dataset = dataset.shard(len(hosts), hosts.index(os.environ["SM_CURRENT_HOST"]))
for epoch in range(args.epochs):
    with open(os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], f"shard-{rank}-{epoch}"), "w") as f:
        f.write("".join(record.numpy().hex() + "\n" for record in dataset))
