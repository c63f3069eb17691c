"""TF_CONFIG and the processes of a TensorFlow strategy job, as SageMaker's TensorFlow container
(sagemaker-tensorflow-training 20.5.0) builds them (pure; the conformance tests compare).

MultiWorkerMirroredStrategy: every distribution host (one host too) runs the program as `worker` i,
the cluster's workers on port 8890. Other strategies' TF_CONFIG is their planner's (plan.kinds).

Each process of the job is a `Task` with a number (its rank on the control channel: failure
reports and progress name it).
"""
from __future__ import annotations

import json
from typing import Any, Mapping, NamedTuple, Sequence

from ..config.model import Strategy, TrainingConfig
from .shape import JobShape

__all__ = ["MWMS_PORT", "Task", "addresses", "container_env", "tf_config_env", "tf_config_for_mwms"]

MWMS_PORT = 8890


class Task(NamedTuple):
    """One process of a TF strategy job: its rank, host and TF_CONFIG task."""
    rank: int  # unique in the job
    host: str
    type: str  # TF_CONFIG's task type
    index: int

    def describe(self) -> str:
        return f"TF_CONFIG task {self.type} {self.index} on host {self.host}"


def addresses(hosts: Sequence[str], port: int) -> list[str]:
    """TF_CONFIG's `host:port` for each host."""
    return [f"{host}:{port}" for host in hosts]


def tf_config_for_mwms(hosts: Sequence[str], current_host: str) -> dict[str, Any]:
    """The container's `_build_tf_config_for_mwms`."""
    return {"cluster": {"worker": addresses(hosts, MWMS_PORT)}, "environment": "cloud",
            "task": {"index": list(hosts).index(current_host), "type": "worker"}}


def tf_config_env(config: TrainingConfig, shape: JobShape) -> dict[str, str]:
    """TF_CONFIG where the container sets it for MultiWorkerMirroredStrategy: on every distribution
    host, one host too (serialised with json.dumps' default separators, as the container does)."""
    here = config.resources.current_host
    if config.strategy is Strategy.MULTI_WORKER_MIRRORED and here in shape.hosts:
        return {"TF_CONFIG": json.dumps(tf_config_for_mwms(shape.hosts, here))}
    return {}


def container_env(region: str, environ: Mapping[str, str]) -> dict[str, str]:
    """What the TensorFlow container's start-up (s3_utils.configure) adds to every program's
    environment. S3_REGION is the job's region (the container asks S3 for the model_dir bucket's
    region, which needs a network call at start-up), and a TF_CPP_MIN_LOG_LEVEL the user set wins
    (the container overwrote it with 1)."""
    env = {"S3_REGION": region, "S3_USE_HTTPS": "1"}
    if "TF_CPP_MIN_LOG_LEVEL" not in environ:
        env["TF_CPP_MIN_LOG_LEVEL"] = "1"
    return env
