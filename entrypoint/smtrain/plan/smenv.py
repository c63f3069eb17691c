"""The `SM_*` environment a program gets, computed exactly as sagemaker-training 5.1.4's
`Environment.to_env_vars()` would for the same inputs (the conformance tests use it as the oracle).

Pure: a function of the config, the host facts and the job's shape (plan.shape: the distribution's
groups, hosts and master, decided there once).
"""
from __future__ import annotations

import json
from typing import Any, Optional

from ..config.model import HostFacts, TrainingConfig
from ..config.hyperparameters import to_cmd_args
from .shape import JobShape

__all__ = ["DEFAULT_LOG_LEVEL", "format_value", "process_env_vars", "sm_env_vars", "training_env"]

DEFAULT_LOG_LEVEL = 20  # logging.INFO, without importing logging


def format_value(value: Any) -> str:
    """As sagemaker-training's mapping.to_env_vars: strings as they are, None empty, else compact JSON."""
    if isinstance(value, bytes):
        return value.decode("latin1")
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def _strip_py(name: Optional[str]) -> Optional[str]:
    return name[:-3] if name and name.endswith(".py") else name


def training_env(config: TrainingConfig, facts: HostFacts, shape: JobShape) -> dict[str, Any]:
    """The fields of sagemaker-training's Environment (its SM_TRAINING_ENV), by the same rules."""
    rc = config.resource_config
    env = config.environ
    decoded = config.hyperparameters
    framework = config.framework_parameters
    paths = config.paths
    current_group = rc.get("current_group_name", "homogeneousCluster")
    groups_raw = rc.get("instance_groups", []) or []
    groups, hosts, master = list(shape.groups), list(shape.hosts), shape.master
    program_env = env.get("SAGEMAKER_PROGRAM")
    trainer = config.program if program_env is None and "sagemaker_program" not in decoded else None
    if trainer is not None and not trainer.shell_command:  # SDK v3's ModelTrainer named the program
        program_env = trainer.entry_point
    mp_parameters = env.get("SM_HP_MP_PARAMETERS")
    return {
        "additional_framework_parameters": framework,
        "channel_input_dirs": {c: str(paths.input_data_dir / c) for c in config.input_data_config},
        "current_host": config.resources.current_host,
        "current_instance_group": current_group,
        "current_instance_group_hosts": next(
            (g["hosts"] for g in groups_raw if g["instance_group_name"] == current_group), []
        ),
        "current_instance_type": rc.get("current_instance_type", "local"),
        "distribution_hosts": hosts,
        "distribution_instance_groups": groups,
        "framework_module": env.get("SAGEMAKER_TRAINING_MODULE"),
        "hosts": list(config.resources.hosts),
        "hyperparameters": config.user_hyperparameters,
        "input_config_dir": str(paths.input_config_dir),
        "input_data_config": config.input_data_config,
        "input_dir": str(paths.input_dir),
        "instance_groups": [g["instance_group_name"] for g in groups_raw],
        "instance_groups_dict": {g["instance_group_name"]: g for g in groups_raw},
        "is_hetero": len(groups_raw) > 1,
        "is_master": config.resources.current_host == master,
        "is_modelparallel_enabled": mp_parameters and mp_parameters != "{}",
        "is_smddpmprun_installed": facts.smddpmprun_installed,
        "is_smddprun_installed": facts.smddprun_installed,
        "job_name": env.get("TRAINING_JOB_NAME"),
        "log_level": decoded.get("sagemaker_container_log_level", DEFAULT_LOG_LEVEL),
        "master_hostname": master,
        "model_dir": str(paths.model_dir),
        "module_dir": str(decoded.get("sagemaker_submit_directory", trainer.submit_dir if trainer else str(paths.code_dir))),
        "module_name": _strip_py(program_env if program_env is not None else str(decoded.get("sagemaker_program"))),
        "network_interface_name": config.resources.network_interface_name or "eth0",  # SM_NETWORK_INTERFACE_NAME wins
        "num_cpus": facts.num_cpus,
        "num_gpus": facts.num_gpus,
        "num_neurons": facts.num_neurons,
        "output_data_dir": str(paths.output_data_dir),
        "output_dir": str(paths.output_dir),
        "output_intermediate_dir": str(paths.output_intermediate_dir),
        "resource_config": rc,
        # hosts and their capacity units on GB200 UltraServer clusters (sagemaker-training 5.1), else []
        "topology": rc.get("topology", []),
        "user_entry_point": program_env or decoded.get("sagemaker_program"),
    }


def sm_env_vars(config: TrainingConfig, facts: HostFacts, shape: JobShape) -> dict[str, str]:
    """SM_* variables, name for name and value for value as Environment.to_env_vars()."""
    te = training_env(config, facts, shape)
    fields: dict[str, Any] = {
        "hosts": te["hosts"],
        "network_interface_name": te["network_interface_name"],
        "hps": te["hyperparameters"],
        "user_entry_point": te["user_entry_point"],
        "framework_params": te["additional_framework_parameters"],
        "resource_config": te["resource_config"],
        "input_data_config": te["input_data_config"],
        "output_data_dir": te["output_data_dir"],
        "channels": sorted(te["channel_input_dirs"]),
        "current_host": te["current_host"],
        "current_instance_type": te["current_instance_type"],
        "current_instance_group": te["current_instance_group"],
        "current_instance_group_hosts": te["current_instance_group_hosts"],
        "instance_groups": te["instance_groups"],
        "instance_groups_dict": te["instance_groups_dict"],
        "distribution_instance_groups": te["distribution_instance_groups"],
        "is_hetero": te["is_hetero"],
        "module_name": te["module_name"],
        "log_level": te["log_level"],
        "framework_module": te["framework_module"],
        "input_dir": te["input_dir"],
        "input_config_dir": te["input_config_dir"],
        "output_dir": te["output_dir"],
        "num_cpus": te["num_cpus"],
        "num_gpus": te["num_gpus"],
        "num_neurons": te["num_neurons"],
        "model_dir": te["model_dir"],
        "module_dir": te["module_dir"],
        "training_env": te,
        "user_args": to_cmd_args(te["hyperparameters"]),
        "output_intermediate_dir": te["output_intermediate_dir"],
    }
    if te["topology"]:  # SM_TOPOLOGY only where resourceconfig.json has one
        fields["topology"] = te["topology"]
    for name, path in te["channel_input_dirs"].items():
        fields[f"channel_{name}"] = path
    for key, value in te["hyperparameters"].items():
        fields[f"hp_{key}"] = value
    return {f"SM_{str(k).upper()}": format_value(v) for k, v in fields.items()}


def process_env_vars(config: TrainingConfig) -> dict[str, str]:
    """The other variables sagemaker-training sets in its own environment before starting the program."""
    decoded = config.hyperparameters
    region = decoded.get("sagemaker_region") or config.environ.get("AWS_DEFAULT_REGION") or ""
    return {
        "SAGEMAKER_JOB_NAME": format_value(decoded.get("sagemaker_job_name", "")),
        "CURRENT_HOST": config.resources.current_host,
        "SAGEMAKER_REGION": format_value(region),
    }
