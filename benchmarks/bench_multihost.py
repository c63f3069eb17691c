"""Multi-host latencies of `train` on simulated hosts (scripts/cluster.py; needs root).

  launch   all hosts' train started -> every rank running (no TensorFlow import in the rank)
  job end  the last rank exits -> every host's train has exited
  failure  a rank on the last worker is SIGKILLed -> every host's train has exited

    /opt/smtrain/venv/bin/python benchmarks/bench_multihost.py [--hosts 2 4 8] [--repeat 3]

Anchor (sagemaker-training 4.9.0, measured on simulated hosts by an earlier session): its workers sleep
30 s after the job and poll every 30 s, so a job end takes >= 30 s to reach every host; a rank
failing on a worker leaves that worker hanging; a job shorter than its 1 s poll is never seen.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from figures import print_figures  # benchmarks/figures.py

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from smtrain.common.linux import alive  # noqa: E402
from tests.harness.cluster import Cluster  # noqa: E402

PROGRAM = Path(__file__).resolve().parent / "programs" / "timed_rank.py"
TRAIN = [str(Path(sys.executable).parent / "train")]
PER_HOST = 2


def _read_times(cluster: Cluster, pattern: str) -> list[float]:
    return [float(p.read_text()) for h in cluster.hosts for p in (h.ml / "output" / "data").glob(pattern)]


def one_run(num_hosts: int, die: bool) -> dict[str, float]:
    with Cluster(f"bm{num_hosts}", num_hosts, net=200 + num_hosts) as cluster:
        ranks = num_hosts * PER_HOST
        hps = {"sagemaker_mpi_enabled": True, "sagemaker_mpi_num_of_processes_per_host": PER_HOST, "run-for": 1}
        if die:
            hps["die-rank"] = ranks - 1
        cluster.write_job(hps, program=PROGRAM)
        started = time.time()
        cluster.start(TRAIN, cluster.env(SM_PEER_WAIT_SECONDS="60"))
        pids = {h.name: h.train_pid for h in cluster.hosts}
        ended: dict[str, float] = {}
        deadline = time.monotonic() + 120
        while len(ended) < num_hosts and time.monotonic() < deadline:
            now = time.time()
            for name, pid in pids.items():
                if name not in ended and (pid is None or not alive(pid)):
                    ended[name] = now
            time.sleep(0.002)
        if len(ended) < num_hosts:
            raise RuntimeError(f"hosts still running after 120 s: {sorted(set(pids) - set(ended))}")
        starts = _read_times(cluster, "start-*")
        if len(starts) != ranks:
            raise RuntimeError(f"{len(starts)} of {ranks} ranks started")
        result = {"launch": max(starts) - started}
        last_host = max(ended.values())
        if die:
            result["failure"] = last_host - _read_times(cluster, "killed")[0]
        else:
            result["job_end"] = last_host - max(_read_times(cluster, "end-*"))
        return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--hosts", type=int, nargs="+", default=[2, 4, 8])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    print(f"{PER_HOST} ranks per host; median of {args.repeat} runs; seconds")
    print(f"{'hosts':>6}{'launch':>10}{'job end':>10}{'failure':>10}")
    figures = {}
    for hosts in args.hosts:
        runs = [one_run(hosts, die=False) for _ in range(args.repeat)]
        fails = [one_run(hosts, die=True) for _ in range(args.repeat)]
        launch = statistics.median(r["launch"] for r in runs)
        end = statistics.median(r["job_end"] for r in runs)
        failure = statistics.median(r["failure"] for r in fails)
        print(f"{hosts:>6}{launch:>10.2f}{end:>10.2f}{failure:>10.2f}")
        figures.update({f"launch_s_{hosts}_hosts": launch, f"job_end_s_{hosts}_hosts": end,
                        f"failure_s_{hosts}_hosts": failure})
    print("anchor, sagemaker-training 4.9.0: job end >= 30 s on every worker (sleep 30, then 30 s polls);"
          " a rank failing on a worker: that worker hangs")
    print_figures(figures)


if __name__ == "__main__":
    main()
