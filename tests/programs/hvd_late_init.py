"""Rank --hang-rank hangs before hvd.init (as a host whose program hangs at start-up would); the
other ranks wait in hvd.init for it."""
import argparse
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import horovod.tensorflow as hvd  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("--hang-rank", type=int, default=-1)
args = parser.parse_args()


def hanging_before_init() -> None:
    time.sleep(3600)


if int(os.environ["SM_RANK"]) == args.hang_rank:
    hanging_before_init()
hvd.init()
print(f"rank {hvd.rank()} initialised", flush=True)
