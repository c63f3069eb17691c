"""What both roles of a TensorFlow strategy job do on their own host: start the parameter server
and the program under the rank launcher, with this job's contract (so that their failures, progress
and stack dumps go to the master's control server, as an MPI rank's do)."""
from __future__ import annotations

import signal
from typing import Mapping

from ..common.console import log
from ..plan.launch import LaunchPlan
from ..proc.helpers import HelperGroup
from ..proc.supervise import parent_death_signal
from ..wire.contract import RANK_CONTRACT_ENV

__all__ = ["program_env", "start_ps"]


def _with_contract(plan: LaunchPlan, env: dict[str, str], token: str, rank: int) -> dict[str, str]:
    assert plan.strategy is not None
    env[RANK_CONTRACT_ENV] = plan.strategy.contract._replace(token=token, rank=rank).to_json()
    return env


def program_env(plan: LaunchPlan, inherited: Mapping[str, str], token: str) -> dict[str, str]:
    """The environment of this host's program launcher."""
    assert plan.strategy is not None
    return _with_contract(plan, plan.child_env(inherited), token, plan.strategy.program_task.rank)


def start_ps(plan: LaunchPlan, helpers: HelperGroup, inherited: Mapping[str, str], token: str) -> None:
    """This host's parameter server (parameter-server jobs), as a helper: it runs until the job ends."""
    strategy = plan.strategy
    assert strategy is not None
    if not strategy.ps_argv:
        return
    ps = next(t for t in strategy.tasks if t.is_ps and t.host == plan.host)
    env = {**plan.child_env(inherited), "TF_CONFIG": strategy.ps_tf_config}
    log(f"starting the parameter server ({ps.describe()})")
    helpers.start("parameter server", strategy.ps_argv, preexec_fn=parent_death_signal(signal.SIGTERM),
                  env=_with_contract(plan, env, token, ps.rank))
