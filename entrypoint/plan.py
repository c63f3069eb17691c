"""Planning: a pure function from the config and host facts to what `train` will do.

`train --dry-run` prints this plan; `run` only executes it. Nothing here starts a process.
"""
from __future__ import annotations

import enum
import json
from pathlib import Path
from typing import Any, Mapping, NamedTuple, Optional

from .config import InputMode, TrainingConfig
from .errors import ConfigError
from .hostfacts import HostFacts
from .hyperparameters import to_cmd_args
from .program import ProgramLaunch, plan_program
from .smenv import process_env_vars, sm_env_vars


class Role(enum.Enum):
    SINGLE = "single"  # one host, or several hosts each running its own copy (no MPI)
    MASTER = "master"  # runs mpirun for the whole job
    WORKER = "worker"  # serves the master's ranks and follows the job


class LaunchPlan(NamedTuple):
    role: Role
    host: str
    program: ProgramLaunch
    argv: tuple[str, ...]
    cwd: Path
    env_set: Mapping[str, str]  # what the toolkit adds to the inherited environment
    requirements: Optional[Path]  # requirements.txt to pip-install first, if the code has one
    folders: tuple[Path, ...]  # made before the program starts, as SageMaker provides them
    grace_period_s: float
    failure_file: Path
    success_file: Path

    def child_env(self, inherited: Mapping[str, str]) -> dict[str, str]:
        env = dict(inherited)
        env.update(self.env_set)
        return env

    def to_json(self) -> dict[str, Any]:
        return {
            "role": self.role.value,
            "host": self.host,
            "argv": list(self.argv),
            "cwd": str(self.cwd),
            "fetch_code_from": self.program.fetch_from,
            "install_requirements": str(self.requirements) if self.requirements else None,
            "folders": [str(f) for f in self.folders],
            "grace_period_s": self.grace_period_s,
            "env": dict(sorted(self.env_set.items())),
        }


def role_of(config: TrainingConfig) -> Role:
    if not (config.mpi.enabled and config.is_multi_host):
        return Role.SINGLE
    return Role.MASTER if config.resources.current_host == config.resources.hosts[0] else Role.WORKER


def pipe_env_vars(config: TrainingConfig) -> dict[str, str]:
    """SM_PIPE_<C>: the FIFO prefix of each Pipe channel (epoch e at `<prefix>_<e>`), for one rank a host."""
    return {
        f"SM_PIPE_{c.name.upper()}": str(config.paths.input_data_dir / c.name)
        for c in config.channels
        if c.mode is InputMode.PIPE
    }


def toolkit_env_vars(config: TrainingConfig) -> dict[str, str]:
    """This product's own variables, beyond sagemaker-training's."""
    return {"SM_CHECKPOINT_DIR": str(config.checkpoint_dir), **pipe_env_vars(config)}


def plan_launch(config: TrainingConfig, facts: HostFacts, python: str) -> LaunchPlan:
    role = role_of(config)
    if config.mpi.enabled:
        raise ConfigError(
            "hyperparameters.json: sagemaker_mpi_enabled is true, but this version of the toolkit runs "
            "programs without MPI only; set sagemaker_mpi_enabled to false"
        )
    launch = plan_program(config.program, config.paths.code_dir, to_cmd_args(config.user_hyperparameters), python)
    pythonpath = str(launch.program_dir)
    if config.environ.get("PYTHONPATH"):
        pythonpath += ":" + config.environ["PYTHONPATH"]
    env_set = {
        **process_env_vars(config),
        **sm_env_vars(config, facts),
        **toolkit_env_vars(config),
        "PYTHONPATH": pythonpath,
    }
    requirements = launch.program_dir / "requirements.txt"
    return LaunchPlan(
        role=role,
        host=config.resources.current_host,
        program=launch,
        argv=launch.argv,
        cwd=launch.program_dir,
        env_set=env_set,
        requirements=requirements if launch.fetch_from or requirements.is_file() else None,
        folders=(config.paths.model_dir, config.paths.output_data_dir, config.checkpoint_dir),
        grace_period_s=config.grace_period_s,
        failure_file=config.paths.failure_file,
        success_file=config.paths.success_file,
    )


def dumps(plan: LaunchPlan) -> str:
    return json.dumps(plan.to_json(), indent=2)
