"""How this host takes part in a job across processes or hosts, as a distribution kind's planner
(plan.kinds) decides it and `run` carries it out without knowing the kind: the control channel, the
peers to wait for, how the ranks start (a rank starter's spec, carried out by its policy in smtrain.starters:
how signals reach them, whether a task's failure ends the job, when the job has ended), the processes to start
and how its failures name what failed."""
from __future__ import annotations

import enum
from typing import Any, Mapping, NamedTuple, Optional

from ..wire.contract import RankContract
from .plain import plain

__all__ = ["Companion", "Coordination", "EveryHostSpec", "JobEnd"]


class JobEnd(enum.Enum):
    """When the job has ended."""

    MASTER_PROGRAM = "master-program"  # the master's program ended (its launcher; a coordinator): the rest is stopped
    EVERY_PROGRAM = "every-program"  # every host's program ended (each worker says `done`)


class EveryHostSpec(NamedTuple):
    """A rank starter's spec (the MPI kind's is its own): every host starts its own program (a TF strategy's
    task) when the master starts the job; the job ends as `end` says (smtrain.starters.every_host carries it out)."""

    end: JobEnd
    name: str = "every-host"


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
    straggler_window_s: float  # the live straggler verdict's evidence (smtrain.run.stragglers)
    contract: Optional[RankContract]  # this host's program's rank contract, its token set when the job starts;
    #                                   None where the program's environment carries it already
    program_rank: int  # the program's number on the control channel (with `contract`)
    companions: tuple[Companion, ...]  # started on this host once the job starts
    ranks: tuple[tuple[str, int], ...]  # (host, rank) of every process the stall watchdog watches
    rank_names: Mapping[int, str]  # how a failure names a rank's process; others: by rank, local rank, host
    program_name: str  # how a failure names the master's own program
    start_line: str  # what the master logs when it starts its program
    starter: Any  # how the ranks start: a starter's spec (data; smtrain.starters carries out the one it names)

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
            "straggler_window_s": self.straggler_window_s,
            "program_rank": self.program_rank if self.contract is not None else None,
            "companions": [c.to_json() for c in self.companions],
            "ranks": [f"{rank}@{host}" for host, rank in self.ranks],
            "rank_names": {str(rank): name for rank, name in sorted(self.rank_names.items())},
            "starter": plain(self.starter),
        }
