"""A heterogeneous cluster as AWS documents it, through the real `train` on 3 simulated hosts: a `data`
group (algo-1) serving batches with tf.data service, a `train` group (algo-2, algo-3) running a 2x2
Horovod job that reads them (`distribution={"mpi": ..., "instance_groups": ["train"]}`). mpirun spans
the train group only, its master is algo-2, and the data host runs its program on its own and ends
when it does (tests/programs/tfdata_service_job.py)."""
from __future__ import annotations

import json
import sys
from pathlib import Path

from tests.harness.cluster_jobs import PROGRAMS

TRAIN = [str(Path(sys.executable).parent / "train")]
GROUPS = {"data": ["algo-1"], "train": ["algo-2", "algo-3"]}
JOB = {"sagemaker_mpi_enabled": True, "sagemaker_mpi_num_of_processes_per_host": 2,
       "sagemaker_distribution_instance_groups": '["train"]', "ranks": 4, "steps": 10}


def _start(make_cluster, **hps: object):
    cluster = make_cluster(3)
    cluster.write_job({**JOB, **hps}, program=PROGRAMS / "tfdata_service_job.py", groups=GROUPS)
    cluster.start(TRAIN, cluster.env(SM_PEER_WAIT_SECONDS="90", SM_SYSTEM_MONITOR="off"))
    return cluster


def test_the_train_group_trains_on_the_data_groups_batches_and_every_host_ends(make_cluster) -> None:
    cluster = _start(make_cluster)
    statuses = cluster.wait(240)
    assert statuses == {"algo-1": 0, "algo-2": 0, "algo-3": 0}, {h.name: h.stderr()[-2000:] for h in cluster.hosts}
    data, master, worker = cluster.hosts
    assert "starting 4 ranks on algo-2, algo-3" in master.stderr()  # mpirun over the train group only
    assert "connecting to the master algo-2" in worker.stderr()
    assert "mpirun" not in data.stderr() and "sshd" not in data.stderr()  # the data host runs its program alone
    assert sorted(line.split(":")[0] for line in master.stdout().splitlines() if "steps from the data host" in line) \
        == ["rank 0", "rank 1", "rank 2", "rank 3"]
    assert json.loads((data.ml / "output" / "data" / "data-host.json").read_text()) == {"stopped": 4}
    assert cluster.leftovers() == {}


def test_a_failing_trainer_ends_the_train_group_with_its_status_and_frees_the_data_host(make_cluster) -> None:
    cluster = _start(make_cluster, **{"fail-rank": 3})
    statuses = cluster.wait(240)
    assert statuses == {"algo-1": 0, "algo-2": 1, "algo-3": 1}, {h.name: h.stderr()[-2000:] for h in cluster.hosts}
    for host in cluster.hosts[1:]:
        failure = host.failure() or ""
        assert failure.startswith("RuntimeError: program ") and "(rank 3, local rank 1, on host algo-3)" in failure, failure
    data = cluster.hosts[0]
    assert data.failure() is None  # the data host's outcome is its own program's: it ended when the trainers went
    assert json.loads((data.ml / "output" / "data" / "data-host.json").read_text())["stopped"] < 4
    assert cluster.leftovers() == {}
