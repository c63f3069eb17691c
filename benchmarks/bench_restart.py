"""What an in-job restart (`sagemaker_max_restarts`) costs, on two simulated hosts (scripts/cluster.py;
needs root): a 2x2 Horovod TensorFlow job (tests/programs/hvd_restart.py: tf.train.CheckpointManager
every 10 steps) whose rank 3 raises once at step 30, restarted in place.

  restart started   the failure (rank 3 raises) -> every rank's new process has begun
  restart running   the failure -> every rank is back in its training loop (restored and broadcast)
  fresh start       every host's `train` started -> every rank in its loop, in the same job's first
                    attempt: what starting the job again costs on these hosts, without SageMaker's
                    instance start-up, image pull and data download that a new job adds
  fresh started     every host's `train` started -> every rank's process has begun
  program start-up  a rank's process begun -> in its loop (imports, hvd.init(), restore), the slowest
                    rank, in the first attempt / the restarted one

    /opt/smtrain/venv/bin/python benchmarks/bench_restart.py [--repeat 3]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from figures import parse, print_figures  # benchmarks/figures.py

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.harness.cluster import Cluster  # noqa: E402

PROGRAM = Path(__file__).resolve().parent.parent / "tests" / "programs" / "hvd_restart.py"
TRAIN = [str(Path(sys.executable).parent / "train")]
JOB = {"sagemaker_mpi_enabled": True, "sagemaker_mpi_num_of_processes_per_host": 2, "steps": 50, "every": 10,
       "fail-rank": 3, "fail-step": 30, "sagemaker_max_restarts": 1, "sagemaker_system_monitor": "off"}


def one_run() -> dict[str, float]:
    with Cluster("bmrs", 2, net=230) as cluster:
        cluster.write_job(JOB, program=PROGRAM)
        started = time.time()
        cluster.start(TRAIN, cluster.env(SM_PEER_WAIT_SECONDS="60"))
        statuses = cluster.wait(300)
        if set(statuses.values()) != {0}:
            raise RuntimeError(f"the job failed: {statuses}\n{cluster.hosts[0].stderr()[-3000:]}")
        runs = []  # per rank: [(step, began, running), ...]
        for rank in range(4):
            lines = (cluster.hosts[rank // 2].ml / "output" / "data" / f"starts-{rank}.txt").read_text().split("\n")
            runs.append([tuple(float(v) for v in line.split()) for line in lines if line])
        if any(len(r) != 2 for r in runs):
            raise RuntimeError(f"expected one restart of every rank, got {runs}")
        failed = (cluster.hosts[1].ml / "output" / "data" / "failed-3").stat().st_mtime
        return {"restart_started": max(r[1][1] for r in runs) - failed,
                "restart_running": max(r[1][2] for r in runs) - failed,
                "fresh_start": max(r[0][2] for r in runs) - started,
                "fresh_started": max(r[0][1] for r in runs) - started,
                "start_up_first": max(r[0][2] - r[0][1] for r in runs),
                "start_up_restarted": max(r[1][2] - r[1][1] for r in runs)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeat", type=int, default=3)
    args = parse(parser, quick=dict(repeat=1))
    runs = [one_run() for _ in range(args.repeat)]
    got = {key: statistics.median(r[key] for r in runs) for key in runs[0]}
    print(f"2 hosts x 2 ranks; median of {args.repeat} runs; seconds")
    for key, value in got.items():
        print(f"  {key.replace('_', ' '):<22}{value:>8.2f}")
    print_figures({"restart_started_s": got["restart_started"], "restart_running_s": got["restart_running"],
                   "fresh_start_s": got["fresh_start"],
                   "restart_started_vs_fresh_started": got["restart_started"] / got["fresh_started"],
                   "restart_running_vs_fresh_start": got["restart_running"] / got["fresh_start"]})


if __name__ == "__main__":
    main()
