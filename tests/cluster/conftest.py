"""Cluster tests need root (namespaces) and run real sshd, mpirun and train on simulated hosts."""
from __future__ import annotations

import itertools
import json
import os
import time
from pathlib import Path
from typing import Iterator

import pytest

from tests.harness.cluster import Cluster

PROGRAMS = Path(__file__).resolve().parent.parent / "programs"
_names = itertools.count(1)


@pytest.fixture
def make_cluster() -> Iterator:
    if os.geteuid() != 0:
        pytest.skip("the cluster harness needs root")
    made: list[Cluster] = []

    def make(num_hosts: int) -> Cluster:
        cluster = Cluster(f"t{os.getpid() % 1000}{next(_names)}"[:6], num_hosts, net=len(made) + 1)
        made.append(cluster)
        cluster.up()
        return cluster

    yield make
    for cluster in made:
        cluster.down()


def wait_for_files(cluster: Cluster, pattern: str, count: int, timeout: float) -> list[Path]:
    """Files matching `pattern` in the hosts' output/data folders, once there are `count` (bounded)."""
    deadline = time.monotonic() + timeout
    while True:
        found = [p for h in cluster.hosts for p in (h.ml / "output" / "data").glob(pattern)]
        if len(found) >= count or time.monotonic() > deadline:
            return found
        time.sleep(0.05)


def feed_every_host(cluster: Cluster, channel: dict, sources: list[Path], epochs: int) -> list:
    """Each host gets Pipe channel `train` (`channel` is its inputdataconfig entry) fed from its own
    source folder by a local feeder playing SageMaker's part; returns the started feeders."""
    from smtrain.data.feeder import Feeder, channel_objects

    feeders = []
    for host, source in zip(cluster.hosts, sources):
        (host.ml / "input" / "config" / "inputdataconfig.json").write_text(json.dumps({"train": channel}))
        data = host.ml / "input" / "data"
        data.mkdir(parents=True, exist_ok=True)
        seed = (channel.get("ShuffleConfig") or {}).get("Seed")  # shuffled per epoch, from FIFO 0 as SageMaker
        feeders.append(Feeder(data, {"train": channel_objects(str(source))}, {"train": seed}, epochs=epochs).start())
    return feeders
