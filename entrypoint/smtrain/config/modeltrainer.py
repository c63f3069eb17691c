"""What SDK v3's ModelTrainer hands the container when it is given `source_code`, read into the
same program and MPI settings that the v2 SDK's hyperparameters give.

ModelTrainer (sagemaker-train) writes no `sagemaker_program` hyperparameter. It uploads the user's
`source_dir` as the channel `code` and its own driver files as the channel `sm_drivers`, among them
`sourcecode.json` (SourceCode: entry_script or command, args) and `distributed.json` (MPI:
process_count_per_node, mpi_additional_options; {} without `distributed`), and starts the container
as `/bin/bash -c ".../sm_drivers/sm_train.sh"`. The image hands that bash over to `train`
(docker/modeltrainer-hook.sh), which reads the two files here. Its hyperparameters become `--key value`
arguments as for every job; ModelTrainer's own driver does the same for an entry script. What the SDK's
drivers would have given the script besides (their environment, the requirements file they install) is
planned from the two files as they are (`ModelTrainerJob.source`, `.distributed`).
"""
from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any, Optional

from ..errors import ConfigError
from .entry_point import check_code_path, check_entry_point
from .model import ModelTrainerJob, MpiSettings, ProgramSpec

__all__ = ["CODE_CHANNEL", "DRIVERS_CHANNEL", "ModelTrainerJob", "read_model_trainer"]

DRIVERS_CHANNEL = "sm_drivers"
CODE_CHANNEL = "code"
# `SourceCode(command="train")`: the way to reach this toolkit before it served ModelTrainer; the
# program then comes from v2-style `sagemaker_*` hyperparameters, as before.
OUR_ENTRY_POINT = "train"


def _read(path: Path) -> dict[str, Any]:
    try:
        value = json.loads(path.read_text(encoding="utf-8") or "{}")
    except OSError as e:
        raise ConfigError(f"{path}: cannot read: {e.strerror}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise ConfigError(f"{path}: not the JSON object ModelTrainer writes: {e}") from None
    if not isinstance(value, dict):
        raise ConfigError(f"{path}: expected a JSON object, got {type(value).__name__}")
    return value


def _program(source: dict[str, Any], data_dir: Path, default_code_dir: Path, where: Path) -> Optional[ProgramSpec]:
    command, entry, source_dir = source.get("command"), source.get("entry_script"), source.get("source_dir")
    code_dir = data_dir / CODE_CHANNEL if source_dir else default_code_dir
    submit = code_dir
    if isinstance(source_dir, str) and source_dir.endswith(".tar.gz"):  # uploaded as it is: extracted first
        submit = code_dir / Path(source_dir).name
    if command:
        if not isinstance(command, str):
            raise ConfigError(f"{where}: field 'command' must be a string, got {json.dumps(command)[:80]}")
        if command.strip() == OUR_ENTRY_POINT:
            return None
        args = source.get("args") or []
        line = " ".join([command, *(shlex.quote(str(a)) for a in args)])
        return ProgramSpec(entry_point=line, submit_dir=str(submit), local_dir=submit, shell_command=True)
    if not isinstance(entry, str) or not entry:
        raise ConfigError(f"{where}: ModelTrainer's SourceCode names neither 'entry_script' nor 'command'")
    return ProgramSpec(entry_point=check_entry_point(entry, f"{where}: field 'entry_script'"), submit_dir=str(submit),
                       local_dir=submit)


def _mpi(distributed: dict[str, Any], where: Path) -> Optional[MpiSettings]:
    if not distributed:
        return None
    if "mpi_additional_options" not in distributed:
        raise ConfigError(f"{where}: ModelTrainer's distributed={sorted(distributed)} is not MPI; this image serves "
                          "distributed=MPI(...) (Horovod) and jobs without `distributed`")
    count = distributed.get("process_count_per_node")
    if count is not None and (isinstance(count, bool) or not isinstance(count, int) or count < 1):
        raise ConfigError(f"{where}: process_count_per_node must be a positive integer, got {json.dumps(count)}")
    options = distributed.get("mpi_additional_options") or []
    if not isinstance(options, list) or not all(isinstance(o, str) for o in options):
        raise ConfigError(f"{where}: mpi_additional_options must be a list of strings, got {json.dumps(options)[:80]}")
    return MpiSettings(processes_per_host=count, num_processes=None, custom_options=tuple(options))


def read_model_trainer(data_dir: Path, default_code_dir: Path) -> Optional[ModelTrainerJob]:
    """The job ModelTrainer describes in `<data_dir>/sm_drivers/`, or None where it wrote none. Without a
    source_dir the program is in `default_code_dir`."""
    drivers = data_dir / DRIVERS_CHANNEL
    source_path = drivers / "sourcecode.json"
    if not source_path.is_file():
        return None
    source = _read(source_path)
    program = _program(source, data_dir, default_code_dir, source_path)
    distributed_path = drivers / "distributed.json"
    distributed = _read(distributed_path) if distributed_path.is_file() else {}
    requirements = source.get("requirements")
    if requirements is not None:
        if not isinstance(requirements, str):
            raise ConfigError(f"{source_path}: field 'requirements' must be a string, got {json.dumps(requirements)[:80]}")
        check_code_path(requirements, f"{source_path}: field 'requirements'", "the requirements file")
    return ModelTrainerJob(program=program, mpi=_mpi(distributed, distributed_path) if program is not None else None,
                           source=source, distributed=distributed, requirements=requirements)
