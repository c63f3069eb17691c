"""The job seen while it runs, on two simulated hosts (real sshd, mpirun, train and system monitors): a plain
Horovod loop of 2 x 2 ranks (no smtrain import) in three phases - every rank alike, then rank 3 slow between
its steps, then both of algo-2's ranks - with a straggler window of 6 s and the monitors' live metrics every
2 s (both settings, so that the phases are short). While the job runs, TensorBoard's own
loader reads every host's and rank's series from the job's TensorBoard folder; the master's log names nobody
in the first phase, rank 3 in the second and host algo-2 in the third; the program's own summaries beside the
scalars are intact at the end."""
from __future__ import annotations

import json
import re
import time

from tests.harness.cluster_jobs import PROGRAMS, TRAIN

MPI = {"sagemaker_mpi_enabled": True, "sagemaker_mpi_num_of_processes_per_host": 2}
WINDOW_S, LIVE_S = 6, 2
HEALTHY_S = 10  # every rank alike: the verdict judged over more than a window
PHASE_S = 15  # each slow phase's length: a verdict needs over 4 s of a new phase's steps (the slow ones are fewer)
#              in a window that moves in the monitors' 2-s steps, and 1.5 s to hold


def _said(cluster) -> list[str]:
    return re.findall(r"^\[train\] (straggler: .*)$", cluster.hosts[0].stderr(), re.M)


def test_a_running_jobs_metrics_reach_tensorboard_and_its_slow_rank_then_host_is_named(make_cluster) -> None:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    cluster = make_cluster(2)
    cluster.write_job({**MPI, "seconds": HEALTHY_S + 2 * PHASE_S, "interval": 0.05,
                       "slow": f"3@{HEALTHY_S},2@{HEALTHY_S + PHASE_S}",
                       "summaries": "yes"}, program=PROGRAMS / "hvd_plain_loop.py")
    for host in cluster.hosts:
        (host.ml / "input" / "config" / "tensorboardoutputconfig.json").write_text(
            json.dumps({"LocalPath": str(cluster.ml_mount / "output" / "tensorboard")}))
    cluster.start(TRAIN, cluster.env(SM_PEER_WAIT_SECONDS="60", SMTRAIN_STRAGGLER_WINDOW_S=str(WINDOW_S),
                              SMTRAIN_LIVE_METRICS_INTERVAL_S=str(LIVE_S)))
    deadline = time.monotonic() + 120
    while "rank 0 began" not in cluster.hosts[0].stdout():
        assert time.monotonic() < deadline and not any(h.proc.poll() is not None for h in cluster.hosts), \
            cluster.hosts[0].stderr()[-2000:]
        time.sleep(0.2)
    began = time.monotonic()
    time.sleep(HEALTHY_S - 1)
    assert _said(cluster) == [], "a straggler named while every rank took the same steps"
    while not _said(cluster) and time.monotonic() < began + HEALTHY_S + PHASE_S - 1:  # within rank 3's phase
        time.sleep(0.5)
    assert [line.split(" spend")[0] for line in _said(cluster)] == ["straggler: rank 3 on algo-2"], _said(cluster)
    seen = {}  # while the job runs: every host's and rank's series, read by TensorBoard's own loader
    for host in cluster.hosts:
        for run, tag in ((host.name, "system/cpu_percent"), *((f"{host.name}/rank-{r}", "steps/between_ms")
                                                              for r in range(4) if r // 2 == cluster.hosts.index(host))):
            loaded = EventAccumulator(str(host.ml / "output" / "tensorboard" / "smtrain" / run))
            loaded.Reload()
            seen[run] = [e.value for e in loaded.Scalars(tag)]
    assert all(len(values) >= 3 for values in seen.values()), seen
    assert max(seen["algo-2/rank-3"][-2:]) > 100 > max(seen["algo-1/rank-0"][-2:]), seen  # rank 3 waits 150 ms more
    statuses = cluster.wait(HEALTHY_S + 2 * PHASE_S + 90 - (time.monotonic() - began))
    assert statuses == {"algo-1": 0, "algo-2": 0}, {h.name: h.stderr()[-2000:] for h in cluster.hosts}
    said = _said(cluster)
    assert [line.split(" spend")[0] for line in said[:2]] == ["straggler: rank 3 on algo-2",
                                                              "straggler: host algo-2 (its ranks 2, 3)"], said
    program = EventAccumulator(str(cluster.hosts[0].ml / "output" / "tensorboard" / "program"))
    program.Reload()
    assert program.Tags()["tensors"] == ["loss"] or "loss" in program.Tags()["scalars"], program.Tags()
    assert cluster.leftovers() == {}
