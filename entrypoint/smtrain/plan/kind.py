"""A distribution kind: the one interface every kind's module in plan.kinds implements, and what its
planner gets (`KindInputs`) and returns (`HostPart`).

A kind owns everything about itself: the hyperparameter that turns it on and how it is read, its
name in messages, the rule for where it runs, what it adds to every program's environment
(TF_CONFIG) and this host's part in it (the processes and the `Coordination` that `run` carries out).
The kinds' table, `plan.kinds.KINDS`, is the only list of them."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Callable, Mapping, NamedTuple, Optional

from ..config.hyperparameters import truthy
from ..config.model import HostFacts, InputMode, TrainingConfig
from ..config.settings import (CONTROL_PORT, GRACE_PERIOD, HEARTBEAT_TIMEOUT, MAX_RESTARTS, PEER_WAIT, PIPE_DEALING,
                               STALL_TIMEOUT, STRAGGLER_WINDOW)
from ..wire.contract import RankContract
from ..wire.pipe_assignment import PipeAssignment
from .coordination import Coordination
from .fifo_plan import PipeChannel, assign_pipes
from .program import ProgramLaunch
from .shape import JobShape

__all__ = ["HostPart", "Kind", "KindInputs"]


class HostPart(NamedTuple):
    """What a kind's planner decides: how this host's part starts and which FIFOs its ranks read."""

    argv: tuple[str, ...]  # this host's program (mpirun on an MPI master); empty: none of its own
    env_set: dict[str, str]
    pipes: tuple[PipeAssignment, ...]
    ranks_per_host: int
    coordination: Optional[Coordination] = None  # None: a program on its own
    first_rank: int = 0  # the global rank of this host's local rank 0 (mpirun's by-slot order)
    notes: tuple[str, ...] = ()  # what the log says once at the start about how this host's part runs


class KindInputs(NamedTuple):
    """What a kind's planner gets to decide this host's part."""

    config: TrainingConfig
    facts: HostFacts
    python: str
    token: str
    shape: JobShape
    launch: ProgramLaunch
    base_env: Callable[[tuple[PipeAssignment, ...]], dict[str, str]]  # the program's variables, given its FIFOs
    emulated: tuple[str, ...]  # File channels read as Pipe channels (plan.localmode)

    def pipes(self, ranks_per_host: int = 1, mpi: bool = False, world_size: int = 0) -> tuple[PipeAssignment, ...]:
        """Every Pipe channel's FIFOs, and those of the File channels read as Pipe channels (SageMaker's own
        through a demultiplexer where restarts in place are asked for: fifo_plan). Under MPI on several hosts,
        the FullyReplicated ones are dealt across the job's hosts unless SMTRAIN_PIPE_DEALING=host."""
        settings = self.config.settings
        restarts = settings[MAX_RESTARTS] > 0
        piped = [c for c in self.config.channels if c.mode is InputMode.PIPE or c.name in self.emulated]
        channels = [PipeChannel(c.name, c.record_format, c.shuffle_seed is not None,
                                relayed=restarts and c.mode is InputMode.PIPE) for c in piped]
        across = frozenset(c.name for c in piped if c.s3_distribution_type != "ShardedByS3Key") \
            if mpi and world_size > ranks_per_host and settings[PIPE_DEALING] == "job" else frozenset()
        return assign_pipes(channels, self.config.paths.input_data_dir, ranks_per_host, mpi, world_size, across)

    def contract(self, control_host: str, token: str, pipes: tuple[PipeAssignment, ...],
                 output: bool = False) -> RankContract:
        """What every rank launcher of this host is told (wire.contract): where the control server is, `token`,
        the grace period, its FIFOs, the stall watchdog's timeout and whether its output goes to the server."""
        settings = self.config.settings
        return RankContract(control_host, settings[CONTROL_PORT], token, settings[GRACE_PERIOD], pipes,
                            stall_timeout_s=settings[STALL_TIMEOUT], output=output)

    def coordination(self, **decided: Any) -> Coordination:
        """A Coordination with what every kind takes from the config and the shape, plus `decided`."""
        config, shape = self.config, self.shape
        common: dict[str, Any] = dict(
            master=shape.master, workers=shape.workers,
            control_bind="0.0.0.0" if len(shape.hosts) > 1 else "127.0.0.1", control_port=config.settings[CONTROL_PORT],
            peer_wait_s=config.settings[PEER_WAIT], heartbeat_timeout_s=config.settings[HEARTBEAT_TIMEOUT],
            straggler_window_s=config.settings[STRAGGLER_WINDOW],
            contract=None, program_rank=0, companions=(), rank_names={},
        )
        return Coordination(**{**common, **decided})


class Kind:
    """One distribution kind. Its module subclasses this once and puts the instance in the kinds'
    table; the defaults are those of a kind no hyperparameter turns on."""

    name = ""  # how `train --dry-run` names it ("distribution")
    flag = ""  # the hyperparameter that turns it on (the SDK's `distribution=`); empty: none does
    offer = ""  # how messages name it (what this image serves, in the refusal of a distribution it does not)

    def flag_on(self, hyperparameters: Mapping[str, Any]) -> bool:
        """Whether its hyperparameter turns it on (as the SDK writes flags: JSON or strings)."""
        return bool(self.flag) and truthy(hyperparameters.get(self.flag, False))

    def asked(self, config: TrainingConfig) -> bool:
        """Whether the job asks for it; its flag, unless the kind reads more (MPI: ModelTrainer's files)."""
        return self.flag_on(config.hyperparameters)

    def runs_on(self, config: TrainingConfig, groups: tuple[str, ...], hosts: tuple[str, ...]) -> bool:
        """Whether, asked for, it runs on this host given the distribution's groups and hosts; where it
        does not, the host runs its program on its own."""
        raise NotImplementedError

    def environment(self, config: TrainingConfig, hosts: tuple[str, ...]) -> dict[str, str]:
        """What it adds to every program's environment where it was asked for, also on a host where
        it does not run (SageMaker's TensorFlow container sets TF_CONFIG on one host too)."""
        return {}

    def horovod_timeline(self, config: TrainingConfig, program_dir: Path) -> Optional[Path]:
        """Where its ranks write Horovod's timeline, for the report to read; None: nowhere."""
        return None

    def plan(self, given: KindInputs) -> HostPart:
        """This host's part in it."""
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<kind {self.name}>"
