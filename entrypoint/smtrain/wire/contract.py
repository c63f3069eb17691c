"""The master-to-rank contract: everything a rank launcher needs from the master's `train`, as one
typed value.

It travels to every rank in one environment variable (`RANK_CONTRACT_ENV`), named on mpirun's `-x`
list so that its value (the control token among it) is on no command line. The rank launcher reads
it and removes it before the program starts: the program never sees the control token. Every other
variable, the toolkit's documented settings (`SMTRAIN_S3_*`, `SMTRAIN_NATIVE_PIPES`) among them, reaches
the program, where the s3:// file system and the Pipe reader read them.
"""
from __future__ import annotations

import json
from typing import Mapping, NamedTuple, Optional

from .pipe_assignment import PipeAssignment

RANK_CONTRACT_ENV = "SMTRAIN_RANK_CONTRACT"
INTERNAL_VARIABLES = frozenset({RANK_CONTRACT_ENV})  # what the program never sees

__all__ = ["INTERNAL_VARIABLES", "RANK_CONTRACT_ENV", "RankContract", "without_internals"]


class RankContract(NamedTuple):
    """What the master tells every rank launcher: where to report, the token, the grace period, the FIFOs."""
    control_host: str  # where the master's control server listens
    control_port: int
    token: str  # authenticates this job's rank reports
    grace_period_s: float  # between a shutdown signal and SIGKILL
    pipes: tuple[PipeAssignment, ...]  # which FIFOs each local rank reads
    rank: int = -1  # the task's number where mpirun gives none (TF strategy jobs: plan.tfconfig.Task)
    stall_timeout_s: float = 0.0  # the stall watchdog's timeout (0: off); sets Horovod's stall inspector
    output: bool = False  # send the program's stdout and stderr to the control server (smtrain.run.rank_output)
    # How the rank's starter tells a rank who it is: (the program's variable, the variable the starter sets),
    # as SM_RANK from mpirun's rank; none where the contract's `rank` says it (TF strategy tasks)
    identity: tuple[tuple[str, str], ...] = ()
    # Set unless set where a host runs several ranks without GPUs: what makes a rank waiting in the starter's
    # transport yield its core to the ranks' compute (mpirun's: Open MPI's idle yield)
    waiting_yields: tuple[tuple[str, str], ...] = ()

    def to_json(self) -> str:
        """The contract as JSON: its fields by name (the FIFOs as lists)."""
        return json.dumps({**self._asdict(), "pipes": [a.to_list() for a in self.pipes]}, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> "RankContract":
        """A contract from its JSON (the rank's environment variable); a field it lacks keeps its default."""
        raw = json.loads(text)
        raw["pipes"] = tuple(PipeAssignment.from_list(a) for a in raw["pipes"])
        for pairs in ("identity", "waiting_yields"):
            raw[pairs] = tuple(tuple(pair) for pair in raw.get(pairs, ()))
        return cls(**{name: raw[name] for name in cls._fields if name in raw})

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> Optional["RankContract"]:
        """The contract, or None when the launcher runs outside a job of `train` (by hand, in a test)."""
        text = environ.get(RANK_CONTRACT_ENV)
        return cls.from_json(text) if text else None


def without_internals(environ: Mapping[str, str]) -> dict[str, str]:
    """A copy of `environ` without the toolkit's internal variables (the rank contract)."""
    return {k: v for k, v in environ.items() if k not in INTERNAL_VARIABLES}
