"""Which policy carries out a starter's spec: the one table of them, by the spec's `name`. A new way of
starting ranks is its spec (given by its kind's planner), its policy's module (a master's side and a worker's:
smtrain.starters.policy), and one row here: a function that imports the two where a job uses them (a process
loads only the starter its job needs)."""
from __future__ import annotations

from typing import Any, Callable

from .policy import MasterSide, WorkerSide

__all__ = ["POLICIES", "master_policy", "worker_policy"]

Sides = tuple[type[MasterSide], type[WorkerSide]]


def _every_host() -> Sides:
    from .every_host import EveryHostMaster, EveryHostWorker

    return EveryHostMaster, EveryHostWorker


def _mpirun() -> Sides:
    from .mpirun.starter import MpirunMaster, MpirunWorker

    return MpirunMaster, MpirunWorker


# spec name -> the policy's two sides, imported when asked for
POLICIES: dict[str, Callable[[], Sides]] = {"every-host": _every_host, "mpirun": _mpirun}


def _sides(spec: Any) -> Sides:
    if spec.name not in POLICIES:
        raise TypeError(f"no rank starter carries out {spec.name!r} (known: {', '.join(POLICIES)})")
    return POLICIES[spec.name]()


def master_policy(spec: Any) -> MasterSide:
    """The master's side of the policy for the plan's starter `spec`, made once per `train`."""
    return _sides(spec)[0](spec)  # type: ignore[call-arg]


def worker_policy(spec: Any) -> WorkerSide:
    """A worker's side of the policy for the plan's starter `spec`, made once per `train`."""
    return _sides(spec)[1](spec)  # type: ignore[call-arg]
