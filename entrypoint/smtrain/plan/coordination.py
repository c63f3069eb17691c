"""How this host takes part in a job across processes or hosts, as a distribution kind's planner
(plan.kinds) decides it and `run` carries it out without knowing the kind: the control channel, the
peers to wait for, who starts the ranks (and so how signals reach them and whether a task's failure
ends the job), the processes to start, when the job has ended and how its failures name what failed."""
from __future__ import annotations

import enum
from typing import Any, Mapping, NamedTuple, Optional

from ..wire.contract import RankContract

__all__ = ["Companion", "Coordination", "JobEnd", "RankSignals", "RankStarter"]


class RankStarter(enum.Enum):
    """Who starts the job's ranks; the rest of how the hosts work together follows from it."""

    MPIRUN = "mpirun"  # the master's mpirun starts every rank, on the workers through their sshd
    EVERY_HOST = "every-host"  # each host starts its own program (a TF strategy's task) when the job starts

    @property
    def signals(self) -> "RankSignals":
        """How a signal reaches the ranks on this host."""
        return RankSignals.RANK_LAUNCHERS if self is RankStarter.MPIRUN else RankSignals.PROGRAM_TREE

    @property
    def ends_on_task_failure(self) -> bool:
        """A task's failure ends the job at once (under mpirun, the rank's launcher ends it)."""
        return self is RankStarter.EVERY_HOST

    @property
    def workers_run_programs(self) -> bool:
        """Each worker runs a program of its own and tells its status (`done`)."""
        return self is RankStarter.EVERY_HOST


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
    ssh_held: tuple[str, ...]  # the workers the master holds an ssh connection to for the job, which mpirun's
    #                            sessions share (where restarts in place are asked for: run.ssh_hold)
    contract: Optional[RankContract]  # this host's program's rank contract, its token set when the job starts;
    #                                   None where the program's environment carries it already (mpirun)
    program_rank: int  # the program's number on the control channel (with `contract`)
    companions: tuple[Companion, ...]  # started on this host once the job starts
    ranks: tuple[tuple[str, int], ...]  # (host, rank) of every process the stall watchdog watches
    rank_names: Mapping[int, str]  # how a failure names a rank's process; others: by rank, local rank, host
    program_name: str  # how a failure names the master's own program
    start_line: str  # what the master logs when it starts its program
    starter: RankStarter  # who starts the ranks: mpirun from the master, or each host its own program
    end: JobEnd

    def name_rank(self, program: str, rank: int, local_rank: int, host: str) -> str:
        """How the job's failure names the process of a rank's report."""
        return self.rank_names.get(rank) or f"{program} (rank {rank}, local rank {local_rank}, on host {host})"

    def to_json(self) -> dict[str, Any]:
        """As `train --dry-run` shows it."""
        return {
            "master": self.master,
            "workers": list(self.workers),
            "control": f"{self.control_bind}:{self.control_port}",
            "peer_wait_s": self.peer_wait_s,
            "heartbeat_timeout_s": self.heartbeat_timeout_s,
            "sshd": list(self.sshd_argv),
            "ssh_dir": self.ssh_dir,
            "ssh_held": list(self.ssh_held),
            "program_rank": self.program_rank if self.contract is not None else None,
            "companions": [c.to_json() for c in self.companions],
            "ranks": [f"{rank}@{host}" for host, rank in self.ranks],
            "rank_names": {str(rank): name for rank, name in sorted(self.rank_names.items())},
            "starter": self.starter.value,
            "signals": self.starter.signals.value,
            "end": self.end.value,
            "ends_on_task_failure": self.starter.ends_on_task_failure,
            "workers_run_programs": self.starter.workers_run_programs,
        }
