"""A rank that records when it started and when it ended (wall clock, shared by all simulated hosts).

--run-for S    sleep S seconds
--steps N      then N steps through smtrain.progress.step() (what the step profiler records and the
               workers ship to the master at the end)
--die-rank R   rank R SIGKILLs itself instead of ending
"""
import os
import signal
import sys
import time

started = time.time()
out = os.environ["SM_OUTPUT_DATA_DIR"]
rank = int(os.environ["SM_RANK"])
args = dict(zip(sys.argv[1::2], sys.argv[2::2]))
with open(os.path.join(out, f"start-{rank}"), "w") as f:
    f.write(repr(started))
time.sleep(float(args.get("--run-for", "1")))
if int(args.get("--steps", "0")):
    from smtrain import progress

    for _ in range(int(args["--steps"]) + 1):  # each call ends the step the previous one began
        progress.step()
if rank == int(args.get("--die-rank", "-1")):
    with open(os.path.join(out, "killed"), "w") as f:
        f.write(repr(time.time()))
    os.kill(os.getpid(), signal.SIGKILL)
with open(os.path.join(out, f"end-{rank}"), "w") as f:
    f.write(repr(time.time()))
