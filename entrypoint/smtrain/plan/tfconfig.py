"""TF_CONFIG and the processes of a TensorFlow strategy job, as SageMaker's TensorFlow container
(sagemaker-tensorflow-training 20.5.0) builds them (pure; the conformance tests compare).

- MultiWorkerMirroredStrategy: every distribution host runs the program as `worker` i, the cluster's
  workers on port 8890.
- Parameter servers (two or more hosts): the first distribution host runs the program as `master`,
  the others as `worker` i (port 2222), and every host also runs a parameter server `ps` i (port
  2223, CPU only) that the toolkit starts beside the program.

Each process of the job is a `Task` with a number (its rank on the control channel: failure
reports and progress name it).
"""
from __future__ import annotations

import json
from typing import Any, Mapping, NamedTuple, Sequence

from ..config.model import Strategy

__all__ = ["container_env", "MWMS_PORT", "PS_PORT", "PS_PROGRAM_PORT", "Task", "tasks_of", "tf_config", "tf_config_for_mwms",
           "tf_config_for_ps"]

MWMS_PORT = 8890
PS_PROGRAM_PORT = 2222
PS_PORT = 2223


class Task(NamedTuple):
    """One process of a TF strategy job: its rank, host and TF_CONFIG task."""
    rank: int  # unique in the job: program tasks first (host order), then parameter servers
    host: str
    type: str  # TF_CONFIG's task type: master, worker or ps
    index: int

    @property
    def is_ps(self) -> bool:
        return self.type == "ps"

    def describe(self) -> str:
        return f"TF_CONFIG task {self.type} {self.index} on host {self.host}"


def _addresses(hosts: Sequence[str], port: int) -> list[str]:
    return [f"{host}:{port}" for host in hosts]


def tf_config_for_ps(hosts: Sequence[str], current_host: str, ps_task: bool = False) -> dict[str, Any]:
    """The container's `_build_tf_config_for_ps`: key order and all."""
    workers = list(hosts[1:])
    ps = list(hosts) if len(hosts) > 1 else None
    config: dict[str, Any] = {"cluster": {"master": _addresses(hosts[:1], PS_PROGRAM_PORT)}, "environment": "cloud"}
    if ps:
        config["cluster"]["ps"] = _addresses(ps, PS_PORT)
    if workers:
        config["cluster"]["worker"] = _addresses(workers, PS_PROGRAM_PORT)
    if ps_task:
        if ps is None:
            raise ValueError("a ps task needs parameter servers, i.e. two or more hosts")
        task = {"index": ps.index(current_host), "type": "ps"}
    elif current_host == hosts[0]:
        task = {"index": 0, "type": "master"}
    else:
        task = {"index": workers.index(current_host), "type": "worker"}
    config["task"] = task
    return config


def tf_config_for_mwms(hosts: Sequence[str], current_host: str) -> dict[str, Any]:
    """The container's `_build_tf_config_for_mwms`."""
    return {"cluster": {"worker": _addresses(hosts, MWMS_PORT)}, "environment": "cloud",
            "task": {"index": list(hosts).index(current_host), "type": "worker"}}


def tf_config(strategy: Strategy, hosts: Sequence[str], current_host: str, ps_task: bool = False) -> str:
    """TF_CONFIG's value, serialised as the container does (json.dumps' default separators)."""
    if strategy is Strategy.MULTI_WORKER_MIRRORED:
        return json.dumps(tf_config_for_mwms(hosts, current_host))
    return json.dumps(tf_config_for_ps(hosts, current_host, ps_task))


def tasks_of(strategy: Strategy, hosts: Sequence[str]) -> tuple[Task, ...]:
    """Every process of the job: the program on each host, then (parameter servers) one ps per host."""
    if strategy is Strategy.MULTI_WORKER_MIRRORED:
        return tuple(Task(i, host, "worker", i) for i, host in enumerate(hosts))
    programs = [Task(0, hosts[0], "master", 0), *(Task(i, h, "worker", i - 1) for i, h in enumerate(hosts) if i)]
    return (*programs, *(Task(len(hosts) + i, host, "ps", i) for i, host in enumerate(hosts)))


def container_env(region: str, environ: Mapping[str, str]) -> dict[str, str]:
    """What the TensorFlow container's start-up (s3_utils.configure) adds to every program's
    environment. S3_REGION is the job's region (the container asks S3 for the model_dir bucket's
    region, which needs a network call at start-up), and a TF_CPP_MIN_LOG_LEVEL the user set wins
    (the container overwrote it with 1)."""
    env = {"S3_REGION": region, "S3_USE_HTTPS": "1"}
    if "TF_CPP_MIN_LOG_LEVEL" not in environ:
        env["TF_CPP_MIN_LOG_LEVEL"] = "1"
    return env
