"""Several hosts: real sshd, real mpirun, real Horovod with TensorFlow, on simulated hosts.

Bounds asserted here (docs/guide.md, "Several hosts"): every host ends within 2 s (asserted: 3 s) of the last
rank's exit, after a good job or a failing rank, which ends every host within 10 s; a lost
master ends every worker within 5 s (connection closed) - HEARTBEAT_TIMEOUT_S when it goes silent;
a lost worker ends the master within 15 s; hosts wait SM_PEER_WAIT_SECONDS for peers.
"""
from __future__ import annotations

import json
import re
import signal
import sys
import time
from pathlib import Path

import pytest

from smtrain.wire.contract import RANK_CONTRACT_ENV

from tests.harness.cluster_jobs import PROGRAMS, TRAIN, feed_every_host, wait_for_files
from tests.harness import keras_api
from tests.harness.logpipe import LogPipe

MPI = {"sagemaker_mpi_enabled": True, "sagemaker_mpi_num_of_processes_per_host": 2}
# Every host's train exits within 2 s of the last rank's exit (benchmarks/bench_multihost.py measures it);
# asserted with a second more, for a busy machine.
JOB_END_S = 3.0


@pytest.mark.parametrize("program,hosts", [("hvd_custom_loop.py", 3), ("hvd_keras_fit.py", 2)])  # each way once
def test_horovod_training_ends_with_identical_weights_everywhere(make_cluster, program: str, hosts: int) -> None:
    """... and every host's train exits within the job-end bound of the last rank's exit, the master
    with its profiler report written."""
    cluster = make_cluster(hosts)
    cluster.write_job(MPI, program=PROGRAMS / program)
    cluster.start(TRAIN, cluster.env(SM_PEER_WAIT_SECONDS="60"))
    edges = cluster.wait_timed(240)
    details = {h.name: h.stderr()[-1500:] for h in cluster.hosts}
    assert edges.statuses == {h.name: 0 for h in cluster.hosts}, details
    assert edges.last_rank and all(s < JOB_END_S for s in edges.after_last_rank().values()), edges.after_last_rank()
    report = cluster.hosts[0].ml / "output" / "data" / "profiler-report"
    assert json.loads((report / "summary.json").read_text())["ranks"] and (report / "profiler-report.html").is_file()
    reports = [json.loads(p.read_text()) for p in wait_for_files(cluster, "weights-*.json", 2 * hosts, 1)]
    assert sorted(r["rank"] for r in reports) == list(range(2 * hosts))
    assert {r["host"] for r in reports} == {h.name for h in cluster.hosts}
    assert len({r["digest"] for r in reports}) == 1, reports
    if program == "hvd_keras_fit.py":  # Horovod's Keras callbacks: averaged metrics, the LR schedule
        assert_keras_callbacks_worked(reports)
    master_out = cluster.hosts[0].stdout()
    assert "loss=" in master_out and all(line.split(";")[0].split("=")[0] in ("step", "epoch")
                                         for line in master_out.splitlines() if "loss=" in line)
    assert cluster.leftovers() == {}


def test_keras_3_and_tf_keras_models_train_on_2x2_ranks_as_one_process_on_the_union_of_their_batches(
        make_cluster) -> None:
    """hvd.DistributedOptimizer in fit across hosts, a Keras 3 model and a tf_keras one: the `optimizer-fit` case
    of tests/programs/hvd_keras_api.py, which also trains one process on the union of the 4 ranks' batches (one
    host, every case: tests/process/test_horovod_keras_api.py)."""
    cluster = make_cluster(2)
    cluster.write_job({**MPI, "only": "optimizer-fit"}, program=keras_api.PROGRAM)
    cluster.start(TRAIN, cluster.env(SM_PEER_WAIT_SECONDS="60"))
    statuses = cluster.wait(240)
    assert statuses == {"algo-1": 0, "algo-2": 0}, {h.name: h.stderr()[-1500:] for h in cluster.hosts}
    found = keras_api.read(wait_for_files(cluster, "api-*.json", 4, 5))
    assert len(found) == 4
    for flavour in keras_api.FLAVOURS:
        keras_api.assert_trains_as_union(keras_api.of(found, "optimizer-fit", flavour), 2e-5)
    assert cluster.leftovers() == {}


ORACLE_HOSTS = """
import json, sys
from sagemaker_training import environment
env = environment.Environment()
print(json.dumps({"distribution_hosts": env.distribution_hosts, "master": env.master_hostname}))
"""


def test_eleven_hosts_listed_as_sagemaker_lists_them_put_every_rank_where_sagemaker_training_does(make_cluster) -> None:
    """resourceconfig.json's hosts sorted lexicographically (algo-10 and algo-11 before algo-2), the instance
    group's in an order of their own: the master and each rank's host are those of sagemaker-training 5.1.4's
    own Environment on the same files (its distribution hosts, in their order, one rank each)."""
    import subprocess

    cluster = make_cluster(11)
    cluster.write_job({"sagemaker_mpi_enabled": True, "sagemaker_mpi_num_of_processes_per_host": 1},
                      program=PROGRAMS / "hello_mpi.py", as_sagemaker_lists=True)
    listed = json.loads((cluster.hosts[0].ml / "input" / "config" / "resourceconfig.json").read_text())["hosts"]
    assert listed[:3] == ["algo-1", "algo-10", "algo-11"]
    oracle = subprocess.run([sys.executable, "-c", ORACLE_HOSTS], capture_output=True, text=True, timeout=60,
                            env={"SAGEMAKER_BASE_DIR": str(cluster.hosts[0].ml), "PATH": "/usr/bin:/bin"})
    assert oracle.returncode == 0, oracle.stderr[-2000:]
    expected = json.loads(oracle.stdout)
    cluster.start(TRAIN, cluster.env(SM_PEER_WAIT_SECONDS="90", SM_SYSTEM_MONITOR="off", SM_FRAMEWORK_METRICS="off"))
    statuses = cluster.wait(240)
    assert statuses == {h.name: 0 for h in cluster.hosts}, {h.name: h.stderr()[-800:] for h in cluster.hosts}
    master = next(h for h in cluster.hosts if h.name == expected["master"])
    placed = {int(rank): host for rank, host in re.findall(r"hello from rank (\d+) of 11 \(local 0\) on (\S+)",
                                                           master.stdout())}
    assert [placed[r] for r in range(11)] == expected["distribution_hosts"], master.stdout()[-2000:]
    assert "mpirun" in master.stderr() and cluster.leftovers() == {}


def assert_keras_callbacks_worked(reports: list[dict]) -> None:
    """MetricAverageCallback: every rank logged the same losses. Warmup: epoch 0 ramps up from
    initial/size; the schedule (x0.5 per epoch from epoch 1): initial, then half."""
    assert len({tuple(r["losses"]) for r in reports}) == 1, reports
    for r in reports:
        lr, initial = r["lr"], r["initial_lr"]
        assert initial / r["size"] < lr[0] < initial, r
        assert lr[1] == pytest.approx(initial, rel=1e-6) and lr[2] == pytest.approx(initial / 2, rel=1e-6), r


def test_settings_reach_the_ranks_of_every_host_and_the_rank_contract_does_not(make_cluster) -> None:
    cluster = make_cluster(2)
    cluster.write_job(MPI, program=PROGRAMS / "dump_rank_env.py")
    cluster.start(TRAIN, cluster.env(SM_PEER_WAIT_SECONDS="60", SMTRAIN_SSHD_PORT="22", SMTRAIN_S3_PART_BYTES="6291456"))
    statuses = cluster.wait(120)
    assert statuses == {"algo-1": 0, "algo-2": 0}, {h.name: h.stderr()[-1500:] for h in cluster.hosts}
    envs = [json.loads(p.read_text()) for p in wait_for_files(cluster, "env-*.json", 4, 5)]
    assert sorted(int(e["SM_RANK"]) for e in envs) == [0, 1, 2, 3]
    assert {e["SM_CURRENT_HOST"] for e in envs} == {"algo-1", "algo-2"}
    assert [RANK_CONTRACT_ENV in e for e in envs] == [False] * 4
    assert [e.get("SMTRAIN_S3_PART_BYTES") for e in envs] == ["6291456"] * 4  # the worker's ranks too, through mpirun
    assert cluster.leftovers() == {}


def test_a_crashing_rank_on_a_worker_ends_every_host(make_cluster) -> None:
    cluster = make_cluster(3)
    cluster.write_job({**MPI, "crash-rank": 3, "crash-after": 2}, program=PROGRAMS / "mpi_behaviour.py")
    cluster.start(TRAIN, cluster.env(SM_PEER_WAIT_SECONDS="30"))
    assert len(wait_for_files(cluster, "running-*", 6, 30)) == 6
    crashed = time.monotonic() + 2  # rank 3 raises 2 s after it started
    edges = cluster.wait_timed(30)
    statuses = edges.statuses
    assert all(s not in (None, 0) for s in statuses.values()), statuses
    assert max(edges.ended.values()) - crashed < 10
    assert all(s < JOB_END_S for s in edges.after_last_rank().values()), edges.after_last_rank()
    reason = cluster.hosts[0].failure()
    assert reason is not None and reason.startswith("RuntimeError: ")
    assert "rank 3" in reason and "on host algo-2" in reason and "rank 3 failed on purpose" in reason
    assert statuses["algo-1"] == 1  # the failing rank's own status
    for worker in cluster.hosts[1:]:
        assert "rank 3" in (worker.failure() or ""), worker.stderr()[-1000:]
    assert cluster.leftovers() == {}


@pytest.mark.parametrize("on_term,expected", [("exit0", 0), ("continue", 137)])
def test_sigterm_to_every_host(make_cluster, on_term: str, expected: int) -> None:
    cluster = make_cluster(2)
    cluster.write_job({**MPI, "on-term": on_term}, program=PROGRAMS / "mpi_behaviour.py")
    grace = 3
    cluster.start(TRAIN, cluster.env(SM_PEER_WAIT_SECONDS="30", SM_GRACE_PERIOD_SECONDS=str(grace)))
    assert len(wait_for_files(cluster, "running-*", 4, 30)) == 4
    sent = time.monotonic()
    for host in cluster.hosts:
        host.signal(signal.SIGTERM)
    statuses = cluster.wait(grace + 20)
    assert statuses == {h.name: expected for h in cluster.hosts}, {h.name: h.stderr()[-1500:] for h in cluster.hosts}
    assert len(wait_for_files(cluster, "sigterm-*", 4, 1)) == 4  # every rank got SIGTERM
    took = time.monotonic() - sent
    assert took < (2 if expected == 0 else grace + 5), took
    assert cluster.leftovers() == {}


def _running_job(make_cluster, hosts: int = 3):
    """A cluster whose every rank is running mpi_behaviour.py (until told otherwise)."""
    cluster = make_cluster(hosts)
    cluster.write_job(MPI, program=PROGRAMS / "mpi_behaviour.py")
    cluster.start(TRAIN, cluster.env(SM_PEER_WAIT_SECONDS="30"))
    assert len(wait_for_files(cluster, "running-*", 2 * hosts, 30)) == 2 * hosts
    return cluster


def test_worker_host_dies_mid_job(make_cluster) -> None:
    cluster = _running_job(make_cluster)
    died = time.monotonic()
    cluster.host("algo-3").kill()
    statuses = cluster.wait(20, hosts=cluster.hosts[:2])
    assert time.monotonic() - died < 15
    assert statuses == {"algo-1": 69, "algo-2": 69}, statuses  # HostLost, as for every kind of job
    assert (cluster.hosts[0].failure() or "").startswith("HostLost: lost worker host algo-3"), cluster.hosts[0].stderr()[-2000:]
    assert cluster.hosts[0].leftovers() == [] and cluster.hosts[1].leftovers() == []
    # the master's one report for the job still comes: it names the host that died, covers the rest
    summary = json.loads((cluster.hosts[0].ml / "output" / "data" / "profiler-report" / "summary.json").read_text())
    assert "host algo-3 is missing from this report: lost during the job" in summary["notes"], summary["notes"]
    assert {"algo-1", "algo-2"} <= set(summary["hosts"]), summary["hosts"]


def test_a_worker_cut_off_then_killed_ends_the_job_on_every_host(make_cluster) -> None:
    """Power loss or a partition: no connection is closed, so only the heartbeats tell. The master
    ends the job with HostLost naming the host; the other worker follows; nothing is left behind."""
    cluster = _running_job(make_cluster)
    cut = time.monotonic()
    cluster.host("algo-3").cut_cable()
    cluster.host("algo-3").kill()
    statuses = cluster.wait(40, hosts=cluster.hosts[:2])
    took = time.monotonic() - cut
    assert statuses == {"algo-1": 69, "algo-2": 69}, statuses
    assert took < 30, took
    print(f"cut cable -> every other host exited: {took:.1f} s")
    reason = cluster.hosts[0].failure() or ""
    assert reason.startswith("HostLost: lost worker host algo-3"), cluster.hosts[0].stderr()[-2000:]
    assert "algo-3" in (cluster.hosts[1].failure() or "")
    assert "nothing heard for 10 s" in cluster.hosts[0].stderr()
    assert cluster.hosts[0].leftovers() == [] and cluster.hosts[1].leftovers() == []


@pytest.mark.parametrize("held,first_line", [("algo-2", "connecting to the master"), ("algo-1", "waiting up to")])
def test_a_host_whose_log_stream_backs_up_stays_in_the_job(make_cluster, held: str, first_line: str) -> None:
    """docker's log stream backs up when what reads it falls behind, and every write to stderr then
    blocks. Heartbeats must not wait on the log: one host's stderr held full for 10 s from before
    the job starts, with the heartbeat timeout at 3 s, costs the job nothing but the wait. The master's
    `train` is also stopped for 4 s while its log is held (short of CPU, as in SDK local mode): its next beat
    goes out late, and saying so must not hold its beats back until the log flows again - the worker hears it
    again within seconds of the stop (before, not until the log was released)."""
    cluster = make_cluster(2)
    cluster.write_job({**MPI, "run-for": 12, "sagemaker_heartbeat_timeout_seconds": 3},
                      program=PROGRAMS / "mpi_behaviour.py")
    env = cluster.env(SM_PEER_WAIT_SECONDS="60")
    log = LogPipe()
    try:
        cluster.host(held).start(TRAIN, env, stderr=log.write_fd)
        assert log.wait_for(first_line, 30), log.text()
        assert log.hold() > 0  # the other host is not up yet: every line from its hello on blocks
        held_since = time.monotonic()
        cluster.start(TRAIN, env, hosts=[h for h in cluster.hosts if h.name != held])
        if held == "algo-2":  # the master starts the ranks meanwhile (its own log flows)
            assert len(wait_for_files(cluster, "running-*", 4, 30)) == 4, cluster.hosts[0].stderr()[-2000:]
        else:  # the worker has joined: the master beats to it
            deadline = time.monotonic() + 30
            while "trusting the job's ssh key" not in cluster.hosts[1].stderr():
                assert time.monotonic() < deadline, cluster.hosts[1].stderr()[-2000:]
                time.sleep(0.1)
            cluster.host(held).signal(signal.SIGSTOP)
            time.sleep(4)
            cluster.host(held).signal(signal.SIGCONT)
        time.sleep(max(0.0, held_since + 10 - time.monotonic()))
        log.release()
        statuses = cluster.wait(60)
    finally:
        log.close()
    held_log = "\n".join(line for line in log.text().splitlines() if line)  # the filler's empty lines out
    logs = {h.name: held_log if h.name == held else h.stderr()[-1500:] for h in cluster.hosts}
    assert statuses == {"algo-1": 0, "algo-2": 0}, logs
    assert "nothing heard" not in held_log and "the job succeeded" in held_log, logs
    if held == "algo-1":
        silences = [float(s) for s in re.findall(r"the master algo-1 speaks again after ([0-9.]+) s", logs["algo-2"])]
        assert silences and max(silences) < 7.5, logs  # the 4-s stop, not the log's hold
    assert cluster.leftovers() == {}


def test_a_host_whose_train_gets_no_cpu_past_its_limit_stays_in_the_job_while_the_ranks_train(make_cluster) -> None:
    """Where hosts share a machine (SDK local mode), the kernel has left one container's every process
    without CPU for over 10 s (and a master's train said nothing for 70 s while its ranks trained). Its train
    says nothing meanwhile, but its kernel still acknowledges the other side's heartbeats: that host is not
    lost. SIGSTOP stands in for the starvation (its ranks and sshd run on); the heartbeat timeout is 3 s, the
    master's train stopped for 24 s - past the 18-s limit of a silent train whose host answers - then, in the
    same job, the worker's, while the other host's ranks train on (a plain Horovod loop, its steps in the step
    recorder's files): the other host waits while its ranks train. Before, the master ended such a job at the
    limit (HostLost), or a worker left it (MasterLost)."""
    stopped_s, between_s = 24, 3
    cluster = make_cluster(2)
    cluster.write_job({**MPI, "seconds": 2 * stopped_s + between_s + 8, "interval": 0.1,
                       "sagemaker_heartbeat_timeout_seconds": 3}, program=PROGRAMS / "hvd_plain_loop.py")
    cluster.start(TRAIN, cluster.env(SM_PEER_WAIT_SECONDS="60"))
    deadline = time.monotonic() + 60
    while "rank 0 began" not in cluster.hosts[0].stdout():
        assert time.monotonic() < deadline, cluster.hosts[0].stderr()[-2000:]
        time.sleep(0.2)
    for starved in ("algo-1", "algo-2"):
        host = cluster.host(starved)
        host.signal(signal.SIGSTOP)
        try:
            time.sleep(stopped_s)
        finally:
            host.signal(signal.SIGCONT)
        time.sleep(between_s)
    statuses = cluster.wait(60)
    logs = "".join(f"\n--- {h.name}:\n{h.log_tail()}" for h in cluster.hosts)
    assert statuses == {"algo-1": 0, "algo-2": 0}, logs
    for starved, peer, other in (("algo-1", "the master algo-1", "algo-2"), ("algo-2", "worker algo-2", "algo-1")):
        said = cluster.host(other).stderr()
        assert f"{peer} has said nothing for 3 s, but its host acknowledges this host's heartbeats" in said, logs
        assert f"{peer} speaks again after " in said and "nothing heard" not in said, logs
        assert "but this host's ranks still train" in said, logs
    assert cluster.leftovers() == {}


def test_master_dies_mid_job(make_cluster) -> None:
    cluster = _running_job(make_cluster)
    died = time.monotonic()
    cluster.host("algo-1").kill()
    statuses = cluster.wait(20, hosts=cluster.hosts[1:])
    assert time.monotonic() - died < 5
    assert statuses == {"algo-2": 69, "algo-3": 69}, statuses
    for worker in cluster.hosts[1:]:
        assert (worker.failure() or "").startswith("MasterLost: lost the master algo-1")
        assert worker.leftovers() == []


def test_master_never_starts(make_cluster) -> None:
    cluster = make_cluster(2)
    cluster.write_job(MPI, program=PROGRAMS / "mpi_behaviour.py")
    started = time.monotonic()
    cluster.start(TRAIN, cluster.env(SM_PEER_WAIT_SECONDS="3"), hosts=cluster.hosts[1:])
    statuses = cluster.wait(20, hosts=cluster.hosts[1:])
    assert statuses == {"algo-2": 69}
    assert time.monotonic() - started < 3 + 5
    reason = cluster.hosts[1].failure() or ""
    assert reason.startswith("PeersUnreachable: ") and "master algo-1 was not reachable" in reason
    assert cluster.hosts[1].leftovers() == []


def test_worker_never_starts(make_cluster) -> None:
    cluster = make_cluster(3)
    cluster.write_job(MPI, program=PROGRAMS / "mpi_behaviour.py")
    cluster.start(TRAIN, cluster.env(SM_PEER_WAIT_SECONDS="4"), hosts=cluster.hosts[:2])
    statuses = cluster.wait(20, hosts=cluster.hosts[:2])
    assert statuses == {"algo-1": 69, "algo-2": 69}, statuses
    reason = cluster.hosts[0].failure() or ""
    assert reason.startswith("PeersUnreachable: workers algo-3 did not report"), reason
    assert "algo-3" in (cluster.hosts[1].failure() or "")  # the worker that came learns why the job ended


def test_a_worker_whose_sshd_the_master_cannot_reach_is_named_before_mpirun_starts(make_cluster) -> None:
    """Its control connection came (a security group that lets 7077 through, not 22, say): mpirun alone would
    end with status 255 and 'ORTE was unable to reliably start one or more daemons'. Here algo-3's sshd
    listens where mpirun's ssh does not look."""
    cluster = make_cluster(3)
    cluster.write_job(MPI, program=PROGRAMS / "mpi_behaviour.py")
    started = time.monotonic()
    cluster.start(TRAIN, cluster.env(SM_PEER_WAIT_SECONDS="4", SMTRAIN_SSHD_PORT="22"), hosts=cluster.hosts[:2])
    cluster.host("algo-3").start(TRAIN, cluster.env(SM_PEER_WAIT_SECONDS="4", SMTRAIN_SSHD_PORT="2299"))
    statuses = cluster.wait(30)
    assert statuses == {"algo-1": 69, "algo-2": 69, "algo-3": 69}, cluster.hosts[0].stderr()[-1500:]
    assert time.monotonic() - started < 4 + 15
    reason = cluster.hosts[0].failure() or ""
    assert reason.startswith("PeersUnreachable: workers algo-3 joined the job, but their sshd did not answer on "
                             "port 22"), reason
    assert "algo-3" in (cluster.hosts[2].failure() or "") and "ORTE" not in cluster.hosts[0].stderr()
    assert not wait_for_files(cluster, "running-*", 1, 0)  # no rank started
    assert cluster.leftovers() == {}


def test_a_late_worker_still_joins(make_cluster) -> None:
    """A worker in early hears heartbeats while the master waits for one that starts late."""
    cluster = make_cluster(3)
    cluster.write_job({**MPI, "run-for": 1}, program=PROGRAMS / "mpi_behaviour.py")
    env = cluster.env(SM_PEER_WAIT_SECONDS="60")
    cluster.start(TRAIN, env, hosts=cluster.hosts[:2])
    time.sleep(12)  # longer than a worker waits without hearing from its master
    cluster.start(TRAIN, env, hosts=cluster.hosts[2:])
    statuses = cluster.wait(60)
    assert statuses == {"algo-1": 0, "algo-2": 0, "algo-3": 0}, {h.name: h.stderr()[-800:] for h in cluster.hosts}


def test_aws_per_rank_channels_by_global_rank_on_two_hosts(make_cluster, tmp_path: Path) -> None:
    """2 hosts x 2 ranks, AWS's layout numbered by global rank: SageMaker feeds every channel to every
    host; rank g reads `train_g` (2 epochs) and `validation_g`, rank 0 alone reads `eval`. Each rank
    gets exactly its channels' records, in order; channels no rank of a host reads stay unopened there."""
    from smtrain.data.feeder import Feeder, channel_objects
    from smtrain.data.record_reader import encode_tfrecord

    names = [f"train_{r}" for r in range(4)] + [f"validation_{r}" for r in range(4)] + ["validation", "eval"]
    expected = {}
    for i, name in enumerate(names):
        expected[name] = [f"{name}:{j}".encode() * (1 + j % 5) for j in range(20 + i)]
        (tmp_path / name).mkdir()
        (tmp_path / name / "part").write_bytes(b"".join(encode_tfrecord(r) for r in expected[name]))
    cluster = make_cluster(2)
    cluster.write_job({**MPI, "epochs": 2}, program=PROGRAMS / "pipe_rank_channels.py")
    feeders = []
    for host in cluster.hosts:
        (host.ml / "input" / "config" / "inputdataconfig.json").write_text(json.dumps(
            {n: {"TrainingInputMode": "Pipe", "ContentType": "application/x-tfrecord"} for n in names}))
        data = host.ml / "input" / "data"
        data.mkdir(parents=True, exist_ok=True)
        feeders.append(Feeder(data, {n: channel_objects(str(tmp_path / n)) for n in names}, {n: None for n in names},
                              epochs=2).start())
    cluster.start(TRAIN, cluster.env(SM_PEER_WAIT_SECONDS="60"))
    statuses = cluster.wait(240)
    assert statuses == {"algo-1": 0, "algo-2": 0}, {h.name: h.stderr()[-2000:] for h in cluster.hosts}
    for rank in range(4):
        host = cluster.hosts[rank // 2]
        out = host.ml / "output" / "data"

        def got(channel: str, epoch: int) -> list[bytes]:
            return [bytes.fromhex(x) for x in (out / f"got-{rank}-{channel}-{epoch}").read_text().split()]

        assert got(f"train_{rank}", 0) == got(f"train_{rank}", 1) == expected[f"train_{rank}"]
        assert got(f"validation_{rank}", 0) == expected[f"validation_{rank}"]
    assert [p.name for p in (cluster.hosts[0].ml / "output" / "data").glob("got-*-eval-*")] == ["got-0-eval-0"]
    assert (cluster.hosts[0].ml / "output" / "data" / "got-0-eval-0").read_text().split() == [r.hex() for r in expected["eval"]]
    for host, feeder in zip(cluster.hosts, feeders):
        feeder.stop.set()
        feeder.join(10)
        # a host feeds only what its own ranks read: algo-1 train_0/train_1, algo-2 train_2/train_3
        mine = range(0, 2) if host.name == "algo-1" else range(2, 4)
        assert {n for n, epochs in feeder.fed.items() if epochs} == (
            {f"train_{r}" for r in mine} | {f"validation_{r}" for r in mine} | ({"eval"} if host.name == "algo-1" else set()))
    assert cluster.leftovers() == {}


@pytest.mark.parametrize("seed", [None, 3])
def test_pipe_job_stopped_mid_epoch_resumes_on_two_hosts(make_cluster, tmp_path: Path, seed) -> None:
    """SIGTERM to both hosts mid-epoch: every rank stops at the same step, rank 0 saves every rank's
    position; the restarted job (fed again from FIFO epoch 0, as SageMaker does) skips exactly that.
    With a ShuffleConfig (seed 3) the stop comes in epoch 1, whose order FIFO 0 does not repeat: every
    host's demultiplexer leaves out what the job's ranks consumed (by fingerprint; the hosts' gathered by
    the master) before dealing; each record is counted once an epoch over the job's ranks. The
    checkpoint folder is copied to the worker host before the restart, as SageMaker restores it to
    every instance."""
    import shutil
    from collections import Counter

    from smtrain.data.feeder import channel_objects, epoch_order
    from smtrain.data.record_reader import encode_tfrecord

    source = tmp_path / "src"
    source.mkdir()
    everything = []
    names = ["a", "b"] if seed is None else ["a", "b", "c", "d", "e", "f"]
    for name in names:
        records = [f"{name}/{i}".encode() for i in range(100 if seed is None else 40)]
        (source / name).write_bytes(b"".join(encode_tfrecord(r) for r in records))
        everything += records
    stop_epoch = 0 if seed is None else 1
    if seed is not None:  # the interrupted epoch's order is not FIFO 0's: a count-based skip would be wrong
        assert epoch_order(channel_objects(str(source)), seed, 0)[0] != epoch_order(channel_objects(str(source)), seed, 1)[0]
    channel = {"TrainingInputMode": "Pipe", **({"ShuffleConfig": {"Seed": seed}} if seed is not None else {})}
    cluster = make_cluster(2)
    for run in ("1", "2"):
        cluster.write_job({**MPI, "run": run, "epochs": 2, "horovod": "yes", "delay": 0.02},
                          program=PROGRAMS / "pipe_resume.py")
        feeders = feed_every_host(cluster, channel, [source, source], epochs=2)
        cluster.start(TRAIN, cluster.env(SM_PEER_WAIT_SECONDS="60", SM_GRACE_PERIOD_SECONDS="30"))
        if run == "1":
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:  # until the ranks are well into the epoch to stop in
                lines = sum(p.read_text().count("\n") for p in wait_for_files(cluster, "consumed-1-*", 0, 0))
                if lines >= 60 + stop_epoch * len(everything):
                    break
                time.sleep(0.1)
            for host in cluster.hosts:
                host.signal(signal.SIGTERM)
        statuses = cluster.wait(180)
        assert statuses == {"algo-1": 0, "algo-2": 0}, {h.name: h.stderr()[-2000:] for h in cluster.hosts}
        for feeder in feeders:
            feeder.stop.set()
            feeder.join(5)
        if run == "1":
            master_checkpoints = cluster.hosts[0].ml / "checkpoints"
            for host in cluster.hosts[1:]:
                shutil.copytree(master_checkpoints, host.ml / "checkpoints", dirs_exist_ok=True)
    by_epoch: dict[int, Counter] = {}
    first_run = 0
    for path in (p for host in cluster.hosts for p in (host.ml / "output" / "data").glob("consumed-*")):
        for line in path.read_text().split("\n"):
            if line:
                epoch, record = line.split()
                by_epoch.setdefault(int(epoch), Counter())[bytes.fromhex(record)] += 1
                first_run += path.name.startswith("consumed-1-") and int(epoch) == stop_epoch
    assert 0 < first_run < len(everything), f"run 1 should have stopped mid-epoch {stop_epoch}"
    for epoch in (0, 1):
        assert by_epoch[epoch] == Counter(everything), f"epoch {epoch}: a record lost or repeated"
    if seed is not None:
        for host in cluster.hosts:
            assert "consumed of the interrupted epoch are left out of FIFO 0" in host.stderr(), host.name


def test_hosts_with_different_record_counts_take_equal_steps_through_the_helper(make_cluster, tmp_path: Path) -> None:
    """ShardedByS3Key gives hosts different shares: 40 records on algo-1, 24 on algo-2 (20 and 12 per
    rank, batches of 4: 5 and 3 steps). pipes.equal_steps makes every rank take 3, and the job ends 0."""
    from smtrain.data.record_reader import encode_tfrecord

    cluster = make_cluster(2)
    cluster.write_job({**MPI, "batch": 4, "equal-steps": "yes"}, program=PROGRAMS / "hvd_pipe_steps.py")
    sources = []
    for host, count in zip(cluster.hosts, (40, 24)):
        sources.append(tmp_path / host.name)
        sources[-1].mkdir()
        (sources[-1] / "part").write_bytes(b"".join(encode_tfrecord(f"{host.name}/{i}".encode()) for i in range(count)))
    feeders = feed_every_host(cluster, {"TrainingInputMode": "Pipe", "S3DistributionType": "ShardedByS3Key"},
                              sources, epochs=1)
    cluster.start(TRAIN, cluster.env(SM_PEER_WAIT_SECONDS="60"))
    statuses = cluster.wait(180)
    assert statuses == {"algo-1": 0, "algo-2": 0}, {h.name: h.stderr()[-2000:] for h in cluster.hosts}
    assert all(f.join(10) for f in feeders)
    steps = sorted(p.read_text() for p in wait_for_files(cluster, "steps-*", 4, 5))
    assert steps == ["3"] * 4
    assert "this rank skipped its last 2 batch(es)" in cluster.hosts[0].stderr()
    assert cluster.leftovers() == {}


def test_a_rank_that_stops_progressing_fails_the_job_on_every_host_with_stacks(make_cluster) -> None:
    """Rank 3 (on algo-2) sleeps after 5 steps (counted with smtrain.progress); the others wait in the
    next allreduce. Stall timeout 20 s: every host ends non-zero within 60 s of the stall, naming rank
    3 on algo-2 alone (from its fewer steps or from Horovod's stall inspector: whichever sees it first),
    stacks logged."""
    cluster = make_cluster(2)
    cluster.write_job({**MPI, "stall-rank": 3, "stall-after": 5, "sagemaker_stall_timeout_seconds": 20},
                      program=PROGRAMS / "hvd_stall.py")
    _assert_every_host_stalled_naming(cluster, "stalled-at", "rank 3 on algo-2", "sleeping_in_the_training_loop")


def test_a_plain_horovod_rank_that_stops_on_the_second_host_is_named_on_every_host(make_cluster) -> None:
    """The same with a script that never imports smtrain: only Horovod's stall inspector knows."""
    cluster = make_cluster(2)
    cluster.write_job({**MPI, "mode": "function", "seconds": 600, "interval": 0.2, "stop-rank": 3, "stop-at": 20,
                       "sagemaker_stall_timeout_seconds": 12}, program=PROGRAMS / "hvd_plain_loop.py")
    reasons = _assert_every_host_stalled_naming(cluster, "stopped-at", "rank 3 on algo-2", "stopped_in_the_training_loop")
    assert all("waited for it in a Horovod collective" in r for r in reasons), reasons


def _assert_every_host_stalled_naming(cluster, marker: str, named: str, stack_of: str) -> list[str]:
    cluster.start(TRAIN, cluster.env(SM_PEER_WAIT_SECONDS="60"))
    statuses = cluster.wait(150)
    assert statuses == {"algo-1": 124, "algo-2": 124}, {h.name: h.stderr()[-2000:] for h in cluster.hosts}
    stalled_at = float(wait_for_files(cluster, marker, 1, 1)[0].read_text())
    print(f"{named} stopped -> every host exited: {time.time() - stalled_at:.1f} s")
    assert time.time() - stalled_at < 60
    reasons = [host.failure() or "" for host in cluster.hosts]
    for reason in reasons:
        assert reason.startswith("Stalled: "), reason
        head = reason.splitlines()[0]
        assert named in head and head.count(" on algo-") == 1, reason  # that rank alone
    logs = cluster.hosts[0].stderr() + cluster.hosts[1].stdout() + cluster.hosts[0].stdout()
    assert f"in {stack_of}" in logs  # the stalled rank's stack
    assert logs.count("Fatal Python error: Aborted") >= 4  # every rank's
    assert cluster.leftovers() == {}
    return reasons


def test_a_rank_that_hangs_before_hvd_init_is_named(make_cluster) -> None:
    """The host answers ssh, but rank 2's program hangs before hvd.init; the others wait in it."""
    cluster = make_cluster(2)
    cluster.write_job({**MPI, "hang-rank": 2, "sagemaker_stall_timeout_seconds": 15},
                      program=PROGRAMS / "hvd_late_init.py")
    started = time.monotonic()
    cluster.start(TRAIN, cluster.env(SM_PEER_WAIT_SECONDS="60"))
    statuses = cluster.wait(120)
    assert statuses == {"algo-1": 124, "algo-2": 124}, {h.name: h.stderr()[-2000:] for h in cluster.hosts}
    assert time.monotonic() - started < 90
    reason = cluster.hosts[0].failure() or ""
    assert reason.startswith("Stalled: rank 2 on algo-2 never reached hvd.init(); the other ranks have waited in it for "), reason
    assert "in hanging_before_init" in cluster.hosts[0].stderr() + cluster.hosts[0].stdout()
    assert cluster.leftovers() == {}
