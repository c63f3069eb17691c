"""The job's ssh keys on simulated hosts (real train, sshd, ssh and mpirun): each job's master makes a key
pair and the workers' sshd trusts that key alone - not root's own key (the same in every container of
the cluster, as a key baked into an image would be), not the key of the job before, each put where an
sshd would find it if it looked; each container's host key is made when it starts. ssh's settings for
the job reach the job's hosts alone. A worker given a malformed key, or none, fails with StartupFailed."""
from __future__ import annotations

import json
import sys

import pytest

from tests.harness.cluster_jobs import PROGRAMS, TRAIN, wait_for_files
from tests.support import assert_only_the_jobs_key_logs_in, assert_outside_host_gets_the_system_settings

MPI = {"sagemaker_mpi_enabled": True, "sagemaker_mpi_num_of_processes_per_host": 1}


def test_each_job_trusts_its_own_key_only(make_cluster) -> None:
    cluster = make_cluster(2)
    worker = cluster.hosts[1]
    client = cluster.folder / "ssh" / "client"  # every host's ~/.ssh: root's own key, trusted where sshd looks by default
    (client / "authorized_keys").write_text((client / "id_ed25519.pub").read_text())
    found = {}
    for job in ("first", "second"):
        cluster.write_job({**MPI, "job": job}, program=PROGRAMS / "ssh_probe.py")
        cluster.start(TRAIN, cluster.env(SM_PEER_WAIT_SECONDS="60"))
        statuses = cluster.wait(120)
        assert statuses == {"algo-1": 0, "algo-2": 0}, {h.name: h.stderr()[-1500:] for h in cluster.hosts}
        files = wait_for_files(cluster, f"ssh-{job}-rank*.json", 2, 5)
        found[job] = {p.name.rsplit("-", 1)[1][:-5]: json.loads(p.read_text()) for p in files}
        assert cluster.leftovers() == {}
        # the worker's next start finds this job's key trusted in its /run/smtrain, as a reused container would
        (worker.run_files / "ssh").mkdir(parents=True, mode=0o700, exist_ok=True)
        (worker.run_files / "ssh" / "authorized_keys").write_text(f"ssh-ed25519 {found[job]['rank0']['job_key']}\n")
    first, second = found["first"], found["second"]
    # the worker trusts exactly the master's key of that job; another job has another key
    for job in (first, second):
        assert job["rank1"]["trusted"] == f"ssh-ed25519 {job['rank0']['job_key']}\n"
    assert first["rank0"]["job_key"] != second["rank0"]["job_key"]
    assert first["rank1"]["host_key"] != second["rank1"]["host_key"]  # a new container: a new host key
    # only the job's key logs in: not root's own key, nor the key of the job before (sshd refuses the key itself)
    for job in (first, second):
        assert_only_the_jobs_key_logs_in(job["rank0"]["logins"])
    assert second["rank0"]["kept_key_was_the_previous_jobs"]
    # nothing of it in the program's environment; a host outside the job gets ssh's own settings: its host key
    # checked, and the job's key not offered (it would be accepted there: shown by giving it)
    for job in (first, second):
        assert job["rank0"]["environment"] == {} and job["rank1"]["environment"] == {}
        assert_outside_host_gets_the_system_settings(job["rank0"]["outside"])
    master_log, worker_log = cluster.hosts[0].stderr(), worker.stderr()
    assert "worker algo-2 joined the job: it trusts the job's ssh key" in master_log
    assert "trusting the job's ssh key (from the master)" in worker_log
    assert second["rank0"]["job_key"] not in master_log + worker_log  # never logged



@pytest.mark.parametrize("mode,why", [
    ("malformed", "the ssh key the master algo-1 gave for the job is malformed (its base64 part is not an ed25519 "
                  "public key); this host trusts no other key"),
    ("none", "the master algo-1 gave no ssh key for the job within"),
])
def test_a_worker_given_a_bad_key_or_none_fails_with_startup_failed(make_cluster, mode: str, why: str) -> None:
    """algo-1 runs a stand-in master that speaks the control protocol but gives a malformed key or none."""
    cluster = make_cluster(2)
    cluster.write_job(MPI, program=PROGRAMS / "hello_mpi.py")
    master, worker = cluster.hosts
    master.start([sys.executable, str(PROGRAMS / "fake_master.py"), "7077", mode], cluster.env())
    worker.start(TRAIN, cluster.env(SM_PEER_WAIT_SECONDS="3", SM_HEARTBEAT_TIMEOUT_SECONDS="3"))
    assert worker.wait(60) == 71, worker.stderr()[-2000:]
    failure = worker.failure()
    assert failure is not None and failure.startswith("StartupFailed: ") and why in failure, failure
    assert master.wait(30) == 0 and "the worker hung up" in master.stdout()
    assert cluster.leftovers() == {}
