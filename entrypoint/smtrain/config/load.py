"""Read every input of a training job once into one validated, immutable `TrainingConfig`.

Inputs (docs/reference.md, "What the program gets"): the JSON files under `<base>/input/config/` and a
few environment variables. Nothing here starts a process or changes a file; errors name the file,
the field and what was expected.
"""
from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any, Mapping, Optional, Sequence

from ..errors import ConfigError
from . import hyperparameters as hps
from .channels import channels
from .entry_point import check_entry_point
from .json_fields import expect_object, field, read_json
from .defaults import DEFAULT_BASE_DIR
from .modeltrainer import read_model_trainer
from .profiling import profiler_context
from .settings import (CHECKPOINT_DIR, CURRENT_HOST, DISTRIBUTION_GROUPS, HOSTS, MPI_NUM_PROCESSES, MPI_OPTIONS,
                       MPI_PROCESSES_PER_HOST, NETWORK_INTERFACE, SETTINGS, Setting, load_settings)
from .model import InstanceGroup, MpiSettings, Paths, ProgramSpec, Resources, TrainingConfig

__all__ = ["load_config"]


def _host_list(value: Any, where: str) -> tuple[str, ...]:
    if not isinstance(value, list) or not value:
        raise ConfigError(f"{where}: expected a non-empty list of host names, got {json.dumps(value)[:80]}")
    for host in value:
        if not isinstance(host, str) or not host.strip():
            raise ConfigError(f"{where}: every host name must be a non-empty string, got {json.dumps(host)}")
    duplicates = sorted({h for h in value if value.count(h) > 1})
    if duplicates:
        raise ConfigError(f"{where}: duplicated host names {duplicates}; each host must appear once")
    return tuple(value)


def _default_resource_config() -> dict:
    import socket  # only for a local run without resourceconfig.json

    host = socket.gethostname()
    return {"current_host": host, "hosts": [host]}


def _resources(raw: dict, path: Path, environ: Mapping[str, str]) -> Resources:
    where = str(path)
    current = environ.get(CURRENT_HOST.variable) or field(raw, "current_host", str, where)
    if HOSTS.variable in environ:
        hosts = _host_list(_parse_env_json(environ, HOSTS.variable), f"environment variable {HOSTS.variable}")
    else:
        hosts = _host_list(raw.get("hosts"), f"{where}: field 'hosts'")
    if not current.strip():
        raise ConfigError(f"{where}: field 'current_host' must be a non-empty host name")
    if current not in hosts:
        raise ConfigError(f"{where}: current_host {current!r} is not in hosts {list(hosts)}")
    groups = []
    for i, group in enumerate(field(raw, "instance_groups", list, where, required=False) or []):
        gwhere = f"{where}: instance_groups[{i}]"
        group = expect_object(group, gwhere)
        groups.append(
            InstanceGroup(
                name=field(group, "instance_group_name", str, gwhere),
                instance_type=field(group, "instance_type", str, gwhere, required=False),
                hosts=_host_list(group.get("hosts"), f"{gwhere}: field 'hosts'"),
            )
        )
    interface = environ.get(NETWORK_INTERFACE.variable) or field(
        raw, "network_interface_name", str, where, required=False
    )
    return Resources(
        current_host=current,
        hosts=hosts,
        network_interface_name=interface,
        current_instance_type=field(raw, "current_instance_type", str, where, required=False) or "local",
        current_group_name=field(raw, "current_group_name", str, where, required=False) or "homogeneousCluster",
        instance_groups=tuple(groups),
    )


def _parse_env_json(environ: Mapping[str, str], name: str) -> Any:
    try:
        return json.loads(environ[name])
    except json.JSONDecodeError as e:
        raise ConfigError(f"environment variable {name}: malformed JSON: {e.msg}") from None



def _positive_int(decoded: Mapping[str, Any], name: str, where: str) -> Optional[int]:
    value = decoded.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{where}: hyperparameter '{name}' must be a positive integer, got {json.dumps(value)}")
    return value


def _mpi(decoded: Mapping[str, Any], where: str) -> MpiSettings:
    name = MPI_OPTIONS.hyperparameter
    options = decoded.get(name) or ""
    if not isinstance(options, str):
        raise ConfigError(f"{where}: hyperparameter '{name}' must be a string")
    try:
        split = tuple(shlex.split(options))
    except ValueError as e:
        raise ConfigError(f"{where}: hyperparameter '{name}' {options!r}: {e}") from None
    return MpiSettings(
        processes_per_host=_positive_int(decoded, MPI_PROCESSES_PER_HOST.hyperparameter, where),
        num_processes=_positive_int(decoded, MPI_NUM_PROCESSES.hyperparameter, where),
        custom_options=split,
    )


def _check_distribution_groups(decoded: Mapping[str, Any], resources: Resources, where: str) -> None:
    """`sagemaker_distribution_instance_groups`: a list of the job's instance group names."""
    name = DISTRIBUTION_GROUPS.hyperparameter
    if name not in decoded:
        return
    groups = decoded[name]
    if not isinstance(groups, list) or not all(isinstance(g, str) for g in groups):
        raise ConfigError(f"{where}: hyperparameter '{name}': expected a JSON list of instance group names, got {groups!r}")
    known = [g.name for g in resources.instance_groups]
    unknown = [g for g in groups if g not in known]
    if known and unknown:
        raise ConfigError(f"{where}: hyperparameter '{name}' names instance group(s) {', '.join(unknown)}, which "
                          f"resourceconfig.json does not have (it has {', '.join(known)})")


def _program(decoded: Mapping[str, Any], environ: Mapping[str, str], paths: Paths) -> Optional[ProgramSpec]:
    given_by = "environment variable SAGEMAKER_PROGRAM" if environ.get("SAGEMAKER_PROGRAM") else "hyperparameter sagemaker_program"
    entry = environ.get("SAGEMAKER_PROGRAM") or decoded.get("sagemaker_program")
    if entry is None:
        return None
    check_entry_point(str(entry), given_by)
    submit = decoded.get("sagemaker_submit_directory") or environ.get("SAGEMAKER_SUBMIT_DIRECTORY") or str(paths.code_dir)
    submit = str(submit)
    if submit.startswith("s3://"):
        local = None
    elif submit.startswith("file://"):
        local = Path(submit[len("file://"):])
    else:
        local = Path(submit)
    return ProgramSpec(entry_point=str(entry), submit_dir=submit, local_dir=local)


def _optional_path(raw: dict, name: str, where: str) -> Optional[Path]:
    value = field(raw, name, str, where, required=False)
    if value is not None and not value.startswith("/"):
        raise ConfigError(f"{where}: field '{name}' must be an absolute path, got {value!r}")
    return Path(value) if value else None


def load_config(environ: Mapping[str, str], table: Sequence[Setting[Any]] = SETTINGS) -> TrainingConfig:
    """Read the config files under SAGEMAKER_BASE_DIR (default /opt/ml) and the environment; the settings are
    `table`'s (config.settings)."""
    paths = Paths(Path(environ.get("SAGEMAKER_BASE_DIR") or DEFAULT_BASE_DIR))
    rc_path = paths.config_file("resourceconfig.json")
    hp_path = paths.config_file("hyperparameters.json")
    idc_path = paths.config_file("inputdataconfig.json")
    resource_config = expect_object(read_json(rc_path, _default_resource_config), str(rc_path))
    raw_hps = expect_object(read_json(hp_path, dict), str(hp_path))
    input_data_config = expect_object(read_json(idc_path, dict), str(idc_path))
    checkpoint_config = expect_object(read_json(paths.config_file("checkpointconfig.json"), dict), "checkpointconfig.json")
    tensorboard_path = paths.config_file("tensorboardoutputconfig.json")
    tensorboard_config = expect_object(read_json(tensorboard_path, dict), str(tensorboard_path))
    profiler_path = paths.config_file("profilerconfig.json")
    profiler_config = expect_object(read_json(profiler_path, dict), str(profiler_path))

    decoded = hps.with_tuning_model_dir(hps.decode(raw_hps), environ.get("TRAINING_JOB_NAME"))
    resources = _resources(resource_config, rc_path, environ)
    _check_distribution_groups(decoded, resources, str(hp_path))
    program, mpi = _program(decoded, environ, paths), _mpi(decoded, str(hp_path))
    trainer_mpi, trainer = None, read_model_trainer(paths.input_data_dir, paths.code_dir)
    if program is None and trainer is not None and trainer.program is not None:
        program, trainer_mpi = trainer.program, trainer.mpi  # SDK v3's ModelTrainer: SourceCode, distributed=MPI(...)
    checkpoint_dir = (
        field(checkpoint_config, "LocalPath", str, str(paths.config_file("checkpointconfig.json")), required=False)
        or environ.get(CHECKPOINT_DIR.variable)
        or str(paths.base / "checkpoints")
    )
    return TrainingConfig(
        paths=paths,
        resources=resources,
        channels=channels(input_data_config, idc_path, decoded, str(hp_path)),
        hyperparameters=decoded,
        hyperparameters_as_written=raw_hps,
        resource_config=resource_config,
        input_data_config=input_data_config,
        program=program,
        mpi=mpi,
        model_trainer_mpi=trainer_mpi,
        model_trainer=trainer,
        checkpoint_dir=Path(checkpoint_dir),
        tensorboard_dir=_optional_path(tensorboard_config, "LocalPath", str(tensorboard_path)),
        settings=load_settings(decoded, environ, profiler_context(profiler_config, str(profiler_path),
                                                                  len(resources.hosts)), str(hp_path), table),
        environ=dict(environ),
    )
