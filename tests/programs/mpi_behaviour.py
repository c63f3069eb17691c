"""An MPI-launched program whose behaviour the cluster tests choose with arguments (no TensorFlow).

--crash-rank R --crash-after S   rank R raises an exception S seconds after starting
--on-term exit0|continue         on SIGTERM: record it, then exit 0 or carry on regardless
--run-for S                      otherwise run for S seconds, then exit 0
Each rank writes `running-<rank>` on start and `sigterm-<rank>` on SIGTERM into SM_OUTPUT_DATA_DIR.
"""
import argparse
import os
import signal
import sys
import time

parser = argparse.ArgumentParser()
parser.add_argument("--crash-rank", type=int, default=-1)
parser.add_argument("--crash-after", type=float, default=1.0)
parser.add_argument("--on-term", default="exit0")
parser.add_argument("--run-for", type=float, default=60)
args = parser.parse_args()
rank = int(os.environ["SM_RANK"])
out = os.environ["SM_OUTPUT_DATA_DIR"]


def on_term(signum, frame):
    with open(os.path.join(out, f"sigterm-{rank}"), "w") as f:
        f.write(str(os.getpid()))
    if args.on_term == "exit0":
        sys.exit(0)


signal.signal(signal.SIGTERM, on_term)
with open(os.path.join(out, f"running-{rank}"), "w") as f:
    f.write(str(os.getpid()))
print(f"rank {rank} running on {os.environ['SM_CURRENT_HOST']}", flush=True)
start = time.monotonic()
while time.monotonic() - start < args.run_for:
    if rank == args.crash_rank and time.monotonic() - start >= args.crash_after:
        raise RuntimeError(f"rank {rank} failed on purpose")
    time.sleep(0.05)
