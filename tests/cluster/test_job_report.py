"""One profiler report for the whole job: every worker host's profiler data reaches the master when the
job ends (smtrain.profiler.shipping over the control channel), and the master's report covers every
host and rank; smdebug's own reader over the master's folder sees every rank. (A worker host killed
mid-job: tests/cluster/test_multihost.py::test_worker_host_dies_mid_job.)"""
from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

from smtrain.profiler.digests import read
from tests.harness.cluster_jobs import PROGRAMS
from tests.support import SMDEBUG_READ

TRAIN = [str(Path(sys.executable).parent / "train")]
MPI = {"sagemaker_mpi_enabled": True, "sagemaker_mpi_num_of_processes_per_host": 2}
HOSTS = ("algo-1", "algo-2", "algo-3")


def _summary(cluster) -> dict:
    return json.loads((cluster.hosts[0].ml / "output" / "data" / "profiler-report" / "summary.json").read_text())


def test_the_masters_report_covers_every_host_and_names_a_slow_rank_on_a_worker(make_cluster, tmp_path: Path) -> None:
    cluster = make_cluster(3)
    cluster.write_job({**MPI, "loop": "function", "epochs": 2, "steps": 12, "slow-rank": 5, "slow-ms": 250},
                      program=PROGRAMS / "hvd_steps.py")
    cluster.start(TRAIN, cluster.env(SM_PEER_WAIT_SECONDS="60"))
    statuses = cluster.wait(240)
    assert statuses == dict.fromkeys(HOSTS, 0), {h.name: h.stderr()[-2000:] for h in cluster.hosts}
    summary = _summary(cluster)
    assert sorted(summary["hosts"]) == list(HOSTS)  # every host's system samples
    ranks = {f"{r}-{HOSTS[r // 2]}" for r in range(6)}
    assert set(summary["ranks"]) == ranks and all(summary["ranks"][n]["steps"]["TRAIN"] == 24 for n in ranks), summary["ranks"]
    reasons = {r["rule"]: r["reason"] for r in summary["rules"] if r["triggered"]}
    assert reasons.get("RankImbalance", "").startswith("rank 5-algo-3 spends "), reasons
    master_log = cluster.hosts[0].stderr()
    assert "profiler report: " in master_log and "(3 host(s), 6 rank(s) with steps;" in master_log
    # every rank, the master's too, digested its steps at its exit, and the digests cover their events (the
    # report read those, not the events); each came to the master with its host's data
    assert set(read([cluster.hosts[0].ml / "output" / "profiler"])) == ranks
    assert "sent " in cluster.hosts[2].stderr() and "profiler file(s)" in cluster.hosts[2].stderr()
    html = (cluster.hosts[0].ml / "output" / "data" / "profiler-report" / "profiler-report.html").read_text()
    assert all(host in html for host in HOSTS) and "5-algo-3" in html and "Utilisation across hosts" in html
    out = tmp_path / "framework.json"
    done = subprocess.run([*SMDEBUG_READ, str(out), "framework", str(cluster.hosts[0].ml / "output" / "profiler"), "0",
                           str(int(time.time() * 1e6) + 10**7)], capture_output=True, timeout=120)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    steps: dict[str, int] = {}
    for name, node, *_ in json.loads(out.read_text())["events"]:
        if name == "Step:ModeKeys.TRAIN":
            steps[node] = steps.get(node, 0) + 1
    assert steps == {f"{HOSTS[r // 2]}-{r}": 24 for r in range(6)}, steps  # smdebug names a node <host>-<rank>
