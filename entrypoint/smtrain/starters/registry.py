"""Which policy carries out a starter's spec: the one table of them, by the spec's `name`. A new way of
starting ranks is its spec (given by its kind's planner), its policy's module, and one row here."""
from __future__ import annotations

import importlib
from typing import Any

from .policy import StarterPolicy

__all__ = ["POLICIES", "policy_for"]

# spec name -> the policy's module and class; imported only where a job uses it
POLICIES: dict[str, tuple[str, str]] = {
    "every-host": ("smtrain.starters.every_host", "EveryHost"),
    "mpirun": ("smtrain.starters.mpirun.starter", "Mpirun"),
}


def policy_for(spec: Any) -> StarterPolicy:
    """The policy for the plan's starter `spec`, made once per `train`."""
    if spec.name not in POLICIES:
        raise TypeError(f"no rank starter carries out {spec.name!r} (known: {', '.join(POLICIES)})")
    module, name = POLICIES[spec.name]
    return getattr(importlib.import_module(module), name)(spec)
