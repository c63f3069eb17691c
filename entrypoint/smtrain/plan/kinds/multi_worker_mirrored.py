"""MultiWorkerMirroredStrategy on two or more hosts (`sagemaker_multi_worker_mirrored_strategy_enabled`):
every host runs its program as TF_CONFIG's `worker` i, the cluster's workers on port 8890; TF_CONFIG
is set on every distribution host, one host too, as SageMaker's TensorFlow container
(sagemaker-tensorflow-training 20.5.0) does. The job ends when every host's program has ended."""
from __future__ import annotations

import json
from typing import Any, Sequence

from ...config.model import TrainingConfig
from ...config.settings import MULTI_WORKER_MIRRORED
from ..coordination import JobEnd
from ..kind import HostPart, Kind, KindInputs
from ..tfconfig import Task, addresses
from .tf_cluster import plan_tf_cluster, spans_two_hosts

__all__ = ["MULTI_WORKER_MIRRORED", "MWMS_PORT", "MultiWorkerMirrored", "tf_config_for_mwms"]

MWMS_PORT = 8890


def tf_config_for_mwms(hosts: Sequence[str], current_host: str) -> dict[str, Any]:
    """The container's `_build_tf_config_for_mwms`."""
    return {"cluster": {"worker": addresses(hosts, MWMS_PORT)}, "environment": "cloud",
            "task": {"index": list(hosts).index(current_host), "type": "worker"}}


class MultiWorkerMirrored(Kind):
    """Worker i on the distribution's host i."""

    name = "multi-worker-mirrored"
    flag = MULTI_WORKER_MIRRORED.hyperparameter
    offer = f"TensorFlow's MultiWorkerMirroredStrategy ({flag})"

    def runs_on(self, config: TrainingConfig, groups: tuple[str, ...], hosts: tuple[str, ...]) -> bool:
        return spans_two_hosts(config, hosts)

    def environment(self, config: TrainingConfig, hosts: tuple[str, ...]) -> dict[str, str]:
        """TF_CONFIG on every distribution host (json.dumps' default separators, as the container)."""
        here = config.resources.current_host
        return {"TF_CONFIG": json.dumps(tf_config_for_mwms(hosts, here))} if here in hosts else {}

    def plan(self, given: KindInputs) -> HostPart:
        programs = tuple(Task(i, host, "worker", i) for i, host in enumerate(given.shape.hosts))
        return plan_tf_cluster(given, programs, (), {}, JobEnd.EVERY_PROGRAM)


MULTI_WORKER_MIRRORED = MultiWorkerMirrored()
