"""A script written for SageMaker's TensorFlow container: reads channel `train` with the original
`sagemaker_tensorflow.PipeModeDataset` API, --epochs times through `.repeat()`, and writes each
rank's records (hex, one per line) to SM_OUTPUT_DATA_DIR/pmd-<rank>."""
import argparse
import os

os.environ["TF_CPP_MIN_LOG_LEVEL"] = "2"
from sagemaker_tensorflow import PipeModeDataset  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int, default=1)
parser.add_argument("--record-format", default="TFRecord")
args, _ = parser.parse_known_args()
rank = os.environ.get("SM_RANK", "0")
dataset = PipeModeDataset(channel="train", record_format=args.record_format).repeat(args.epochs)
with open(os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], f"pmd-{rank}"), "w") as f:
    f.write("".join(record.numpy().hex() + "\n" for record in dataset))
