"""A rank that writes many metric lines, each in two writes as `print` under PYTHONUNBUFFERED makes them,
then exits at once (or, as `--fail-rank`, fails once every rank has written). An unmodified script: no
smtrain, no Horovod; its rank is Open MPI's. Every line names its rank and index, so a reader of the job's
log can tell a torn, merged, lost or doubled line."""
import argparse
import os
import sys
import time

parser = argparse.ArgumentParser()
parser.add_argument("--lines", type=int, default=3000)
parser.add_argument("--fail-rank", type=int, default=-1)
args = parser.parse_args()
rank = int(os.environ["OMPI_COMM_WORLD_RANK"])
pad = "x" * (rank * 7 % 40)
os.write(2, f"stderr rank={rank} starts\n".encode())
for i in range(args.lines):
    os.write(1, f"metric rank={rank} i={i} loss={i / 7:.6f}; {pad}".encode())
    os.write(1, b"\n")
os.write(1, f"progress rank={rank} 1/3\rprogress rank={rank} 2/3\rprogress rank={rank} 3/3\n".encode())
os.write(2, f"stderr rank={rank} wrote {args.lines} lines\n".encode())
if args.fail_rank >= 0:
    time.sleep(1.0 if rank == args.fail_rank else 30.0)  # every rank has written before one fails
    if rank == args.fail_rank:
        raise RuntimeError(f"rank {rank} fails on purpose")
os.write(1, f"last words rank={rank} without a newline".encode())
sys.exit(0)
