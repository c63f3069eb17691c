"""The Pipe-mode rule (docs/guide.md) on two simulated hosts (real sshd, mpirun and train; each host's feeder plays
SageMaker): each record of a channel reaches one rank of the job an epoch - a FullyReplicated channel dealt
across the job's hosts (through each host's demultiplexer, with one rank a host too), a ShardedByS3Key one
across each host's ranks - whatever `.shard()` an AWS-style PipeModeDataset script keeps; SMTRAIN_PIPE_DEALING=
host gives each host's ranks the whole channel, as documented. One cluster for every case."""
from __future__ import annotations

import os
import shutil
from collections import Counter
from pathlib import Path
from typing import Iterator

import pytest

from tests.harness.cluster import Cluster
from tests.harness.cluster_jobs import PROGRAMS, TRAIN, feed_every_host, wait_for_files

MPI = {"sagemaker_mpi_enabled": True}
RECORDS = 64


@pytest.fixture(scope="module")
def cluster() -> Iterator[Cluster]:
    if os.geteuid() != 0:
        pytest.skip("the cluster harness needs root")
    with Cluster(f"pd{os.getpid() % 1000}"[:6], 2, net=8) as made:
        yield made


def _records(name: str) -> list[bytes]:
    return [f"{name} record {i}".encode() * (1 + i % 3) for i in range(RECORDS)]


# layout: (ranks a host, S3DistributionType, the script's .shard, SMTRAIN_PIPE_DEALING)
LAYOUTS = {
    "fully-replicated 2x2, .shard(hvd.size(), hvd.rank())": (2, "FullyReplicated", "rank", "job"),
    "fully-replicated 2x1, no .shard": (1, "FullyReplicated", "none", "job"),
    "sharded-by-s3-key 2x2, .shard(hvd.size(), hvd.rank())": (2, "ShardedByS3Key", "rank", "job"),
    "sharded-by-s3-key 2x1 (read directly), no .shard": (1, "ShardedByS3Key", "none", "job"),
    "whole channel per host 2x2, .shard(hosts, host)": (2, "FullyReplicated", "host", "host"),
}


@pytest.mark.parametrize("layout", LAYOUTS)
def test_each_record_reaches_one_rank_of_the_job_an_epoch(cluster: Cluster, tmp_path: Path, layout: str) -> None:
    from smtrain.data.record_reader import encode_tfrecord

    per_host, distribution, shard, dealing = LAYOUTS[layout]
    sharded = distribution == "ShardedByS3Key"
    sources, expected = [], Counter()
    for host in cluster.hosts:  # FullyReplicated: one stream for every host; ShardedByS3Key: each host its own
        records = _records(host.name if sharded else "job")
        folder = tmp_path / (host.name if sharded else "job")
        if not folder.exists():
            folder.mkdir()
            (folder / "part").write_bytes(b"".join(encode_tfrecord(r) for r in records))
            expected.update(records)
        sources.append(folder)
        for name in ("output", "input/data"):
            shutil.rmtree(host.ml / name, ignore_errors=True)
    cluster.write_job({**MPI, "sagemaker_mpi_num_of_processes_per_host": per_host, "epochs": 2, "shard": shard},
                      program=PROGRAMS / "pipemode_shard.py")
    feeders = feed_every_host(cluster, {"TrainingInputMode": "Pipe", "S3DistributionType": distribution},
                              sources, epochs=2)
    cluster.start(TRAIN, cluster.env(SM_PEER_WAIT_SECONDS="60", SM_SYSTEM_MONITOR="off", SMTRAIN_PIPE_DEALING=dealing))
    statuses = cluster.wait(240)
    assert statuses == {"algo-1": 0, "algo-2": 0}, {h.name: h.stderr()[-2000:] for h in cluster.hosts}
    assert all(f.join(10) for f in feeders)
    ranks = 2 * per_host
    if dealing == "host":  # the documented whole-channel setting: each host's ranks share the whole channel
        expected = Counter({r: 1 for r in _records("job")})
    for epoch in range(2):
        got = {int(p.name.split("-")[1]): [bytes.fromhex(x) for x in p.read_text().split()]
               for p in wait_for_files(cluster, f"shard-*-{epoch}", ranks, 5)}
        assert sorted(got) == list(range(ranks))
        assert Counter(r for rank in got.values() for r in rank) == expected, f"epoch {epoch}: lost or repeated"
        if not sharded:
            assert {len(rank) for rank in got.values()} == {RECORDS // ranks}  # equal counts: no collective waits
    master = cluster.hosts[0].stderr()
    how = ("every host receives the whole channel (FullyReplicated) and deals it alike" if dealing == "job" and not sharded
           else "dealt in whole records" if per_host > 1 else "read whole, as it comes, by the one process that opens it")
    assert "Pipe channel train: " + how in master
    if dealing == "job" and not sharded:
        assert f"Pipe channel train: dealt across 2 hosts to the job's ranks {', '.join(map(str, range(ranks)))}" in master
        assert "different streams" not in master
    if shard == "rank":  # the script's own .shard: ignored, and said (the rank's stderr reaches the master's log)
        assert f".shard({ranks}, 0) ignored: train deals each rank's share of this channel already" in master
    assert cluster.leftovers() == {}
