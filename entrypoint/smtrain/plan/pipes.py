"""Which FIFOs each rank reads (pure). The rules (shared/DESIGN.md, Contract: Pipe mode):

- Without MPI, or one process per host: the program reads each Pipe channel `C` directly.
- Under MPI with P processes per host, for a logical channel `C`: when channels `C-0 ... C-(P-1)`
  are all in Pipe mode, local rank r reads `C-r` (SageMaker feeds each rank its own channel);
  otherwise the host's demultiplexer (smtrain.data.demux) reads `C` and deals its records to the ranks.

Every rank finds its FIFO prefix in `SM_PIPE_<C>` (epoch e at `<prefix>_<e>`) and the record
format in `SM_PIPE_FORMAT_<C>`. The rank launcher gets the assignments in its RankContract (smtrain.rank.contract).
"""
from __future__ import annotations

import enum
import re
from pathlib import Path
from typing import NamedTuple, Sequence

from ..data.records import RecordFormat

DEMUX_FOLDER = ".smtrain-pipes"
_RANK_CHANNEL = re.compile(r"^(.+)-(\d+)$")


class PipeMode(enum.Enum):
    DIRECT = "direct"
    PER_RANK = "per-rank"
    DEMUX = "demux"


class PipeChannel(NamedTuple):
    name: str
    record_format: RecordFormat


class PipeAssignment(NamedTuple):
    channel: str  # the logical channel the program asks for
    mode: PipeMode
    record_format: RecordFormat
    prefix: str  # "{local_rank}" in it is replaced by each rank's local rank

    def for_rank(self, local_rank: int) -> str:
        return self.prefix.replace("{local_rank}", str(local_rank))


def assign_pipes(channels: Sequence[PipeChannel], data_dir: Path, ranks_per_host: int, mpi: bool) -> tuple[PipeAssignment, ...]:
    by_name = {c.name: c for c in channels}
    if not mpi:
        return tuple(PipeAssignment(c.name, PipeMode.DIRECT, c.record_format, str(data_dir / c.name)) for c in channels)
    logical = {m.group(1) for name in by_name if (m := _RANK_CHANNEL.match(name))}
    per_rank = sorted(x for x in logical if all(f"{x}-{r}" in by_name for r in range(ranks_per_host)))
    members = {f"{x}-{r}" for x in per_rank for r in range(ranks_per_host)}
    assignments = [
        PipeAssignment(x, PipeMode.PER_RANK, by_name[f"{x}-0"].record_format, str(data_dir / f"{x}-{{local_rank}}"))
        for x in per_rank
    ]
    for c in channels:
        if c.name in members or c.name in per_rank:
            continue
        if ranks_per_host == 1:
            assignments.append(PipeAssignment(c.name, PipeMode.DIRECT, c.record_format, str(data_dir / c.name)))
        else:
            prefix = str(data_dir / DEMUX_FOLDER / f"{c.name}-{{local_rank}}")
            assignments.append(PipeAssignment(c.name, PipeMode.DEMUX, c.record_format, prefix))
    return tuple(assignments)


def pipe_env(assignments: Sequence[PipeAssignment], local_rank: int) -> dict[str, str]:
    env = {}
    for a in assignments:
        env[f"SM_PIPE_{a.channel.upper()}"] = a.for_rank(local_rank)
        env[f"SM_PIPE_FORMAT_{a.channel.upper()}"] = a.record_format.value
    return env
