"""Which policy carries out a starter's spec: the one table of them, by the spec's `name`. A new way of
starting ranks is its spec (given by its kind's planner), its policy's module, and one row here: a function
that imports the policy's class where a job uses it (a process loads only the starter its job needs)."""
from __future__ import annotations

from typing import Any, Callable

from .policy import StarterPolicy

__all__ = ["POLICIES", "policy_for"]


def _every_host() -> type[StarterPolicy]:
    from .every_host import EveryHost

    return EveryHost


def _mpirun() -> type[StarterPolicy]:
    from .mpirun.starter import Mpirun

    return Mpirun


# spec name -> the policy's class, imported when asked for
POLICIES: dict[str, Callable[[], type[StarterPolicy]]] = {"every-host": _every_host, "mpirun": _mpirun}


def policy_for(spec: Any) -> StarterPolicy:
    """The policy for the plan's starter `spec`, made once per `train`."""
    if spec.name not in POLICIES:
        raise TypeError(f"no rank starter carries out {spec.name!r} (known: {', '.join(POLICIES)})")
    return POLICIES[spec.name]()(spec)  # type: ignore[call-arg]
