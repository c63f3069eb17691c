"""What the cluster tests share besides the cluster itself: the programs they run, `train`, files awaited on
the hosts, Pipe channels fed on every host."""
from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from tests.harness.cluster import Cluster

PROGRAMS = Path(__file__).resolve().parent.parent / "programs"
TRAIN = [str(Path(sys.executable).parent / "train")]


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
