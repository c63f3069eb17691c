"""Planning: a pure function from the config and host facts to what `train` will do.

`train --dry-run` prints this plan; `run` only executes it. Nothing here starts a process.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable, Mapping, NamedTuple, Optional

from ..config.defaults import SSHD
from ..config.hyperparameters import to_cmd_args
from ..config.model import HostFacts, InputMode, Strategy, TrainingConfig
from ..config.secrets import Redactor
from ..wire.contract import RANK_CONTRACT_ENV, RankContract, without_internals
from .mpirun import MpiLayout, cpus_per_rank, layout, mpirun_command
from ..wire.pipe_assignment import PipeAssignment, PipeMode, demux_folder, pipe_env
from ..wire.profiler_settings import FRAMEWORK_PROFILER_ENV, ProfilerSettings
from .fifo_plan import PipeChannel, assign_pipes
from .program import ProgramLaunch, plan_program
from .localmode import checkpoint_carry, emulated_channels, feeder_command
from .smenv import process_env_vars, sm_env_vars
from .shape import Distribution, JobShape, Role, job_shape
from .tfconfig import Task, container_env, tasks_of, tf_config

__all__ = ["PLANNERS", "Distribution", "JobShape", "KindInputs", "KindPlan", "LaunchPlan", "MpiPlan", "Role", "StrategyPlan",
           "dumps", "horovod_timeline", "plan_launch", "profiler_env", "profiler_folder", "report_command"]


class MpiPlan(NamedTuple):
    """An MPI job as this host sees it: the master, the workers, the layout, the control channel, sshd."""
    master: str
    workers: tuple[str, ...]
    layout: MpiLayout
    control_bind: str  # all interfaces when there are workers, loopback alone otherwise
    control_port: int
    peer_wait_s: float
    heartbeat_timeout_s: float
    sshd_argv: tuple[str, ...]  # what a worker runs for mpirun to reach it; empty on the master
    sshd_port: int

    def to_json(self) -> dict[str, Any]:
        return {
            "master": self.master,
            "workers": list(self.workers),
            "processes_per_host": self.layout.processes_per_host,
            "num_processes": self.layout.num_processes,
            "control": f"{self.control_bind}:{self.control_port}",
            "peer_wait_s": self.peer_wait_s,
            "heartbeat_timeout_s": self.heartbeat_timeout_s,
            "sshd": list(self.sshd_argv),
        }


class StrategyPlan(NamedTuple):
    """A TensorFlow strategy job on two or more hosts: every host runs its program (and, for
    parameter servers, a ps) under the rank launcher, which reports to the master's control server."""

    strategy: Strategy
    master: str
    workers: tuple[str, ...]
    tasks: tuple[Task, ...]  # every process of the job
    program_task: Task  # this host's program
    ps_argv: tuple[str, ...]  # this host's parameter server under the rank launcher; empty if none
    ps_tf_config: str  # its TF_CONFIG
    contract: RankContract  # for this host's launchers; the token comes with the job's start
    control_bind: str
    control_port: int
    peer_wait_s: float
    heartbeat_timeout_s: float

    def task(self, rank: int) -> Optional[Task]:
        return next((t for t in self.tasks if t.rank == rank), None)

    def to_json(self) -> dict[str, Any]:
        return {
            "strategy": self.strategy.value,
            "master": self.master,
            "workers": list(self.workers),
            "tasks": [f"{t.type} {t.index}@{t.host}" for t in self.tasks],
            "parameter_server": list(self.ps_argv),
            "control": f"{self.control_bind}:{self.control_port}",
            "peer_wait_s": self.peer_wait_s,
            "heartbeat_timeout_s": self.heartbeat_timeout_s,
        }


class LaunchPlan(NamedTuple):
    """Everything this host does for the job, decided before anything starts (`train --dry-run` prints it)."""
    shape: JobShape  # the job's distribution kind, its hosts and master, this host's role (plan.shape)
    host: str
    program: ProgramLaunch
    argv: tuple[str, ...]
    cwd: Path
    env_set: Mapping[str, str]  # what the toolkit adds to the inherited environment
    requirements: Optional[Path]  # requirements.txt to pip-install first, if the code has one
    folders: tuple[Path, ...]  # made before the program starts, as SageMaker provides them
    cleared: tuple[Path, ...]  # what an earlier job on this host left that would mislead this one: removed
    grace_period_s: float
    stall_timeout_s: float  # the stall watchdog's timeout; 0: off
    failure_file: Path
    success_file: Path
    mpi: Optional[MpiPlan]  # None: the program runs on this host without MPI
    strategy: Optional[StrategyPlan]  # a TF strategy job across hosts
    pipes: tuple[PipeAssignment, ...]  # which FIFOs the program (each rank) reads
    demux: tuple[tuple[str, ...], ...]  # demultiplexer processes this host runs beside the ranks
    monitor: tuple[str, ...]  # the system monitor's command; empty when switched off
    report: tuple[str, ...]  # the profiler report's command, run when the job ends (master, single); or empty
    profiler_dir: Optional[Path]  # this host's output/profiler when the profiler is on (workers ship it to the master)
    emulated: tuple[str, ...]  # File channels streamed as Pipe mode from their files (plan.localmode)
    feeder: tuple[str, ...]  # the local feeder's command for them; empty without any
    checkpoint_dir: Path
    restore_checkpoints_from: Optional[Path]  # the `checkpoints` channel, copied into an empty checkpoint_dir
    keep_checkpoints_in: Optional[Path]  # local mode: where the checkpoint folder goes at the end (run.carry)

    @property
    def distribution(self) -> Distribution:
        return self.shape.distribution

    @property
    def role(self) -> Role:
        return self.shape.role

    def child_env(self, inherited: Mapping[str, str]) -> dict[str, str]:
        """The program's environment (mpirun's, on the master): what `train` inherited without the
        toolkit's internal ones (the rank contract), plus the plan's."""
        env = without_internals(inherited)
        env.update(self.env_set)
        return env

    def to_json(self) -> dict[str, Any]:
        return {
            "distribution": self.distribution.value,
            "role": self.role.value,
            "host": self.host,
            "shape": self.shape.to_json(),
            "argv": list(self.argv),
            "cwd": str(self.cwd),
            "fetch_code_from": self.program.fetch_from,
            "install_requirements": str(self.requirements) if self.requirements else None,
            "folders": [str(f) for f in self.folders],
            "cleared": [str(f) for f in self.cleared],
            "grace_period_s": self.grace_period_s,
            "stall_timeout_s": self.stall_timeout_s,
            "env": dict(sorted(self.env_set.items())),
            "mpi": self.mpi.to_json() if self.mpi else None,
            "strategy": self.strategy.to_json() if self.strategy else None,
            "pipes": {a.channel: {"mode": a.mode.value, "format": a.record_format.value, "prefix": a.prefix}
                      for a in self.pipes},
            "demux": [list(argv) for argv in self.demux],
            "monitor": list(self.monitor),
            "report": list(self.report),
            "profiler_dir": str(self.profiler_dir) if self.profiler_dir else None,
            "emulated_pipes": list(self.emulated),
            "feeder": list(self.feeder),
            "restore_checkpoints_from": str(self.restore_checkpoints_from) if self.restore_checkpoints_from else None,
            "keep_checkpoints_in": str(self.keep_checkpoints_in) if self.keep_checkpoints_in else None,
        }


def strategy_env(config: TrainingConfig, shape: JobShape) -> dict[str, str]:
    """TF_CONFIG where the TensorFlow container sets it: MultiWorkerMirroredStrategy on every
    distribution host (one host too); parameter servers on two or more."""
    hosts, here = shape.hosts, config.resources.current_host
    if config.strategy is Strategy.MULTI_WORKER_MIRRORED and here in hosts:
        return {"TF_CONFIG": tf_config(config.strategy, hosts, here)}
    if shape.distribution is Distribution.PARAMETER_SERVER:
        return {"TF_CONFIG": tf_config(Strategy.PARAMETER_SERVER, hosts, here)}
    return {}


def _strategy_plan(config: TrainingConfig, shape: JobShape, python: str,
                   pipes: tuple[PipeAssignment, ...]) -> StrategyPlan:
    assert config.strategy is not None
    hosts, here = shape.hosts, config.resources.current_host
    tasks = tasks_of(config.strategy, hosts)
    ps = next((t for t in tasks if t.is_ps and t.host == here), None)
    return StrategyPlan(
        strategy=config.strategy,
        master=shape.master,
        workers=shape.workers,
        tasks=tasks,
        program_task=next(t for t in tasks if not t.is_ps and t.host == here),
        ps_argv=(python, "-m", "smtrain.rank", "--", python, "-m", "smtrain.run.psserver") if ps else (),
        ps_tf_config=tf_config(config.strategy, hosts, here, ps_task=True) if ps else "",
        contract=RankContract(shape.master, config.control_port, "", config.grace_period_s, pipes,
                              stall_timeout_s=config.stall_timeout_s),
        control_bind="0.0.0.0",
        control_port=config.control_port,
        peer_wait_s=config.peer_wait_s,
        heartbeat_timeout_s=config.heartbeat_timeout_s,
    )


def plan_pipes(config: TrainingConfig, emulated: tuple[str, ...], ranks_per_host: int, mpi: bool,
               world_size: int = 0) -> tuple[PipeAssignment, ...]:
    """Every Pipe channel's FIFOs, and those of the File channels in `emulated`."""
    channels = [PipeChannel(c.name, c.record_format, c.shuffle_seed is not None)
                for c in config.channels if c.mode is InputMode.PIPE or c.name in emulated]
    return assign_pipes(channels, config.paths.input_data_dir, ranks_per_host, mpi, world_size)


class DemuxResume(NamedTuple):
    """Where a demultiplexer of a shuffled channel finds what this host's ranks consumed before a
    restart: the newest checkpoint in `checkpoint_dir`, ranks `first_rank` on (mpirun's by-slot order)."""

    checkpoint_dir: Path
    first_rank: int
    shuffled: frozenset[str]  # the channels with a ShuffleConfig


def demux_commands(pipes: tuple[PipeAssignment, ...], data_dir: Path, ranks: int, python: str,
                   resume: Optional[DemuxResume] = None) -> tuple[tuple[str, ...], ...]:
    return tuple(
        (python, "-m", "smtrain.data.demux", "--data", str(data_dir), "--channel", a.channel,
         "--ranks", str(ranks), "--format", a.record_format.value,
         *(("--resume-from", str(resume.checkpoint_dir), "--first-rank", str(resume.first_rank))
           if resume is not None and a.channel in resume.shuffled else ()))
        for a in pipes
        if a.mode is PipeMode.DEMUX
    )


def monitor_command(config: TrainingConfig, python: str) -> tuple[str, ...]:
    if config.monitor_interval_ms is None:
        return ()
    return (python, "-m", "smtrain.profiler.monitor", "--out", str(config.paths.output_dir / "profiler"),
            "--host", config.resources.current_host, "--interval-ms", f"{config.monitor_interval_ms:g}")


def profiler_env(config: TrainingConfig) -> dict[str, str]:
    """What every rank's start-up hook reads to record its steps (smtrain.profiler.hooks)."""
    p = config.profiling
    if not (p.steps or p.detailed or p.python):
        return {}
    settings = ProfilerSettings(str(config.paths.output_dir / "profiler"), config.resources.current_host,
                                p.steps, p.detailed, p.python, p.min_free_mb)
    return {FRAMEWORK_PROFILER_ENV: settings.to_json()}


def horovod_timeline(config: TrainingConfig, program_dir: Path) -> Optional[Path]:
    """HOROVOD_TIMELINE as the ranks get it (`-x NAME=VALUE` in the custom MPI options, else the
    environment), relative paths from the ranks' working folder."""
    value = config.environ.get("HOROVOD_TIMELINE")
    options = list(config.mpi.custom_options)
    for i, option in enumerate(options):
        given = options[i + 1] if option == "-x" and i + 1 < len(options) else ""
        if given.startswith("HOROVOD_TIMELINE="):
            value = given.partition("=")[2]
    if not value or value.upper() == "DYNAMIC":
        return None
    return program_dir / value


def profiler_folder(config: TrainingConfig) -> Optional[Path]:
    """This host's profiler folder, when the system monitor or step metrics are on."""
    if config.monitor_interval_ms is None and not config.profiling.steps:
        return None
    return config.paths.output_dir / "profiler"


def report_command(config: TrainingConfig, python: str, program_dir: Path) -> tuple[str, ...]:
    """`train report` over this host's profiler folder into output/data (SageMaker packs it into
    output.tar.gz). `run` adds `--since` (the job's start) when it runs it."""
    folder = profiler_folder(config)
    if folder is None:
        return ()
    timeline = horovod_timeline(config, program_dir) if config.mpi.enabled else None
    return (python, "-m", "smtrain.profiler.job_report", str(folder),
            "--out", str(config.paths.output_data_dir / "profiler-report"), "--job",
            *(("--horovod-timeline", str(timeline)) if timeline else ()))


def _mpi_plan(config: TrainingConfig, facts: HostFacts, shape: JobShape) -> MpiPlan:
    hosts, role = shape.hosts, shape.role
    sshd = config.sshd
    return MpiPlan(
        master=shape.master,
        workers=shape.workers,
        layout=layout(hosts, config.mpi.processes_per_host, config.mpi.num_processes, facts.num_gpus),
        control_bind="0.0.0.0" if len(hosts) > 1 else "127.0.0.1",
        control_port=config.control_port,
        peer_wait_s=config.peer_wait_s,
        heartbeat_timeout_s=config.heartbeat_timeout_s,
        sshd_argv=(SSHD, "-D", "-e", "-f", sshd.config, "-p", str(sshd.port)) if role is Role.WORKER else (),
        sshd_port=sshd.port,
    )


class KindPlan(NamedTuple):
    """What a distribution kind's planner decides: how this host's part starts and which FIFOs its ranks read."""

    argv: tuple[str, ...]
    env_set: dict[str, str]
    pipes: tuple[PipeAssignment, ...]
    ranks_per_host: int
    first_rank: int  # this host's first rank (mpirun's by-slot order)
    mpi: Optional[MpiPlan] = None
    strategy: Optional[StrategyPlan] = None


class KindInputs(NamedTuple):
    """What a distribution kind's planner gets to decide this host's part."""
    config: TrainingConfig
    facts: HostFacts
    python: str
    token: str
    shape: JobShape
    launch: ProgramLaunch
    base_env: Callable[[tuple[PipeAssignment, ...]], dict[str, str]]  # the program's variables, given its FIFOs
    emulated: tuple[str, ...]  # File channels read as Pipe channels (plan.localmode)


def _plan_single(given: KindInputs) -> KindPlan:
    pipes = plan_pipes(given.config, given.emulated, 1, False)
    return KindPlan(given.launch.argv, given.base_env(pipes), pipes, 1, 0)


def _plan_mpi(given: KindInputs) -> KindPlan:
    config, python = given.config, given.python
    mpi = _mpi_plan(config, given.facts, given.shape)
    here = config.resources.current_host
    ranks_per_host = mpi.layout.processes_per_host
    first_rank = mpi.layout.hosts.index(here) * ranks_per_host if here in mpi.layout.hosts else 0
    pipes = plan_pipes(config, given.emulated, ranks_per_host, True, mpi.layout.num_processes)
    env_set = given.base_env(pipes)
    if given.shape.role is Role.WORKER:  # the master's mpirun starts this host's ranks through sshd
        return KindPlan((), env_set, pipes, ranks_per_host, first_rank, mpi=mpi)
    control_host = mpi.master if mpi.workers else "127.0.0.1"
    contract = RankContract(control_host, mpi.control_port, given.token, config.grace_period_s, pipes,
                            stall_timeout_s=config.stall_timeout_s)
    env_set[RANK_CONTRACT_ENV] = contract.to_json()
    command = mpirun_command(
        mpi.layout, here, config.resources.network_interface_name, config.resources.current_instance_type,
        given.facts.network, {**without_internals(config.environ), **env_set}, config.mpi.custom_options,
        (python, "-m", "smtrain.rank", "--", *given.launch.argv),
        cpus_per_rank=cpus_per_rank(ranks_per_host, given.facts.bindable_cpus, given.facts.num_gpus,
                                    config.resources.current_instance_type),
    )
    env_set = {k: v for k, v in command.env.items() if config.environ.get(k) != v}
    return KindPlan(command.argv, env_set, pipes, ranks_per_host, first_rank, mpi=mpi)


def _plan_strategy(given: KindInputs) -> KindPlan:
    pipes = plan_pipes(given.config, given.emulated, 1, False)
    python = given.python
    return KindPlan((python, "-m", "smtrain.rank", "--", *given.launch.argv), given.base_env(pipes), pipes, 1, 0,
                    strategy=_strategy_plan(given.config, given.shape, python, pipes))


# One row per distribution kind (its policies, what each host does at run time: smtrain.run.kinds).
PLANNERS: dict[Distribution, Callable[[KindInputs], KindPlan]] = {
    Distribution.SINGLE: _plan_single,
    Distribution.MPI: _plan_mpi,
    Distribution.MULTI_WORKER_MIRRORED: _plan_strategy,
    Distribution.PARAMETER_SERVER: _plan_strategy,
}


def plan_launch(config: TrainingConfig, facts: HostFacts, python: str, token: str = "") -> LaunchPlan:
    """What this host does. `token` authenticates rank reports on the control channel."""
    shape = job_shape(config)
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
            **strategy_env(config, shape),
            **sm_env_vars(config, facts, shape),
            "SM_CHECKPOINT_DIR": str(config.checkpoint_dir),
            **profiler_env(config),
            **({"SM_TENSORBOARD_DIR": str(config.tensorboard_dir)} if config.tensorboard_dir else {}),
            **pipe_env(pipes, 0),
            "PYTHONPATH": pythonpath,
        }

    emulated = emulated_channels(config)
    kind = PLANNERS[shape.distribution](KindInputs(config, facts, python, token, shape, launch, base_env, emulated))
    resume = DemuxResume(config.checkpoint_dir, kind.first_rank,
                         frozenset(c.name for c in config.channels if c.shuffle_seed is not None))
    requirements = launch.program_dir / "requirements.txt"
    carry = checkpoint_carry(config)
    return LaunchPlan(
        shape=shape,
        host=config.resources.current_host,
        program=launch,
        argv=kind.argv,
        cwd=launch.program_dir,
        env_set=kind.env_set,
        requirements=requirements if launch.fetch_from or facts.code.has_requirements else None,
        folders=(config.paths.model_dir, config.paths.output_data_dir, config.checkpoint_dir,
                 *([config.tensorboard_dir] if config.tensorboard_dir else [])),
        # PipeModeDataset's FIFO numbers (sagemaker_tensorflow); the demultiplexers' FIFOs and rank-ended marks
        cleared=(config.paths.base / "pipe_state", demux_folder(config.paths.input_data_dir)),
        grace_period_s=config.grace_period_s,
        stall_timeout_s=config.stall_timeout_s,
        failure_file=config.paths.failure_file,
        success_file=config.paths.success_file,
        mpi=kind.mpi,
        strategy=kind.strategy,
        pipes=kind.pipes,
        demux=demux_commands(kind.pipes, config.paths.input_data_dir, kind.ranks_per_host, python, resume),
        monitor=monitor_command(config, python),
        report=report_command(config, python, launch.program_dir) if shape.role in (Role.SINGLE, Role.MASTER) else (),
        profiler_dir=profiler_folder(config),
        emulated=emulated,
        feeder=feeder_command(config, emulated, python),
        checkpoint_dir=config.checkpoint_dir,
        restore_checkpoints_from=carry.restore_from,
        keep_checkpoints_in=carry.keep_in,
    )


def dumps(plan: LaunchPlan, redact: Redactor = Redactor()) -> str:
    """The plan as JSON for `train --dry-run`, secret values masked."""
    return redact(json.dumps(plan.to_json(), indent=2))
