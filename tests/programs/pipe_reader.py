"""Reads Pipe-mode channels through smtrain.pipes and records what each rank got.

--channels a,b --epochs N: for each epoch and channel, writes the records (one per line, hex if not
printable) to SM_OUTPUT_DATA_DIR/got-<rank>-<channel>-<epoch>.
"""
import argparse
import os

from smtrain import pipes

parser = argparse.ArgumentParser()
parser.add_argument("--channels", default="train")
parser.add_argument("--epochs", type=int, default=1)
args = parser.parse_args()
rank = os.environ.get("SM_RANK", "0")
for epoch in range(args.epochs):
    for channel in args.channels.split(","):
        got = list(pipes.records(channel, epoch, timeout=60))
        with open(os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], f"got-{rank}-{channel}-{epoch}"), "w") as f:
            f.write("".join(r.hex() + "\n" for r in got))
print(f"rank {rank} read {args.epochs} epoch(s) of {args.channels}", flush=True)
