"""Cluster tests need root (namespaces) and run real sshd, mpirun and train on simulated hosts."""
from __future__ import annotations

import itertools
import os
from typing import Iterator

import pytest

from tests.harness.cluster import Cluster

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
