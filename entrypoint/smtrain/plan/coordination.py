"""How this host takes part in a job across processes or hosts, as a distribution kind's planner
(plan.kinds) decides it and `run` carries it out without knowing the kind: the control channel, the
peers to wait for, the processes to start, how signals reach the ranks, when the job has ended and
how its failures name what failed. Also the planners' inputs and outputs (`KindInputs`, `KindPlan`)."""
from __future__ import annotations

import enum
from typing import Any, Callable, Mapping, NamedTuple, Optional

from ..config.model import HostFacts, InputMode, TrainingConfig
from ..wire.contract import RankContract
from ..wire.pipe_assignment import PipeAssignment
from .fifo_plan import PipeChannel, assign_pipes
from .program import ProgramLaunch
from .shape import JobShape

__all__ = ["Companion", "Coordination", "JobEnd", "KindInputs", "KindPlan", "RankSignals"]


class RankSignals(enum.Enum):
    """How a signal `train` gets (or the master passes on) reaches the ranks on this host."""

    RANK_LAUNCHERS = "rank-launchers"  # to each rank launcher under mpirun/orted (mpirun would not pass them on)
    PROGRAM_TREE = "program-tree"  # to this host's program and what it started


class JobEnd(enum.Enum):
    """When the job has ended."""

    MASTER_PROGRAM = "master-program"  # the master's program ended (mpirun; a coordinator): the rest is stopped
    EVERY_PROGRAM = "every-program"  # every host's program ended (each worker says `done`)


class Companion(NamedTuple):
    """A process this host starts beside its program once the job starts and stops when it ends."""

    name: str  # for the log: "parameter server"
    host: str
    argv: tuple[str, ...]  # under the rank launcher, so that its failure reaches the master
    env_set: Mapping[str, str]  # added to the program's environment (its own TF_CONFIG, say)
    rank: int  # its number on the control channel
    describe: str  # how the log and a failure name it

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "host": self.host, "argv": list(self.argv), "env": dict(self.env_set), "rank": self.rank,
                "describe": self.describe}


class Coordination(NamedTuple):
    """This host's part in a job the master's control server watches (absent for a program on its own)."""

    master: str
    workers: tuple[str, ...]  # the hosts whose `train` the master waits for, hears from and tells the end
    control_bind: str  # all interfaces when there are workers, loopback alone otherwise
    control_port: int
    peer_wait_s: float
    heartbeat_timeout_s: float
    sshd_argv: tuple[str, ...]  # what this worker serves before its hello (for the master's mpirun); or empty
    sshd_port: int  # where that sshd listens (0: none)
    ssh_dir: str  # the job's ssh keys (smtrain.wire.ssh_trust): the master makes the job's key pair there and
    #               gives its public half to each worker, which trusts it alone; empty: no host logs into another
    contract: Optional[RankContract]  # this host's program's rank contract, its token set when the job starts;
    #                                   None where the program's environment carries it already (mpirun)
    program_rank: int  # the program's number on the control channel (with `contract`)
    companions: tuple[Companion, ...]  # started on this host once the job starts
    ranks: tuple[tuple[str, int], ...]  # (host, rank) of every process the stall watchdog watches
    rank_names: Mapping[int, str]  # how a failure names a rank's process; others: by rank, local rank, host
    program_name: str  # how a failure names the master's own program
    start_line: str  # what the master logs when it starts its program
    signals: RankSignals
    end: JobEnd
    ends_on_task_failure: bool  # a task's failure ends the job at once (False: the launcher does it, mpirun)
    workers_run_programs: bool  # each worker runs a program of its own and tells its status (`done`)

    def name_rank(self, program: str, rank: int, local_rank: int, host: str) -> str:
        """How the job's failure names the process of a rank's report."""
        return self.rank_names.get(rank) or f"{program} (rank {rank}, local rank {local_rank}, on host {host})"

    def to_json(self) -> dict[str, Any]:
        return {
            "master": self.master,
            "workers": list(self.workers),
            "control": f"{self.control_bind}:{self.control_port}",
            "peer_wait_s": self.peer_wait_s,
            "heartbeat_timeout_s": self.heartbeat_timeout_s,
            "sshd": list(self.sshd_argv),
            "ssh_dir": self.ssh_dir,
            "program_rank": self.program_rank if self.contract is not None else None,
            "companions": [c.to_json() for c in self.companions],
            "ranks": [f"{rank}@{host}" for host, rank in self.ranks],
            "rank_names": {str(rank): name for rank, name in sorted(self.rank_names.items())},
            "signals": self.signals.value,
            "end": self.end.value,
            "ends_on_task_failure": self.ends_on_task_failure,
            "workers_run_programs": self.workers_run_programs,
        }


class KindPlan(NamedTuple):
    """What a distribution kind's planner decides: how this host's part starts and which FIFOs its ranks read."""

    argv: tuple[str, ...]  # this host's program (mpirun on an MPI master); empty: none of its own
    env_set: dict[str, str]
    pipes: tuple[PipeAssignment, ...]
    ranks_per_host: int
    first_rank: int  # this host's first rank (mpirun's by-slot order)
    coordination: Optional[Coordination] = None  # None: a program on its own


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

    def pipes(self, ranks_per_host: int = 1, mpi: bool = False, world_size: int = 0) -> tuple[PipeAssignment, ...]:
        """Every Pipe channel's FIFOs, and those of the File channels read as Pipe channels."""
        channels = [PipeChannel(c.name, c.record_format, c.shuffle_seed is not None)
                    for c in self.config.channels if c.mode is InputMode.PIPE or c.name in self.emulated]
        return assign_pipes(channels, self.config.paths.input_data_dir, ranks_per_host, mpi, world_size)

    def coordination(self, **decided: Any) -> Coordination:
        """A Coordination with what every kind takes from the config and the shape, plus `decided`."""
        config, shape = self.config, self.shape
        common: dict[str, Any] = dict(
            master=shape.master, workers=shape.workers,
            control_bind="0.0.0.0" if len(shape.hosts) > 1 else "127.0.0.1", control_port=config.control_port,
            peer_wait_s=config.peer_wait_s, heartbeat_timeout_s=config.heartbeat_timeout_s,
            sshd_argv=(), sshd_port=0, ssh_dir="", contract=None, program_rank=0, companions=(), rank_names={},
        )
        return Coordination(**{**common, **decided})
