"""MultiWorkerMirroredStrategy on two or more hosts: every host runs its program as TF_CONFIG's
`worker` i (TF_CONFIG itself is every distribution host's: plan.tfconfig); the job ends when every
host's program has ended."""
from __future__ import annotations

from ..coordination import JobEnd, KindInputs, KindPlan
from ..tfconfig import Task
from .tf_cluster import plan_tf_cluster

__all__ = ["plan_multi_worker_mirrored"]


def plan_multi_worker_mirrored(given: KindInputs) -> KindPlan:
    """Worker i on the distribution's host i."""
    programs = tuple(Task(i, host, "worker", i) for i, host in enumerate(given.shape.hosts))
    return plan_tf_cluster(given, programs, (), {}, JobEnd.EVERY_PROGRAM)
