"""Planning: a pure function from the config and host facts to what `train` will do.

`train --dry-run` prints this plan; `run` only executes it. Nothing here starts a process.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Mapping, NamedTuple, Optional

from ..config.hyperparameters import to_cmd_args
from ..config.model import HostFacts, InputMode, TrainingConfig
from ..config.secrets import Redactor
from ..config.settings import CHECKPOINT_DIR, MAX_RESTARTS, SKIP_TEARDOWN, Settings
from ..proc.helpers import HelperSpec
from ..wire.contract import without_internals
from ..wire.programs import Program
from ..wire.pipe_assignment import JobAddress, PipeAssignment, demux_folder, pipe_env
from ..wire.profiler_settings import FRAMEWORK_PROFILER_ENV, ProfilerSettings
from .coordination import Coordination
from .fifo_plan import DemuxSpec, dealing_notes, demux_specs, relays
from .kind import HostPart, KindInputs
from .kinds import choose
from .helper_plan import HelperInputs, Planned, Starts, plan_helpers, profiler_folder
from .localmode import checkpoint_carry, describe as describe_emulation, emulated_channels
from .modeltrainer_env import modeltrainer_env_vars
from .intermediate import IntermediateSync, intermediate_sync
from .program import ProgramLaunch, plan_program
from .requirements import RequirementsPlan, requirements_plan
from .restart_policy import RestartPolicy, restart_policy
from .shape import JobShape, Role
from .smenv import process_env_vars, sm_env_vars
from .tfconfig import container_env

__all__ = ["Coordination", "DemuxSpec", "JobShape", "LaunchPlan", "Role", "dumps", "plan_launch", "profiler_env"]


class LaunchPlan(NamedTuple):
    """Everything this host does for the job, decided before anything starts (`train --dry-run` prints it)."""
    distribution: str  # the name of the distribution kind this host runs (plan.kinds)
    shape: JobShape  # the job's hosts and master, this host's role (plan.shape)
    host: str
    program: ProgramLaunch
    argv: tuple[str, ...]
    cwd: Path
    env_set: Mapping[str, str]  # what the toolkit adds to the inherited environment
    requirements: RequirementsPlan  # what is pip-installed first (plan.requirements)
    intermediate: Optional[IntermediateSync]  # output/intermediate synced to S3 while the job runs (plan.intermediate)
    model_dir: Path  # what SageMaker packs into model.tar.gz
    folders: tuple[Path, ...]  # made before the program starts, as SageMaker provides them
    cleared: tuple[Path, ...]  # what an earlier job on this host left that would mislead this one: removed
    pipe_state: Path  # PipeModeDataset's epoch counts (sagemaker_tensorflow): cleared, and before a restart in place
    settings: Settings  # every setting `train` read (config.settings): plan.settings[GRACE_PERIOD] ...
    failure_file: Path
    success_file: Path
    coordination: Optional[Coordination]  # how this host takes part in the job; None: a program on its own
    restarts: RestartPolicy  # in-job restarts after a transient failure (plan.restart_policy)
    pipes: tuple[PipeAssignment, ...]  # which FIFOs the program (each rank) reads
    demux: tuple[DemuxSpec, ...]  # demultiplexer processes this host runs beside the ranks
    helpers: tuple[Planned, ...]  # every helper process this host runs beside its program (plan.helper_plan)
    profiler_dir: Optional[Path]  # this host's output/profiler when the profiler is on (workers ship it to the master)
    emulated: tuple[str, ...]  # File channels streamed as Pipe mode from their files (plan.localmode)
    checkpoint_dir: Path
    restore_checkpoints_from: Optional[Path]  # the `checkpoints` channel, copied into an empty checkpoint_dir
    keep_checkpoints_in: Optional[Path]  # local mode: where the checkpoint folder goes at the end (run.carry)
    notes: tuple[str, ...] = ()  # what the log says once at the start about how the job will run

    @property
    def role(self) -> Role:
        """This host's part in the job (the shape's)."""
        return self.shape.role

    def helper_specs(self, starts: Starts) -> tuple[HelperSpec, ...]:
        """The helpers that start at `starts`, in their order."""
        return tuple(h.spec for h in self.helpers if h.starts is starts)

    def helper(self, program: Program) -> Optional[HelperSpec]:
        """The helper of `program` this host runs (the first), or None."""
        return next((h.spec for h in self.helpers if h.program == program), None)

    def child_env(self, inherited: Mapping[str, str]) -> dict[str, str]:
        """The program's environment (mpirun's, on the master): what `train` inherited without the
        toolkit's internal ones (the rank contract), plus the plan's."""
        env = without_internals(inherited)
        env.update(self.env_set)
        return env

    def to_json(self) -> dict[str, Any]:
        return {
            "distribution": self.distribution,
            "role": self.role.value,
            "host": self.host,
            "shape": self.shape.to_json(),
            "argv": list(self.argv),
            "cwd": str(self.cwd),
            "fetch_code_from": self.program.fetch_from,
            "requirements": self.requirements.to_json(),
            "intermediate_sync": self.intermediate.to_json() if self.intermediate else None,
            "model_dir": str(self.model_dir),
            "folders": [str(f) for f in self.folders],
            "cleared": [str(f) for f in self.cleared],
            "settings": self.settings.to_json(),
            "env": dict(sorted(self.env_set.items())),
            "coordination": self.coordination.to_json() if self.coordination else None,
            "restarts": self.restarts.to_json(),
            "pipes": {a.channel: {"mode": a.mode.value, "format": a.record_format.value, "prefix": a.prefix}
                      for a in self.pipes},
            "helpers": [helper.to_json() for helper in self.helpers],
            "profiler_dir": str(self.profiler_dir) if self.profiler_dir else None,
            "emulated_pipes": list(self.emulated),
            "restore_checkpoints_from": str(self.restore_checkpoints_from) if self.restore_checkpoints_from else None,
            "keep_checkpoints_in": str(self.keep_checkpoints_in) if self.keep_checkpoints_in else None,
            "notes": list(self.notes),
        }


def profiler_env(config: TrainingConfig) -> dict[str, str]:
    """What every rank's start-up hook reads to record its steps (smtrain.profiler.hooks)."""
    p = config.profiling
    if not (p.steps or p.detailed or p.python):
        return {}
    settings = ProfilerSettings(str(config.paths.output_dir / "profiler"), config.resources.current_host,
                                p.steps, p.detailed, p.python, p.min_free_mb)
    return {FRAMEWORK_PROFILER_ENV: settings.to_json()}


def teardown_env(config: TrainingConfig) -> dict[str, str]:
    """Where restarts in place are asked for, a program that dies of an uncaught exception skips the
    interpreter's teardown (its start-up hook), so that the job starts again sooner; the user's own
    SM_SKIP_TEARDOWN_ON_FAILURE (0 or 1) wins."""
    if config.settings[MAX_RESTARTS] == 0 or SKIP_TEARDOWN.variable in config.environ:
        return {}
    return {SKIP_TEARDOWN.variable: "1"}


def plan_launch(config: TrainingConfig, facts: HostFacts, python: str, token: str = "") -> LaunchPlan:
    """What this host does. `token` authenticates rank reports on the control channel."""
    asked, kind, shape = choose(config)
    launch = plan_program(config.program, config.paths.code_dir, to_cmd_args(config.user_hyperparameters), python,
                          facts.code.submit_is_file)
    pythonpath = str(launch.program_dir)
    if config.environ.get("PYTHONPATH"):
        pythonpath += ":" + config.environ["PYTHONPATH"]
    process_env = process_env_vars(config)

    def base_env(pipes: tuple[PipeAssignment, ...]) -> dict[str, str]:
        return {
            **process_env,
            **container_env(process_env["SAGEMAKER_REGION"], config.environ),
            **(asked.environment(config, shape.hosts) if asked is not None else {}),
            **sm_env_vars(config, facts, shape),
            **modeltrainer_env_vars(config, facts),  # SDK v3's drivers' names win in a job ModelTrainer started
            CHECKPOINT_DIR.variable: str(config.checkpoint_dir),
            **profiler_env(config),
            **teardown_env(config),
            **({"SM_TENSORBOARD_DIR": str(config.tensorboard_dir)} if config.tensorboard_dir else {}),
            **pipe_env(pipes, 0),
            "PYTHONPATH": pythonpath,
        }

    emulated = emulated_channels(config)
    part = kind.plan(KindInputs(config, facts, python, token, shape, launch, base_env, emulated))
    carry = checkpoint_carry(config)
    timeline = asked.horovod_timeline(config, launch.program_dir) if asked is not None else None
    intermediate = intermediate_sync(config, facts.intermediate_exists)
    demux = demux_specs(part.pipes, config.paths.input_data_dir, part.ranks_per_host,
                        frozenset(c.name for c in config.channels
                                  if c.mode is InputMode.PIPE and config.settings[MAX_RESTARTS] > 0),
                        relays(part.pipes, part.ranks_per_host, part.first_rank), job_address(part, shape.master, config))
    return LaunchPlan(
        distribution=kind.name,
        shape=shape,
        host=config.resources.current_host,
        program=launch,
        argv=part.argv,
        cwd=launch.program_dir,
        env_set=part.env_set,
        requirements=requirements_plan(config, launch.program_dir, launch.fetch_from is not None, facts.code),
        intermediate=intermediate,
        model_dir=config.paths.model_dir,
        folders=(config.paths.model_dir, config.paths.output_data_dir, config.checkpoint_dir,
                 *([config.tensorboard_dir] if config.tensorboard_dir else [])),
        # PipeModeDataset's FIFO numbers (sagemaker_tensorflow); the demultiplexers' FIFOs and rank-ended marks
        cleared=(config.paths.base / "pipe_state", demux_folder(config.paths.input_data_dir)),
        pipe_state=config.paths.base / "pipe_state",
        settings=config.settings,
        failure_file=config.paths.failure_file,
        success_file=config.paths.success_file,
        coordination=part.coordination,
        restarts=restart_policy(config.settings[MAX_RESTARTS], part.coordination,
                                tuple(c.name for c in config.channels if c.mode is InputMode.PIPE), part.pipes),
        pipes=part.pipes,
        demux=demux,
        helpers=plan_helpers(HelperInputs(config, python, shape.role, facts.num_gpus, part.coordination, demux,
                                          emulated, intermediate, timeline)),
        profiler_dir=profiler_folder(config),
        emulated=emulated,
        checkpoint_dir=config.checkpoint_dir,
        restore_checkpoints_from=carry.restore_from,
        keep_checkpoints_in=carry.keep_in,
        notes=network_notes(facts, shape) + ((describe_emulation(emulated),) if emulated else ()) + part.notes
        + dealing_notes(
            part.pipes, {c.name: c.s3_distribution_type for c in config.channels}, part.ranks_per_host,
            len(config.resources.hosts)),
    )


def job_address(part: HostPart, master: str, config: TrainingConfig) -> Optional[JobAddress]:
    """How this host's demultiplexers of channels dealt across the job's hosts reach the master; None without any."""
    if part.coordination is None or not any(a.by_job for a in part.pipes):
        return None
    hosts = len({host for host, _ in part.coordination.ranks})
    return JobAddress(master, part.coordination.control_port, config.resources.current_host, hosts, part.first_rank)


def network_notes(facts: HostFacts, shape: JobShape) -> tuple[str, ...]:
    """What the log says of how GPUs talk between hosts: NCCL over sockets where the image has no
    EFA plugin for it (aws-ofi-nccl)."""
    if facts.num_gpus and len(shape.hosts) > 1 and not facts.network.nccl_net_plugin:
        return ("NCCL will use sockets between hosts: this image has no aws-ofi-nccl (NCCL's EFA plugin)",)
    return ()


def dumps(plan: LaunchPlan, redact: Redactor = Redactor()) -> str:
    """The plan as JSON for `train --dry-run`, secret values masked."""
    return redact(json.dumps(plan.to_json(), indent=2))
