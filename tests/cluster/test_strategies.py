"""TensorFlow strategy jobs across simulated hosts, as SageMaker's TensorFlow container runs them:
MultiWorkerMirroredStrategy (every host a worker) and parameter servers (a ps on every host; the
first host's program is TF_CONFIG's master). Real TensorFlow, real processes, real TCP.

The outcome guarantees are those of MPI jobs (docs/guide.md, "Several hosts"): every host ends with the
job's status; a failing or lost host ends every host with the host named, within the abort's 5 s
of the failure showing (a program's end, a closed connection, the heartbeat timeout) - TensorFlow's
teardown can hold a failing program for seconds before its end; SIGTERM reaches every worker;
nothing is left behind.
"""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from tests.harness.cluster_jobs import PROGRAMS, TRAIN, wait_for_files
from tests.support import memory_cgroup

MWMS = {"sagemaker_multi_worker_mirrored_strategy_enabled": True}
PS = {"sagemaker_parameter_server_enabled": True}


def _details(cluster) -> dict:
    return {h.name: h.stderr()[-2500:] for h in cluster.hosts}


@pytest.mark.parametrize("hosts", [2, 3])
def test_mwms_trains_identical_weights_on_every_host(make_cluster, hosts: int) -> None:
    cluster = make_cluster(hosts)
    cluster.write_job({**MWMS, "steps": 30}, program=PROGRAMS / "tf_mwms.py")
    cluster.start(TRAIN, cluster.env(SM_PEER_WAIT_SECONDS="60"))
    statuses = cluster.wait(240)
    assert statuses == {h.name: 0 for h in cluster.hosts}, _details(cluster)
    reports = [json.loads(p.read_text()) for p in wait_for_files(cluster, "weights-*.json", hosts, 1)]
    assert sorted(r["task"] for r in reports) == [f"worker{i}" for i in range(hosts)]
    assert len({r["digest"] for r in reports}) == 1, reports  # initial weights differed per worker
    names = [h.name for h in cluster.hosts]
    for r in reports:
        assert r["tf_config"] == {"cluster": {"worker": [f"{n}:8890" for n in names]}, "environment": "cloud",
                                  "task": {"index": names.index(r["host"]), "type": "worker"}}
    assert "step=20; loss=" in cluster.hosts[0].stdout()
    assert cluster.leftovers() == {}


def test_mwms_keras_with_backup_and_restore_is_restarted_in_place_when_a_worker_is_killed(make_cluster) -> None:
    """In-job restart (`sagemaker_max_restarts`) of a Keras job with BackupAndRestore: worker 1 is
    SIGKILLed once in its third epoch; every host's program starts again and resumes at epoch 2."""
    cluster = make_cluster(2)
    shared = cluster.folder / "backup"  # every worker reads the chief's backup (on SageMaker: an s3:// folder)
    cluster.write_job({**MWMS, "epochs": 4, "steps": 10, "kill-worker": 1, "kill-at": 25, "sagemaker_max_restarts": 1,
                       "backup-dir": str(shared)}, program=PROGRAMS / "tf_mwms_keras.py")
    cluster.start(TRAIN, cluster.env(SM_PEER_WAIT_SECONDS="60", SM_SYSTEM_MONITOR="off"))
    statuses = cluster.wait(300)
    assert statuses == {h.name: 0 for h in cluster.hosts}, _details(cluster)
    for host, worker in zip(cluster.hosts, (0, 1)):
        data = host.ml / "output" / "data"
        assert (data / f"starts-worker{worker}.txt").read_text().split() == ["0", "2"], _details(cluster)
        assert json.loads((data / f"done-worker{worker}.json").read_text())["epochs"] == 2  # the epochs left
    master = cluster.hosts[0].stderr()
    assert "restarting the job in place (restart 1 of 1)" in master and "was killed by SIGKILL" in master
    assert "the job succeeded after 1 restart(s) in place" in master
    assert cluster.leftovers() == {}


def _running_mwms(make_cluster, hosts: int = 3, **hyperparameters) -> object:
    cluster = make_cluster(hosts)
    cluster.write_job({**MWMS, "steps": 100000, **hyperparameters}, program=PROGRAMS / "tf_mwms.py")
    cluster.start(TRAIN, cluster.env(SM_PEER_WAIT_SECONDS="60", SM_GRACE_PERIOD_SECONDS="3"))
    assert len(wait_for_files(cluster, "running-*", hosts, 120)) == hosts, _details(cluster)
    return cluster


def test_mwms_a_crashing_worker_ends_every_host_naming_it(make_cluster) -> None:
    cluster = make_cluster(3)
    cluster.write_job({**MWMS, "steps": 100000, "crash-worker": 2, "crash-at-step": 200},
                      program=PROGRAMS / "tf_mwms.py")
    cluster.start(TRAIN, cluster.env(SM_PEER_WAIT_SECONDS="60"))
    assert len(wait_for_files(cluster, "running-*", 3, 120)) == 3, _details(cluster)
    statuses = cluster.wait(60)
    assert statuses == {h.name: 1 for h in cluster.hosts}, _details(cluster)
    crashed_at = (cluster.host("algo-3").ml / "output" / "data" / "crashing-worker2").stat().st_mtime
    ended = max((h.folder / "leftovers").stat().st_mtime for h in cluster.hosts)
    # The failing program ends on its own first: TensorFlow's teardown after the uncaught exception
    # took 1-8.4 s here beside two CPU hogs. Its end aborts the job: the other programs end on SIGTERM,
    # or by SIGKILL 5 s later when TensorFlow holds them (3.2-13.6 s from the raise in all).
    assert ended - crashed_at < 8.5 + 5 + 5, (ended - crashed_at, _details(cluster))
    for host in cluster.hosts:
        reason = host.failure() or ""
        assert reason.startswith("RuntimeError: ") and "worker 2 on host algo-3" in reason, reason
        assert "worker 2 failed on purpose" in reason
    assert cluster.leftovers() == {}


def test_mwms_an_oom_killed_worker_is_named_out_of_memory_on_every_host(make_cluster) -> None:
    """The worker host runs in a memory cgroup with a limit, as a container with `--memory` does."""
    cluster = make_cluster(2)
    cluster.write_job({**MWMS, "steps": 100000, "oom-worker": 1, "crash-at-step": 50}, program=PROGRAMS / "tf_mwms.py")
    env = cluster.env(SM_PEER_WAIT_SECONDS="60")
    with memory_cgroup(f"smtrain-oom-{cluster.name}", 1500 << 20) as join:
        cluster.host("algo-2").start(TRAIN, env, preexec_fn=join)
        cluster.host("algo-1").start(TRAIN, env)
        statuses = cluster.wait(120)
    assert statuses == {"algo-1": 137, "algo-2": 137}, _details(cluster)
    for host in cluster.hosts:
        reason = host.failure() or ""
        assert reason.startswith("OutOfMemory: ") and "worker 1 on host algo-2" in reason, reason
        assert "the kernel's OOM killer ran in its container" in reason, reason
    assert cluster.leftovers() == {}


@pytest.mark.parametrize("on_term,expected", [("exit0", 0), ("continue", 137)])
def test_mwms_sigterm_reaches_every_worker(make_cluster, on_term: str, expected: int) -> None:
    cluster = _running_mwms(make_cluster, 2, **{"on-term": on_term})
    sent = time.monotonic()
    cluster.hosts[0].signal(signal.SIGTERM)  # the master alone: it forwards to every worker
    statuses = cluster.wait(30)
    assert statuses == {h.name: expected for h in cluster.hosts}, _details(cluster)
    assert len(wait_for_files(cluster, "sigterm-*", 2, 1)) == 2
    assert time.monotonic() - sent < (5 if expected == 0 else 3 + 8)
    assert cluster.leftovers() == {}


def test_mwms_worker_host_dies(make_cluster) -> None:
    cluster = _running_mwms(make_cluster)
    died = time.monotonic()
    cluster.host("algo-3").kill()
    statuses = cluster.wait(30, hosts=cluster.hosts[:2])
    assert time.monotonic() - died < 10 + 5
    assert statuses == {"algo-1": 69, "algo-2": 69}, statuses  # HostLost, as for every kind of job
    for host in cluster.hosts[:2]:
        assert (host.failure() or "").startswith("HostLost: lost worker host algo-3"), host.stderr()[-2000:]
        assert host.leftovers() == []


def test_mwms_master_dies(make_cluster) -> None:
    """The closed connection tells at once. The workers' programs most often end on the SIGTERM
    that follows; one whose collective failed first can hang in TensorFlow's exit after its traceback
    (seen 1 run in 10 beside CPU hogs) and is killed when the grace period (3 s here) ends."""
    cluster = _running_mwms(make_cluster)
    died = time.monotonic()
    cluster.host("algo-1").kill()
    statuses = cluster.wait(30, hosts=cluster.hosts[1:])
    assert time.monotonic() - died < 10
    assert statuses == {"algo-2": 69, "algo-3": 69}, statuses
    for worker in cluster.hosts[1:]:
        reason = worker.failure() or ""
        assert reason.startswith("MasterLost: lost the master algo-1") and "(its connection closed)" in reason, reason
        assert worker.leftovers() == []


def test_mwms_worker_cut_off(make_cluster) -> None:
    """No connection closes: the heartbeats tell, and the job ends naming the host."""
    cluster = _running_mwms(make_cluster)
    cut = time.monotonic()
    cluster.host("algo-3").cut_cable()
    cluster.host("algo-3").kill()
    statuses = cluster.wait(40, hosts=cluster.hosts[:2])
    assert time.monotonic() - cut < 10 + 10
    assert statuses == {"algo-1": 69, "algo-2": 69}, statuses
    reason = cluster.hosts[0].failure() or ""
    assert reason.startswith("HostLost: lost worker host algo-3"), cluster.hosts[0].stderr()[-2000:]
    assert cluster.hosts[0].leftovers() == [] and cluster.hosts[1].leftovers() == []


@pytest.mark.parametrize("hosts", [2, 3])
def test_parameter_server_job_loss_falls_and_every_ps_ends(make_cluster, hosts: int) -> None:
    cluster = make_cluster(hosts)
    cluster.write_job({**PS, "epochs": 4}, program=PROGRAMS / "tf_ps_train.py")
    cluster.start(TRAIN, cluster.env(SM_PEER_WAIT_SECONDS="60"))
    statuses = cluster.wait(300)
    assert statuses == {h.name: 0 for h in cluster.hosts}, _details(cluster)
    result = json.loads((cluster.hosts[0].ml / "output" / "data" / "ps-master0.json").read_text())
    losses = result["losses"]
    assert losses[-1] < losses[0] / 2, losses
    names = [h.name for h in cluster.hosts]
    assert result["tf_config"]["cluster"] == {
        "master": [f"{names[0]}:2222"], "ps": [f"{n}:2223" for n in names], "worker": [f"{n}:2222" for n in names[1:]]}
    for host in cluster.hosts:
        assert "starting the parameter server (TF_CONFIG task ps" in host.stderr() + host.stdout()
    assert cluster.leftovers() == {}  # every ps and every worker's server ended with the job


@pytest.mark.parametrize("hosts", [2, 3])
def test_parameter_server_tf_config_reading_program(make_cluster, hosts: int) -> None:
    cluster = make_cluster(hosts)
    cluster.write_job({**PS, "run-for": 1}, program=PROGRAMS / "tf_config_reader.py")
    cluster.start(TRAIN, cluster.env(SM_PEER_WAIT_SECONDS="60"))
    statuses = cluster.wait(120)
    assert statuses == {h.name: 0 for h in cluster.hosts}, _details(cluster)
    seen = {json.loads(p.read_text())["host"]: json.loads(p.read_text())
            for p in wait_for_files(cluster, "tfconfig-*.json", hosts, 1)}
    names = [h.name for h in cluster.hosts]
    assert seen[names[0]]["tf_config"]["task"] == {"index": 0, "type": "master"}
    for i, name in enumerate(names[1:]):
        assert seen[name]["tf_config"]["task"] == {"index": i, "type": "worker"}
    assert all(s["ps_answered"] for s in seen.values()), seen
    assert cluster.leftovers() == {}


def test_parameter_server_a_failing_worker_ends_the_job(make_cluster) -> None:
    cluster = make_cluster(3)
    cluster.write_job({**PS, "epochs": 1000, "crash-after": 4, "crash-worker": 1}, program=PROGRAMS / "tf_ps_train.py")
    cluster.start(TRAIN, cluster.env(SM_PEER_WAIT_SECONDS="60"))
    assert len(wait_for_files(cluster, "running-worker*", 2, 120)) == 2, _details(cluster)
    started = time.monotonic()
    statuses = cluster.wait(60)
    assert time.monotonic() - started < 4 + 10
    # The worker's uncaught exception ends the job with status 1 every time, also when TensorFlow's
    # gRPC server then crashes while the interpreter exits (SIGSEGV or SIGILL, in about half the runs).
    assert statuses == {h.name: 1 for h in cluster.hosts}, _details(cluster)
    reason = cluster.hosts[0].failure() or ""
    print(reason)
    assert reason.startswith("RuntimeError: ") and reason.rstrip().endswith("failed on purpose"), reason
    assert "TF_CONFIG task worker 1 on host algo-3" in reason
    assert cluster.leftovers() == {}


def test_mwms_master_never_starts(make_cluster) -> None:
    cluster = make_cluster(2)
    cluster.write_job(MWMS, program=PROGRAMS / "tf_mwms.py")
    started = time.monotonic()
    cluster.start(TRAIN, cluster.env(SM_PEER_WAIT_SECONDS="3"), hosts=cluster.hosts[1:])
    statuses = cluster.wait(20, hosts=cluster.hosts[1:])
    assert statuses == {"algo-2": 69}
    assert time.monotonic() - started < 3 + 5
    assert (cluster.hosts[1].failure() or "").startswith("PeersUnreachable: master algo-1 was not reachable")
    assert cluster.hosts[1].leftovers() == []


def test_mwms_worker_never_starts(make_cluster) -> None:
    cluster = make_cluster(3)
    cluster.write_job(MWMS, program=PROGRAMS / "tf_mwms.py")
    cluster.start(TRAIN, cluster.env(SM_PEER_WAIT_SECONDS="4"), hosts=cluster.hosts[:2])
    statuses = cluster.wait(20, hosts=cluster.hosts[:2])
    assert statuses == {"algo-1": 69, "algo-2": 69}, statuses
    assert (cluster.hosts[0].failure() or "").startswith("PeersUnreachable: workers algo-3 did not report")
    assert "algo-3" in (cluster.hosts[1].failure() or "")  # the worker that came learns why
    assert not list((cluster.hosts[1].ml / "output" / "data").glob("running-*"))  # no program started
    assert cluster.hosts[0].leftovers() == [] and cluster.hosts[1].leftovers() == []


def test_mwms_keras_job_keeps_its_model_dir_on_s3_and_the_next_job_resumes_from_it(make_cluster, tmp_path) -> None:
    """SageMaker's TensorFlow estimator gives a MultiWorkerMirroredStrategy job `--model_dir s3://...`:
    an S3 server (moto's, real) runs in algo-1's network; both hosts write and read it through the plugin."""
    from tests.harness.moto import KEYS, MOTO_SERVER, free_port

    cluster = make_cluster(2)
    master = cluster.host("algo-1")
    port = free_port()
    moto = subprocess.Popen(["ip", "netns", "exec", master.netns, str(MOTO_SERVER), "-H", "0.0.0.0", "-p", str(port)],
                            stdout=open(tmp_path / "moto.log", "wb"), stderr=subprocess.STDOUT)
    try:
        s3 = {**KEYS, "AWS_ENDPOINT_URL": f"http://{master.address}:{port}", "AWS_REGION": "us-east-1",
              "AWS_EC2_METADATA_DISABLED": "true", "TF_USE_LEGACY_KERAS": "1"}
        create = ("import sys, time, boto3\n"
                  "for _ in range(300):\n"
                  "    try:\n"
                  "        boto3.client('s3').create_bucket(Bucket='models'); sys.exit(0)\n"
                  "    except Exception:\n"
                  "        time.sleep(0.2)\n"
                  "sys.exit(1)\n")
        made = subprocess.run(["ip", "netns", "exec", master.netns, sys.executable, "-c", create],
                              env={**os.environ, **s3}, capture_output=True, text=True, timeout=120)
        assert made.returncode == 0, made.stderr[-2000:]
        model_dir = "s3://models/mwms-job/model"
        reports = []
        for run in range(2):
            for host in cluster.hosts:
                for old in (host.ml / "output" / "data").glob("s3-*.json"):
                    old.unlink()
            cluster.write_job({**MWMS, "model_dir": model_dir}, program=PROGRAMS / "tf_mwms_model_dir.py")
            cluster.start(TRAIN, cluster.env(SM_PEER_WAIT_SECONDS="60", **s3))
            statuses = cluster.wait(300)
            assert statuses == {h.name: 0 for h in cluster.hosts}, _details(cluster)
            reports.append({p.name: json.loads(p.read_text()) for p in wait_for_files(cluster, "s3-*.json", 2, 1)})
        first, second = reports
        for report in first.values():
            assert report["restored"] is None and report["latest"] == f"{model_dir}/weights/ckpt-02"
            assert report["saved_model"] and {"weights", "tensorboard", "export"} <= set(report["listing"])
        assert "export-worker1" not in first["s3-1.json"]["listing"]  # the worker's copy, deleted by it
        for report in second.values():
            assert report["restored"] == f"{model_dir}/weights/ckpt-02"
        assert cluster.leftovers() == {}
    finally:
        moto.kill()
        moto.wait()
