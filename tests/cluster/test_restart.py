"""In-job restarts (`sagemaker_max_restarts`) of a 2x2 Horovod job through the real `train` on two
simulated hosts (one cluster for every case): a rank that raises once, or is SIGKILLed once, is
restarted in place and the job resumes from its newest checkpoint to the weights an uninterrupted run
computes; a rank that fails at the same step every time ends the job after one restart with its cause;
SIGTERM while the job restarts ends it at once; with no restarts asked for the job fails as before."""
from __future__ import annotations

import json
import os
import shutil
import signal
import sys
import time
from pathlib import Path
from typing import Iterator

import pytest

from tests.harness.cluster_jobs import PROGRAMS
from tests.harness.cluster import Cluster

TRAIN = [str(Path(sys.executable).parent / "train")]
MPI = {"sagemaker_mpi_enabled": True, "sagemaker_mpi_num_of_processes_per_host": 2}
JOB = {**MPI, "steps": 50, "every": 10}


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    if os.geteuid() != 0:
        pytest.skip("the cluster harness needs root")
    with Cluster(f"rs{os.getpid() % 1000}"[:6], 2, net=7) as made:
        yield made


def _start(cluster: Cluster, hyperparameters: dict) -> None:
    for host in cluster.hosts:  # every job from nothing: no checkpoint, output or marker of the last one
        for folder in ("checkpoints", "output", "model"):
            shutil.rmtree(host.ml / folder, ignore_errors=True)
    cluster.write_job(hyperparameters, program=PROGRAMS / "hvd_restart.py")
    cluster.start(TRAIN, cluster.env(SM_PEER_WAIT_SECONDS="60", SM_SYSTEM_MONITOR="off"))


def _run(cluster: Cluster, hyperparameters: dict) -> dict:
    _start(cluster, hyperparameters)
    return cluster.wait(300)


def _weights(cluster: Cluster) -> dict:
    return json.loads((cluster.hosts[0].ml / "model" / "weights.json").read_text())


def _starts(cluster: Cluster, rank: int) -> list[tuple[int, float, float]]:
    """Each run of rank `rank`'s program: (the step it started from, when it began, when it ran its loop)."""
    host = cluster.hosts[rank // 2]
    lines = (host.ml / "output" / "data" / f"starts-{rank}.txt").read_text().splitlines()
    return [(int(a), float(b), float(c)) for a, b, c in (line.split() for line in lines)]


def _details(cluster: Cluster) -> str:
    return "\n".join(f"--- {h.name}\n{h.stderr()[-3000:]}" for h in cluster.hosts)


@pytest.fixture(scope="module")
def uninterrupted(cluster: Cluster) -> dict:
    statuses = _run(cluster, JOB)
    assert statuses == {"algo-1": 0, "algo-2": 0}, _details(cluster)
    return _weights(cluster)


def test_a_rank_that_raises_once_is_restarted_and_ends_with_the_weights_of_an_uninterrupted_run(
        cluster: Cluster, uninterrupted: dict) -> None:
    statuses = _run(cluster, {**JOB, "fail-rank": 3, "fail-step": 30, "sagemaker_max_restarts": 2})
    assert statuses == {"algo-1": 0, "algo-2": 0}, _details(cluster)
    weights = _weights(cluster)
    assert weights["steps"] == 50 and weights == uninterrupted  # the same floats: resumed, not retrained
    for rank in range(4):
        starts = _starts(cluster, rank)
        assert [s[0] for s in starts] in ([0, 30], [0, 20]), (rank, starts)  # resumed from step 30's newest checkpoint
    failed_at = (cluster.hosts[1].ml / "output" / "data" / "failed-3").stat().st_mtime
    again = [_starts(cluster, rank)[1] for rank in range(4)]
    launched = min(began for _, began, _ in again) - failed_at  # the toolkit's part: failure -> new processes
    running = max(ran for _, _, ran in again) - failed_at  # ... -> every rank running again
    startup = max(ran - began for _, began, ran in again)  # the program's own start-up (imports, hvd.init)
    print(f"restart: processes started {launched:.2f} s after the failure; every rank running after "
          f"{running:.2f} s, of which the program's start-up {startup:.2f} s")
    assert launched <= 5.0 and running <= 5.0 + startup, (launched, running, startup)
    master = cluster.hosts[0].stderr()
    assert "restarting the job in place (restart 1 of 2)" in master and "RuntimeError: rank 3 fails at step 30" in master
    assert "the job succeeded after 1 restart(s) in place" in master
    assert "the master restarts the job in place (restart 1)" in cluster.hosts[1].stderr()
    # both attempts' mpirun reached the worker through the master's one held ssh connection: one login
    assert "ssh connections to the workers held for every attempt's mpirun" in master
    assert cluster.hosts[1].stderr().count("Accepted publickey for root") == 1, _details(cluster)
    assert cluster.leftovers() == {}


def test_a_rank_killed_once_is_restarted(cluster: Cluster, uninterrupted: dict) -> None:
    statuses = _run(cluster, {**JOB, "fail-rank": 2, "fail-step": 15, "fail-how": "kill", "sagemaker_max_restarts": 1})
    assert statuses == {"algo-1": 0, "algo-2": 0}, _details(cluster)
    assert _weights(cluster) == uninterrupted
    assert [s[0] for s in _starts(cluster, 2)] == [0, 10]
    assert "was killed by SIGKILL" in cluster.hosts[0].stderr()


def test_a_rank_failing_at_the_same_step_every_time_ends_the_job_with_its_cause(cluster: Cluster) -> None:
    statuses = _run(cluster, {**JOB, "fail-rank": 3, "fail-step": 30, "fail-how": "always",
                              "sagemaker_max_restarts": 3})
    assert statuses == {"algo-1": 1, "algo-2": 1}, _details(cluster)
    failure = (cluster.hosts[0].ml / "output" / "failure").read_text()
    first = failure.splitlines()[0]
    assert first.startswith("RuntimeError: ") and "(rank 3, local rank 1, on host algo-2)" in first, failure
    assert "RuntimeError: rank 3 fails at step 30" in failure  # the rank's own traceback
    assert "attempt 2 of the job; attempt 1 failed after" in first and "not restarted: it failed the same way again" in first
    assert (cluster.hosts[1].ml / "output" / "failure").read_text() == failure  # every host: the job's true outcome
    assert len(_starts(cluster, 0)) == 2  # one restart, not three


def test_sigterm_while_the_job_restarts_ends_it_at_once(cluster: Cluster) -> None:
    _start(cluster, {**JOB, "fail-rank": 1, "fail-step": 12, "sagemaker_max_restarts": 2})
    master = cluster.hosts[0]
    deadline = time.monotonic() + 240
    while "restarting the job in place" not in master.stderr() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert "restarting the job in place" in master.stderr(), _details(cluster)
    stopped = time.monotonic()
    for host in cluster.hosts:  # SageMaker stops every host
        os.kill(host.train_pid, signal.SIGTERM)
    statuses = cluster.wait(60)
    took = time.monotonic() - stopped
    assert len(set(statuses.values())) == 1 and None not in statuses.values() and statuses["algo-1"] != 0, (
        statuses, _details(cluster))
    assert took < 30, took  # not the next attempt's run to its end: the job ends
    assert "not restarted: train was asked to stop (SIGTERM)" in (master.ml / "output" / "failure").read_text()
    assert cluster.leftovers() == {}


def test_without_restarts_asked_for_a_failure_ends_the_job_as_before(cluster: Cluster) -> None:
    statuses = _run(cluster, {**JOB, "fail-rank": 3, "fail-step": 5})
    assert statuses == {"algo-1": 1, "algo-2": 1}, _details(cluster)
    failure = (cluster.hosts[0].ml / "output" / "failure").read_text()
    assert failure.startswith("RuntimeError: ") and "attempt" not in failure.splitlines()[0]
    assert "restart" not in cluster.hosts[0].stderr()  # no ssh connection held either: mpirun logs in itself


def _pipe_job(cluster: Cluster, layout: str) -> tuple[dict[str, list[bytes]], list]:
    """The guide's checkpoint example (docs/guide.md; tests/programs/pipe_restart.py), 2x2 Horovod, reading `train` as
    Pipe mode emulated from each host's files (as under SDK local mode), `lines` records, 2 epochs of 40
    records a rank; rank 3 raises once at step 50 (epoch 1). `layout`: one channel the host's
    demultiplexer deals to its ranks (`demux`, `shuffled` with a ShuffleConfig), AWS's per-rank
    channels `train_0 ... train_3` (`per-rank`); or the same in SageMaker's own Pipe mode, fed by a
    feeder playing SageMaker's part on each host (`sagemaker`, `sagemaker-per-rank`). Every host gets the
    same `train` (FullyReplicated: dealt across the job's hosts), its own ranks' members of a per-rank
    group. Returns the records of an epoch, by the host whose ranks read them (`job`: the job's ranks),
    and the SageMaker feeders."""
    from smtrain.data.feeder import Feeder, channel_objects

    sagemaker, per_rank = layout.startswith("sagemaker"), layout.endswith("per-rank")
    for host in cluster.hosts:
        for folder in ("checkpoints", "output", "model", "input/data", "src"):
            shutil.rmtree(host.ml / folder, ignore_errors=True)
    cluster.write_job({**MPI, "fail-rank": 3, "fail-at": 50, "horovod": "yes", "sagemaker_max_restarts": 2,
                       "sagemaker_pipe_record_format": "lines", **({} if sagemaker else {"sagemaker_pipe_emulation": "on"})},
                      program=PROGRAMS / "pipe_restart.py")
    names = [f"train_{rank}" for rank in range(4)] if per_rank else ["train"]
    channel = {"TrainingInputMode": "Pipe" if sagemaker else "File",
               **({"ShuffleConfig": {"Seed": 7}} if layout == "shuffled" else {})}
    records: dict[str, list[bytes]] = {}
    feeders = []
    for host in cluster.hosts:
        (host.ml / "input" / "config" / "inputdataconfig.json").write_text(json.dumps(dict.fromkeys(names, channel)))
        for name in names:
            for part in ("a",) if per_rank else ("a", "b", "c", "d"):  # 40 records a rank an epoch
                lines = [f"{host.name if per_rank else 'job'}/{name}/{part}/{i}" for i in range(40)]
                folder = host.ml / ("src" if sagemaker else "input/data") / name
                folder.mkdir(parents=True, exist_ok=True)
                (folder / part).write_text("".join(line + "\n" for line in lines))
                mine = int(name[-1]) // 2 == cluster.hosts.index(host) if per_rank else host is cluster.hosts[0]
                records.setdefault(host.name if per_rank else "job", [])
                records[host.name if per_rank else "job"] += [line.encode() for line in lines] if mine else []
        if sagemaker:  # every channel to every host, as SageMaker does; each FIFO opened only if a rank reads it
            (host.ml / "input" / "data").mkdir(parents=True, exist_ok=True)
            feeders.append(Feeder(host.ml / "input" / "data",
                                  {name: channel_objects(str(host.ml / "src" / name)) for name in names},
                                  dict.fromkeys(names), epochs=None).start())
    cluster.start(TRAIN, cluster.env(SM_PEER_WAIT_SECONDS="60", SM_SYSTEM_MONITOR="off"))
    return records, feeders


@pytest.mark.parametrize("layout", ["demux", "shuffled", "per-rank", "sagemaker", "sagemaker-per-rank"])
def test_a_pipe_mode_job_restarted_in_place_trains_on_every_record_once(cluster: Cluster, layout: str, capfd) -> None:
    """Every record of every epoch is trained on exactly once by the job (a per-rank group: by its host's
    ranks) across the two attempts (what each rank's checkpoints committed, counted): the restarted attempt
    reads each channel from FIFO 0 with whole epochs, as after a spot restart, dealt across the hosts again,
    and resumes at the checkpoint's positions - shuffled, by the fingerprints the job's ranks hand their
    demultiplexers (the worker host has no checkpoint); in SageMaker's own Pipe mode, from SageMaker's next
    epoch FIFO, its interrupted one read to its end."""
    from collections import Counter

    records, feeders = _pipe_job(cluster, layout)
    statuses = cluster.wait(300)
    for feeder in feeders:
        feeder.stop.set()
    assert statuses == {"algo-1": 0, "algo-2": 0}, _details(cluster)
    for owner, expected in records.items():
        by_epoch: dict[int, Counter] = {0: Counter(), 1: Counter()}
        for host in cluster.hosts if owner == "job" else [h for h in cluster.hosts if h.name == owner]:
            for path in (host.ml / "output" / "data").glob("trained-*"):
                for line in path.read_text().splitlines():
                    epoch, record = line.split()
                    by_epoch[int(epoch)][bytes.fromhex(record)] += 1
        for epoch in (0, 1):
            assert by_epoch[epoch] == Counter(expected), f"{owner} epoch {epoch}: a record lost or repeated"
    for path in (p for host in cluster.hosts for p in (host.ml / "output" / "data").glob("starts-*")):
        assert len(path.read_text().splitlines()) == 2, (path.name, path.read_text())  # resumed where checkpoints said
    assert "the job succeeded after 1 restart(s) in place" in cluster.hosts[0].stderr()
    if layout == "shuffled":  # each host's demultiplexer, the worker's too, left out what its ranks consumed
        for host in cluster.hosts:
            assert "consumed of the interrupted epoch are left out of FIFO 0" in host.stderr(), host.name
        assert not (cluster.hosts[1].ml / "checkpoints").exists() or not any((cluster.hosts[1].ml / "checkpoints").iterdir())
    if layout.startswith("sagemaker"):  # the interrupted epoch was read to its end on every host: none closed early
        assert "closed the FIFO early" not in capfd.readouterr().err
        for host in cluster.hosts:
            assert "the next attempt's FIFO 0 is SageMaker's train_" in host.stderr(), host.name
    assert cluster.leftovers() == {}
