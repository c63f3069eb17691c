"""Which FIFOs each rank reads (pure). The rules (docs/guide.md, "Pipe mode"):

- Without MPI, or one process per host: the program reads each Pipe channel `C` directly.
- Per-rank channels, read by one rank each, directly and in full: a group `C-0 ... C-(N-1)` or
  `C_0 ... C_(N-1)` (AWS's Horovod + Pipe-mode examples) all in Pipe mode, numbered by global rank
  (N = the job's ranks, more than one host's) or else by local rank (N = ranks per host). Rank r
  reads its own member as `C` (`SM_PIPE_C`) and under its own name (`SM_PIPE_C_0` ...: every member
  is a direct channel, read by whichever rank asks for it). A channel of the same name as a group's
  `C` is left to the group.
- Every other Pipe channel under MPI with P >= 2 processes per host: the host's demultiplexer
  (smtrain.data.demux) reads `C` and deals its records to the local ranks that read it. Which ranks
  read it it learns from the ranks themselves: before the first epoch, it waits until every local
  rank has opened its FIFO or ended (the rank launcher marks the end, smtrain.wire.pipe_assignment.rank_ended_marker). A channel
  that one rank reads is passed to it as it comes; one that no rank reads is never opened.
- A channel `across` the job's hosts (FullyReplicated, MPI on several hosts, SMTRAIN_PIPE_DEALING=job: every
  host receives the whole stream): the demultiplexer deals it to the job's readers, every host alike, its
  own ranks' blocks to them (smtrain.data.job_dealing) - with P = 1 too, where the rank would otherwise read
  SageMaker's FIFO whole.
- Where restarts in place are asked for, SageMaker's own Pipe channels that a program would read
  directly (`relayed`) go through a demultiplexer too, to its one reader - each member of a per-rank
  group that a local rank reads through one of its own (`relays`): a restart then takes SageMaker's
  next epoch as FIFO 0 (smtrain.data.demux_restarts).

Every rank finds its FIFO prefix in `SM_PIPE_<C>` (epoch e at `<prefix>_<e>`) and the record
format in `SM_PIPE_FORMAT_<C>`. The rank launcher gets the assignments in its RankContract (smtrain.wire.contract);
the names of the variables and FIFOs are in smtrain.wire.pipe_assignment.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Mapping, NamedTuple, Optional, Sequence

from ..config.settings import PIPE_DEALING
from ..wire.pipe_assignment import DEMUX_FOLDER, JobAddress, PipeAssignment, PipeMode, demux_prefix
from ..wire.record_format import RecordFormat

_RANK_CHANNEL = re.compile(r"^(.+?)([-_])(0|[1-9][0-9]*)$")

__all__ = ["DemuxSpec", "PipeChannel", "assign_pipes", "dealing_notes", "demux_specs", "relayed_member", "relays"]


class PipeChannel(NamedTuple):
    """A channel read through FIFOs: its name, record format and whether it is shuffled."""
    name: str
    record_format: RecordFormat
    shuffled: bool = False  # it has a ShuffleConfig
    relayed: bool = False  # SageMaker's own, where restarts in place are asked for: never read directly


class _Group(NamedTuple):
    """Per-rank channels `<name><sep><number>`, numbered by `by` ("rank" or "local_rank")."""

    name: str
    sep: str
    by: str
    members: tuple[str, ...]


def _rank_groups(names: Sequence[str], ranks_per_host: int, world_size: int) -> list[_Group]:
    numbers: dict[tuple[str, str], set[int]] = {}
    for name in names:
        match = _RANK_CHANNEL.match(name)
        if match:
            numbers.setdefault((match.group(1), match.group(2)), set()).add(int(match.group(3)))
    groups = []
    for (name, sep), found in sorted(numbers.items()):
        if world_size > ranks_per_host and found >= set(range(world_size)):
            by, count = "rank", world_size
        elif found >= set(range(ranks_per_host)):
            by, count = "local_rank", ranks_per_host
        else:
            continue
        groups.append(_Group(name, sep, by, tuple(f"{name}{sep}{r}" for r in range(count))))
    return groups


def assign_pipes(channels: Sequence[PipeChannel], data_dir: Path, ranks_per_host: int, mpi: bool,
                 world_size: int = 0, across: frozenset[str] = frozenset()) -> tuple[PipeAssignment, ...]:
    """`world_size`: the job's ranks (default: one host's); `across`: the channels dealt across the job's hosts."""
    def direct(c: PipeChannel) -> PipeAssignment:
        return PipeAssignment(c.name, PipeMode.DIRECT, c.record_format, str(data_dir / c.name), c.shuffled)

    def dealt(c: PipeChannel) -> PipeAssignment:
        prefix = str(demux_prefix(data_dir, c.name, "{local_rank}"))
        return PipeAssignment(c.name, PipeMode.DEMUX, c.record_format, prefix, c.shuffled, c.name in across)

    if not mpi:
        return tuple(dealt(c) if c.relayed else direct(c) for c in channels)
    by_name = {c.name: c for c in channels}
    groups = _rank_groups(list(by_name), ranks_per_host, max(world_size, ranks_per_host))
    relayed = {m for g in groups for m in g.members if all(by_name[n].relayed for n in g.members)}
    assignments = [
        PipeAssignment(g.name, PipeMode.PER_RANK, by_name[g.members[0]].record_format,
                       _member_prefix(data_dir, f"{g.name}{g.sep}{{{g.by}}}", g.members[0] in relayed),
                       any(by_name[m].shuffled for m in g.members))
        for g in groups
    ]
    taken = {g.name for g in groups}
    members = {m for g in groups for m in g.members}
    for c in channels:
        if c.name in taken:
            continue
        if c.name in members:
            assignments.append(direct(c)._replace(prefix=_member_prefix(data_dir, c.name, c.name in relayed)))
        elif ranks_per_host == 1 and not c.relayed and c.name not in across:
            assignments.append(direct(c))
        else:
            assignments.append(dealt(c))
    return tuple(assignments)


def _member_prefix(data_dir: Path, member: str, relayed: bool) -> str:
    """Where a per-rank channel's member is read: SageMaker's FIFOs, or its relay's (`relays`)."""
    return str(demux_prefix(data_dir, member, 0) if relayed else data_dir / member)


def relays(assignments: Sequence[PipeAssignment], ranks_per_host: int,
           first_rank: int) -> tuple[tuple[str, RecordFormat], ...]:
    """The members of relayed per-rank groups that this host's ranks read (local rank l is global rank
    `first_rank` + l), with their record format: each gets a demultiplexer of its own, to its one reader."""
    return tuple((member, a.record_format)
                 for a in assignments if a.mode is PipeMode.PER_RANK and relayed_member(a.prefix) is not None
                 for local in range(ranks_per_host)
                 if (member := relayed_member(a.for_rank(local, first_rank + local))) is not None)


def relayed_member(prefix: str) -> Optional[str]:
    """The per-rank channel member whose relay's FIFOs start at `prefix` (`_member_prefix`), else None."""
    path = Path(prefix)
    return path.name[:-len("-0")] if path.parent.name == DEMUX_FOLDER and path.name.endswith("-0") else None


def dealing_notes(assignments: Sequence[PipeAssignment], distribution: Mapping[str, Optional[str]], ranks_per_host: int,
                  hosts: int) -> tuple[str, ...]:
    """What the log says at the start (and `train --dry-run` shows) of how each Pipe channel's records reach the
    ranks: on this host (the assignment), and across `hosts` (SageMaker's `S3DistributionType`, by channel)."""
    notes = []
    for a in assignments:
        sharded = (distribution.get(a.channel) or "FullyReplicated") == "ShardedByS3Key"
        if a.mode is PipeMode.PER_RANK:
            how = "one channel per rank, each read whole by its rank"
        elif a.by_job:
            how = (f"every host receives the whole channel (FullyReplicated) and deals it alike, in whole records, to "
                   f"the job's ranks that open it, over its {hosts} hosts: each record reaches one rank an epoch, every "
                   "rank the same count (at most one fewer than the readers left out an epoch); a .shard() on a "
                   f"PipeModeDataset is ignored ({PIPE_DEALING.variable}=host: each host's ranks share the whole channel)")
        elif a.mode is PipeMode.DEMUX and ranks_per_host > 1:
            how = (f"dealt in whole records to those of this host's {ranks_per_host} ranks that open it, in equal "
                   f"counts (at most {ranks_per_host - 1} records an epoch left out)")
        else:
            how = "read whole, as it comes, by the one process that opens it"
        if hosts > 1 and a.mode is not PipeMode.PER_RANK and not a.by_job:
            if sharded:
                how += ("; this host receives its own share of the objects (ShardedByS3Key): hosts' counts may "
                        "differ (pipes.equal_steps)")
            else:
                how += ("; every host receives the whole channel (FullyReplicated) and reads it whole: a script that "
                        "trains one model on several hosts shards it by host (docs/guide.md, Pipe mode), or TF's "
                        "tf.distribute auto-sharding does")
        notes.append(f"Pipe channel {a.channel}: {how}")
    return tuple(notes)


class DemuxSpec(NamedTuple):
    """A demultiplexer this host runs beside its ranks (smtrain.data.demux): one channel's FIFOs in
    `data_dir`, dealt to `ranks` local readers."""
    data_dir: Path
    channel: str
    ranks: int
    record_format: RecordFormat
    restartable: bool  # SageMaker's own FIFOs: it keeps running and serves restarts in place
    job: Optional[JobAddress] = None  # dealt across the job's hosts: how it agrees with the other hosts

    @property
    def name(self) -> str:
        """Its helper process's name."""
        return f"demultiplexer {self.channel}"

    @property
    def args(self) -> tuple[str, ...]:
        """Its arguments (plan.helper_plan runs it)."""
        return ("--data", str(self.data_dir), "--channel", self.channel, "--ranks", str(self.ranks),
                "--format", self.record_format.value, *(("--restartable",) if self.restartable else ()),
                *(("--job", self.job.to_arg()) if self.job is not None else ()))


def demux_specs(pipes: tuple[PipeAssignment, ...], data_dir: Path, ranks: int,
                restartable: frozenset[str] = frozenset(),
                relayed: tuple[tuple[str, RecordFormat], ...] = (), job: Optional[JobAddress] = None
                ) -> tuple[DemuxSpec, ...]:
    """The demultiplexers of this host, one a dealt channel; those in `restartable` (SageMaker's own
    FIFOs, where restarts in place are asked for) serve restarts (smtrain.data.demux_restarts); those
    dealt across the job's hosts agree through `job`; and one for each per-rank channel in `relayed`, to
    its one reader (`relays`)."""
    return (*(DemuxSpec(data_dir, a.channel, ranks, a.record_format, a.channel in restartable,
                        job if a.by_job else None)
              for a in pipes if a.mode is PipeMode.DEMUX),
            *(DemuxSpec(data_dir, member, 1, fmt, True) for member, fmt in relayed))
