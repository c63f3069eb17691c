"""Which distribution a job asks for and which hosts take part, by sagemaker-training's rules."""
from __future__ import annotations

from typing import Any, Mapping, Optional, Sequence

from .model import Strategy

__all__ = ["DISTRIBUTION_FLAGS", "distribution_groups", "distribution_hosts", "truthy"]

# sagemaker-training puts the current instance group in the distribution when one of these is on.
DISTRIBUTION_FLAGS = (
    "sagemaker_mpi_enabled",
    "sagemaker_parameter_server_enabled",
    "sagemaker_distributed_dataparallel_enabled",
    "sagemaker_pytorch_ddp_enabled",
    "sagemaker_pytorch_xla_multi_worker_enabled",
    "sagemaker_multi_worker_mirrored_strategy_enabled",
    "sagemaker_torch_distributed_enabled",
)


def truthy(value: Any) -> bool:
    """A flag as the SDK writes it: JSON true/false, or the strings 'true'/'false' in any case."""
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1", "yes")
    return bool(value)


def distribution_groups(framework: Mapping[str, Any], current_group: str) -> list[Any]:
    """`sagemaker_distribution_instance_groups`, else the current group when a distribution is on."""
    if "sagemaker_distribution_instance_groups" in framework:
        return framework["sagemaker_distribution_instance_groups"]
    return [current_group] if any(framework.get(flag, False) for flag in DISTRIBUTION_FLAGS) else []


def distribution_hosts(groups_raw: Sequence[Mapping[str, Any]], groups: Sequence[Any],
                       hosts: Sequence[str]) -> list[str]:
    """The hosts of the distribution's instance groups; every host when the job has no groups."""
    if groups_raw:
        return [h for g in groups_raw if g["instance_group_name"] in groups for h in g["hosts"]]
    return list(hosts)


def strategy_of(decoded: Mapping[str, Any]) -> Optional[Strategy]:
    """The TensorFlow strategy the hyperparameters turn on, if any."""
    for strategy in Strategy:
        if truthy(decoded.get(strategy.hyperparameter, False)):
            return strategy
    return None
