"""A script written for SageMaker's TensorFlow container that shards a Pipe channel by host, as the README says
for a FullyReplicated channel on several hosts: `PipeModeDataset(...).shard(len(hosts), host_index)`, one
iterator (one FIFO) per epoch, then each rank's records per epoch (hex, one per line) to
SM_OUTPUT_DATA_DIR/shard-<rank>-<epoch>. No smtrain import, no Horovod."""
import argparse
import json
import os

os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
from sagemaker_tensorflow import PipeModeDataset  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=2)
args, _ = parser.parse_known_args()
rank = os.environ["OMPI_COMM_WORLD_RANK"]
hosts = json.loads(os.environ["SM_HOSTS"])
dataset = PipeModeDataset(channel="train", record_format="TFRecord").shard(len(hosts), hosts.index(os.environ["SM_CURRENT_HOST"]))
for epoch in range(args.epochs):
    with open(os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], f"shard-{rank}-{epoch}"), "w") as f:
        f.write("".join(record.numpy().hex() + "\n" for record in dataset))
