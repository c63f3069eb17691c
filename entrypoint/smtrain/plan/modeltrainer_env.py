"""The environment SDK v3's ModelTrainer drivers give a script (`sagemaker/train/container_drivers/scripts/
environment.py:set_env`, SDK 3.27), computed by its rules for the same inputs, for jobs ModelTrainer started:
the image runs `train` in place of those drivers (docker/modeltrainer-hook.sh), and a script written for a
v3 job reads these. The conformance tests run the SDK's own `set_env` on the same tree as the oracle.

Where sagemaker-training names the same variable (SM_HOSTS, SM_CHANNELS, SM_HPS, SM_HP_<NAME>,
SM_TRAINING_ENV, SM_NUM_CPUS ...), v3's value wins in such a job: its script was written for v3's drivers,
which would have set them so. sagemaker-training's other variables (SM_USER_ARGS, SM_MODULE_DIR ...) stay.
v3's values are kept literally, its constants too: SM_MASTER_ADDR is `algo-1` and SM_MASTER_PORT 7777
whatever the hosts, as the drivers write them; folders are under the job's base folder (/opt/ml in a
container, where they are the drivers' own constants).

Pure: a function of the config and the host's facts.
"""
from __future__ import annotations

import json
from typing import Any, Mapping

from ..config.model import HostFacts, TrainingConfig

__all__ = ["MASTER_ADDR", "MASTER_PORT", "modeltrainer_env_vars"]

MASTER_ADDR = "algo-1"  # the drivers' constants
MASTER_PORT = 7777
DEFAULT_LOG_LEVEL = 20


def _serialize(value: Any) -> str:
    """The drivers' safe_serialize: a string as it is, else JSON as json.dumps writes it."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value)
    except TypeError:
        return str(value)


def _deserialize(value: Any) -> Any:
    """The drivers' safe_deserialize: a JSON string's value, else the string."""
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except json.JSONDecodeError:
        return value


def modeltrainer_env_vars(config: TrainingConfig, facts: HostFacts) -> dict[str, str]:
    """What set_env writes to sm_training.env (and sm_train.sh exports) for this host; empty where ModelTrainer
    did not start the job."""
    trainer = config.model_trainer
    if trainer is None:
        return {}
    paths, rc = config.paths, config.resource_config
    env: dict[str, Any] = {
        "SM_MODEL_DIR": str(paths.model_dir), "SM_INPUT_DIR": str(paths.input_dir),
        "SM_INPUT_DATA_DIR": str(paths.input_data_dir), "SM_INPUT_CONFIG_DIR": str(paths.input_config_dir),
        "SM_OUTPUT_DIR": str(paths.output_dir), "SM_OUTPUT_FAILURE": str(paths.failure_file),
        "SM_OUTPUT_DATA_DIR": str(paths.output_data_dir),
        "SM_LOG_LEVEL": config.environ.get("SM_LOG_LEVEL", DEFAULT_LOG_LEVEL),
        "SM_MASTER_ADDR": MASTER_ADDR, "SM_MASTER_PORT": MASTER_PORT,
    }
    if trainer.source:
        env["SM_SOURCE_DIR"] = str(paths.input_data_dir / "code")
        env["SM_ENTRY_SCRIPT"] = trainer.source.get("entry_script", "")
    if trainer.distributed:
        env["SM_DISTRIBUTED_DRIVER_DIR"] = str(paths.input_data_dir / "sm_drivers" / "distributed_drivers")
        env["SM_DISTRIBUTED_CONFIG"] = dict(trainer.distributed)
    channels = list(config.input_data_config)
    for channel in channels:
        env[f"SM_CHANNEL_{channel.upper()}"] = str(paths.input_data_dir / channel)
    env["SM_CHANNELS"] = channels
    hps = _hyperparameters(config.hyperparameters_as_written)
    for key, value in hps.items():
        env[f"SM_HP_{key.replace('-', '_').upper()}"] = value
    env["SM_HPS"] = hps
    hosts = sorted(rc.get("hosts", config.resources.hosts))
    current = rc.get("current_host", config.resources.current_host)
    env.update({
        "SM_CURRENT_HOST": current, "SM_CURRENT_INSTANCE_TYPE": rc.get("current_instance_type", "local"),
        "SM_HOSTS": hosts, "SM_NETWORK_INTERFACE_NAME": rc.get("network_interface_name", "eth0"),
        "SM_HOST_COUNT": len(hosts), "SM_CURRENT_HOST_RANK": hosts.index(current) if current in hosts else 0,
        "SM_NUM_CPUS": facts.num_cpus, "SM_NUM_GPUS": facts.num_gpus, "SM_NUM_NEURONS": facts.num_neurons,
        "SM_RESOURCE_CONFIG": dict(rc), "SM_INPUT_DATA_CONFIG": dict(config.input_data_config),
    })
    env["SM_TRAINING_ENV"] = _training_env(env, config, channels)
    return {name: _serialize(value) for name, value in env.items()}


def _hyperparameters(written: Mapping[str, Any]) -> dict[str, Any]:
    return {key: _deserialize(value) for key, value in written.items()}


def _training_env(env: Mapping[str, Any], config: TrainingConfig, channels: list[str]) -> dict[str, Any]:
    """SM_TRAINING_ENV in the drivers' own shape."""
    return {
        "channel_input_dirs": {channel: env[f"SM_CHANNEL_{channel.upper()}"] for channel in channels},
        "current_host": env["SM_CURRENT_HOST"], "current_instance_type": env["SM_CURRENT_INSTANCE_TYPE"],
        "hosts": env["SM_HOSTS"], "master_addr": env["SM_MASTER_ADDR"], "master_port": env["SM_MASTER_PORT"],
        "hyperparameters": env["SM_HPS"], "input_data_config": dict(config.input_data_config),
        "input_config_dir": env["SM_INPUT_CONFIG_DIR"], "input_data_dir": env["SM_INPUT_DATA_DIR"],
        "input_dir": env["SM_INPUT_DIR"], "job_name": config.environ.get("TRAINING_JOB_NAME", ""),
        "log_level": env["SM_LOG_LEVEL"], "model_dir": env["SM_MODEL_DIR"],
        "network_interface_name": env["SM_NETWORK_INTERFACE_NAME"], "num_cpus": env["SM_NUM_CPUS"],
        "num_gpus": env["SM_NUM_GPUS"], "num_neurons": env["SM_NUM_NEURONS"],
        "output_data_dir": env["SM_OUTPUT_DATA_DIR"], "resource_config": env["SM_RESOURCE_CONFIG"],
    }
