"""What keeping every rank's line whole costs a chatty rank (smtrain.run.rank_output), on simulated hosts
(tests/harness/cluster.py; needs root): 2 hosts x 2 ranks, each rank writing `--lines` metric lines to stdout in
two writes apiece (programs/chatty_timed.py), through `train` as it is, against the same job whose ranks'
output goes through mpirun's own forwarding, as plain mpirun's does (asked for with mpirun's
`--merge-stderr-to-stdout`, which changes nothing for ranks that write stdout only), in interleaved runs.

  lines/s   every rank's lines over the time from the first rank's first write to the last rank's last one
  whole     of the job's lines, how many the master's log holds whole (mpirun's forwarding cuts some)

    /opt/smtrain/venv/bin/python benchmarks/bench_output.py [--lines 50000] [--repeat 5]
"""
from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from pathlib import Path

from figures import parse, print_figures  # benchmarks/figures.py

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.harness.cluster import Cluster  # noqa: E402

PROGRAM = Path(__file__).resolve().parent / "programs" / "chatty_timed.py"
TRAIN = [str(Path(sys.executable).parent / "train")]
RANKS = 4
LINE = re.compile(rb"^metric rank=(\d) i=(\d+) loss=(\d+\.\d{6});$")


def one_run(cluster: Cluster, lines: int, forwarded: bool) -> tuple[float, int]:
    """Lines per second of the job's ranks, and how many of their lines the master's log holds whole."""
    options = {"sagemaker_mpi_custom_mpi_options": "--merge-stderr-to-stdout"} if forwarded else {}
    cluster.write_job({"sagemaker_mpi_enabled": True, "sagemaker_mpi_num_of_processes_per_host": 2, "lines": lines,
                       "sagemaker_system_monitor": "off", "sagemaker_framework_metrics": "off", **options},
                      program=PROGRAM)
    for host in cluster.hosts:
        for old in (host.ml / "output" / "data").glob("times-*.json"):
            old.unlink()
    cluster.start(TRAIN, cluster.env(SM_PEER_WAIT_SECONDS="60"))
    statuses = cluster.wait(600)
    if set(statuses.values()) != {0}:
        raise SystemExit(f"the job failed: {statuses}\n{cluster.hosts[0].stderr()[-2000:]}")
    times = [json.loads(p.read_text()) for h in cluster.hosts for p in (h.ml / "output" / "data").glob("times-*.json")]
    assert len(times) == RANKS, times
    seconds = max(t["ended"] for t in times) - min(t["began"] for t in times)
    whole = {(m[1], m[2]) for m in map(LINE.match, (cluster.hosts[0].folder / "stdout").read_bytes().split(b"\n")) if m}
    return RANKS * lines / seconds, len(whole)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lines", type=int, default=50000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parse(parser, quick=dict(lines=200, repeat=1))
    ours, forwarded, whole, forwarded_whole = [], [], [], []
    with Cluster("bout", 2, net=9) as cluster:
        for run in range(args.repeat):
            for through_mpirun in (False, True) if run % 2 == 0 else (True, False):
                rate, kept = one_run(cluster, args.lines, through_mpirun)
                (forwarded if through_mpirun else ours).append(rate)
                (forwarded_whole if through_mpirun else whole).append(kept)
                print(f"run {run} {'mpirun forwarding' if through_mpirun else 'train'}: {rate:,.0f} lines/s, "
                      f"{kept} of {RANKS * args.lines} lines whole", flush=True)
    assert all(kept == RANKS * args.lines for kept in whole), f"train lost or cut lines: {whole}"
    print_figures({
        "output_train_lines_per_s": statistics.median(ours),
        "output_mpirun_lines_per_s": statistics.median(forwarded),
        "output_train_vs_mpirun": statistics.median(o / f for o, f in zip(ours, forwarded)),
        "output_mpirun_lines_whole_share": statistics.median(forwarded_whole) / (RANKS * args.lines),
    })


if __name__ == "__main__":
    main()
