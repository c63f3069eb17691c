"""TensorFlow parameter servers on two or more hosts (`sagemaker_parameter_server_enabled`), as
SageMaker's TensorFlow container (sagemaker-tensorflow-training 20.5.0) runs them: the first distribution host runs the program as
TF_CONFIG's `master`, the others as `worker` i (port 2222), and every host also runs a parameter
server `ps` i (port 2223, CPU only: smtrain.run.tfserver) beside its program. The job ends when the
master's program (the coordinator) ends; the workers' programs still running and every parameter
server are then stopped."""
from __future__ import annotations

import json
from typing import Any, Sequence

from ...wire.programs import RANK_LAUNCHER, TF_SERVER
from ...config.model import TrainingConfig
from ...config.settings import PARAMETER_SERVER
from ..coordination import JobEnd
from ..coordination import Companion
from ..kind import HostPart, Kind, KindInputs
from ..tfconfig import Task, addresses
from .tf_cluster import plan_tf_cluster, spans_two_hosts

__all__ = ["PARAMETER_SERVER", "PS_PORT", "PS_PROGRAM_PORT", "ParameterServer", "tf_config_for_ps"]

PS_PROGRAM_PORT = 2222
PS_PORT = 2223


def tf_config_for_ps(hosts: Sequence[str], current_host: str, ps_task: bool = False) -> dict[str, Any]:
    """The container's `_build_tf_config_for_ps`: key order and all."""
    workers = list(hosts[1:])
    ps = list(hosts) if len(hosts) > 1 else None
    config: dict[str, Any] = {"cluster": {"master": addresses(hosts[:1], PS_PROGRAM_PORT)}, "environment": "cloud"}
    if ps:
        config["cluster"]["ps"] = addresses(ps, PS_PORT)
    if workers:
        config["cluster"]["worker"] = addresses(workers, PS_PROGRAM_PORT)
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


class ParameterServer(Kind):
    """Tasks numbered programs first (host order), then the parameter servers."""

    name = "parameter-server"
    flag = PARAMETER_SERVER.hyperparameter
    offer = f"TensorFlow's parameter servers ({flag})"

    def runs_on(self, config: TrainingConfig, groups: tuple[str, ...], hosts: tuple[str, ...]) -> bool:
        return spans_two_hosts(config, hosts)

    def plan(self, given: KindInputs) -> HostPart:
        hosts, python, here = given.shape.hosts, given.python, given.config.resources.current_host
        programs = (Task(0, hosts[0], "master", 0), *(Task(i, h, "worker", i - 1) for i, h in enumerate(hosts) if i))
        servers = [Task(len(hosts) + i, host, "ps", i) for i, host in enumerate(hosts)]
        companions = tuple(
            Companion("parameter server", t.host,
                      RANK_LAUNCHER.argv(python, "--", *TF_SERVER.argv(python)),
                      {"TF_CONFIG": json.dumps(tf_config_for_ps(hosts, t.host, ps_task=True))}, t.rank, t.describe())
            for t in servers)
        return plan_tf_cluster(given, programs, companions, {"TF_CONFIG": json.dumps(tf_config_for_ps(hosts, here))},
                               JobEnd.MASTER_PROGRAM)


PARAMETER_SERVER = ParameterServer()
