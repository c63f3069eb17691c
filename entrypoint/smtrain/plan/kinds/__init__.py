"""One planner per distribution kind, registered in one table (`PLANNERS`): each decides how this host
takes part (plan.coordination) and `run` carries it out without knowing the kind.

A new kind: its `Distribution` and the rule that picks it (plan/shape.py), its planner module here,
and its row below."""
from __future__ import annotations

from typing import Callable

from ..coordination import KindInputs, KindPlan
from ..shape import Distribution
from .mpi import plan_mpi
from .multi_worker_mirrored import plan_multi_worker_mirrored
from .parameter_server import plan_parameter_server
from .standalone import plan_standalone

__all__ = ["PLANNERS"]

PLANNERS: dict[Distribution, Callable[[KindInputs], KindPlan]] = {
    Distribution.SINGLE: plan_standalone,
    Distribution.MPI: plan_mpi,
    Distribution.MULTI_WORKER_MIRRORED: plan_multi_worker_mirrored,
    Distribution.PARAMETER_SERVER: plan_parameter_server,
}
