"""What TensorFlow strategy jobs share, as SageMaker's TensorFlow container (sagemaker-tensorflow-training
20.5.0) builds it (pure; the conformance tests compare): TF_CONFIG's addresses, and what the container
adds to every program's environment. Each strategy's TF_CONFIG is its kind's (plan.kinds).

Each process of the job is a `Task` with a number (its rank on the control channel: failure
reports and progress name it).
"""
from __future__ import annotations

from typing import Mapping, NamedTuple, Sequence

__all__ = ["Task", "addresses", "container_env"]


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


def container_env(region: str, environ: Mapping[str, str]) -> dict[str, str]:
    """What the TensorFlow container's start-up (s3_utils.configure) adds to every program's
    environment. S3_REGION is the job's region (the container asks S3 for the model_dir bucket's
    region, which needs a network call at start-up), and a TF_CPP_MIN_LOG_LEVEL the user set wins
    (the container overwrote it with 1)."""
    env = {"S3_REGION": region, "S3_USE_HTTPS": "1"}
    if "TF_CPP_MIN_LOG_LEVEL" not in environ:
        env["TF_CPP_MIN_LOG_LEVEL"] = "1"
    return env
