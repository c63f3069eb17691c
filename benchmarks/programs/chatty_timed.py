"""A rank that writes `--lines` metric lines to stdout, each in two writes (as `print` under PYTHONUNBUFFERED),
and records when it began and ended writing (wall clock) in SM_OUTPUT_DATA_DIR/times-<rank>.json."""
import argparse
import json
import os
import time

parser = argparse.ArgumentParser()
parser.add_argument("--lines", type=int, default=50000)
args = parser.parse_args()
rank = int(os.environ["OMPI_COMM_WORLD_RANK"])
began = time.time()
for i in range(args.lines):
    os.write(1, f"metric rank={rank} i={i} loss={i / 7:.6f};".encode())
    os.write(1, b"\n")
ended = time.time()
with open(os.path.join(os.environ["SM_OUTPUT_DATA_DIR"], f"times-{rank}.json"), "w") as f:
    json.dump({"began": began, "ended": ended}, f)
