"""One policy per distribution kind (run.policy): the table the roles look theirs up in."""
from __future__ import annotations

from ...plan.launch import Distribution
from ..policy import Policy
from .mpi import MpiPolicy
from .strategy import StrategyPolicy

__all__ = ["POLICIES", "policy_for"]

POLICIES: dict[Distribution, Policy] = {
    Distribution.MPI: MpiPolicy(),
    Distribution.MULTI_WORKER_MIRRORED: StrategyPolicy(waits_for_every_worker=True),
    Distribution.PARAMETER_SERVER: StrategyPolicy(waits_for_every_worker=False),
}


def policy_for(distribution: Distribution) -> Policy:
    """The policy of a kind that runs on several hosts (a single host has none: run.single)."""
    return POLICIES[distribution]
