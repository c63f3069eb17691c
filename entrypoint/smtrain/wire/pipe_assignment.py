"""How a rank finds its Pipe-mode FIFOs: the assignment of one channel (planned by smtrain.plan.fifo_plan,
carried to the ranks in their RankContract) and the environment that tells the program about it.

For every Pipe channel `C` the program reads:

    SM_PIPE_<C>            the FIFO prefix; epoch e at `<prefix>_<e>`
    SM_PIPE_FORMAT_<C>     tfrecord, recordio or lines
    SM_PIPE_MODE_<C>       direct, per-rank or demux (the host's demultiplexer deals it to the ranks)
    SM_PIPE_SHUFFLED_<C>   1 when the channel has a ShuffleConfig (its records come in a new order
                           every epoch: a resumed epoch drops the consumed ones by fingerprint), else 0
    SM_PIPE_DEALT_<C>      job where the demultiplexers deal its records across the job's hosts, host where
                           across this host's ranks alone, none where the rank reads its FIFO whole
"""
from __future__ import annotations

import enum
from pathlib import Path
from typing import Mapping, NamedTuple, Sequence

from .record_format import RecordFormat

DEMUX_FOLDER = ".smtrain-pipes"

__all__ = ["DEMUX_FOLDER", "JobAddress", "PipeAssignment", "PipeMode", "consumed_handoff", "demux_folder", "demux_prefix", "pipe_env",
           "channel_mode", "pipe_variable", "rank_ended_marker", "restart_ack"]


class PipeMode(enum.Enum):
    """How a channel reaches the ranks: one FIFO, per-rank channels, or the demultiplexer."""
    DIRECT = "direct"
    PER_RANK = "per-rank"
    DEMUX = "demux"


class PipeAssignment(NamedTuple):
    """Which FIFOs each rank reads for one channel."""
    channel: str  # the logical channel the program asks for
    mode: PipeMode
    record_format: RecordFormat
    prefix: str  # "{local_rank}" / "{rank}" in it are replaced by each rank's local / global rank
    shuffled: bool = False  # the channel has a ShuffleConfig
    by_job: bool = False  # dealt across the job's hosts (not only this host's ranks)

    @property
    def dealt(self) -> str:
        """SM_PIPE_DEALT_<C>: job, host or none."""
        if self.mode is not PipeMode.DEMUX:
            return "none"
        return "job" if self.by_job else "host"

    def for_rank(self, local_rank: int, rank: int = 0) -> str:
        """The FIFO prefix of a rank of this host."""
        return self.prefix.replace("{local_rank}", str(local_rank)).replace("{rank}", str(rank))

    def to_list(self) -> list[object]:
        return [self.channel, self.mode.value, self.record_format.value, self.prefix, self.shuffled, self.by_job]

    @classmethod
    def from_list(cls, raw: Sequence[object]) -> "PipeAssignment":
        channel, mode, fmt, prefix, *rest = raw
        return cls(str(channel), PipeMode(mode), RecordFormat(fmt), str(prefix), bool(rest[0]) if rest else False,
                   bool(rest[1]) if len(rest) > 1 else False)


class JobAddress(NamedTuple):
    """What a demultiplexer of a channel dealt across the job's hosts needs to agree with the others
    (smtrain.data.job_dealing): the master's control server, this host, how many hosts deal it and the
    global rank of this host's local rank 0."""
    control_host: str
    control_port: int
    host: str
    hosts: int
    first_rank: int

    def to_arg(self) -> str:
        """As the demultiplexer's `--job` takes it."""
        return f"{self.control_host}:{self.control_port}:{self.host}:{self.hosts}:{self.first_rank}"

    @classmethod
    def parse(cls, arg: str) -> "JobAddress":
        control_host, port, host, hosts, first_rank = arg.rsplit(":", 4)
        return cls(control_host, int(port), host, int(hosts), int(first_rank))


def pipe_variable(suffix: str, channel: str) -> str:
    """The name of a channel's variable: suffix "" (the prefix), "FORMAT", "MODE", "SHUFFLED" or "DEALT"."""
    return f"SM_PIPE_{suffix + '_' if suffix else ''}{channel.upper()}"


def pipe_env(assignments: Sequence[PipeAssignment], local_rank: int, rank: int = 0) -> dict[str, str]:
    """The SM_PIPE_* variables of one rank."""
    env = {}
    for a in assignments:
        env[pipe_variable("", a.channel)] = a.for_rank(local_rank, rank)
        env[pipe_variable("FORMAT", a.channel)] = a.record_format.value
        env[pipe_variable("MODE", a.channel)] = a.mode.value
        env[pipe_variable("SHUFFLED", a.channel)] = "1" if a.shuffled else "0"
        env[pipe_variable("DEALT", a.channel)] = a.dealt
    return env


def channel_mode(channel: str, environ: Mapping[str, str]) -> PipeMode:
    """The mode `train` exported for `channel` (direct when none was: a FIFO read outside a job of `train`)."""
    try:
        return PipeMode(environ.get(pipe_variable("MODE", channel), PipeMode.DIRECT.value))
    except ValueError:
        return PipeMode.DIRECT


def demux_folder(data_dir: Path) -> Path:
    """Where the demultiplexers make the ranks' FIFOs."""
    return data_dir / DEMUX_FOLDER


def demux_prefix(data_dir: Path, channel: str, local_rank: "int | str") -> Path:
    """Where the demultiplexer puts local rank `local_rank`'s FIFOs of `channel` (epoch e at `_<e>`)."""
    return demux_folder(data_dir) / f"{channel}-{local_rank}"


def consumed_handoff(prefix: "str | Path") -> Path:
    """Where a rank whose FIFOs start at `prefix` (a demultiplexer's) leaves, before it opens FIFO 0
    after a restart, the fingerprints of the records it consumed of a shuffled channel's interrupted
    epoch: the demultiplexer leaves those out of what it deals (smtrain.data.fingerprints' bytes)."""
    return Path(f"{prefix}.consumed")


def restart_ack(data_dir: Path, channel: str) -> Path:
    """The file by which a demultiplexer of SageMaker's FIFOs says it is ready for a restart in place
    (smtrain.data.demux_restarts)."""
    return demux_folder(data_dir) / f".restarted-{channel}"


def rank_ended_marker(folder: Path, local_rank: int) -> Path:
    """The file a rank launcher writes into the demultiplexers' `folder` when its program has ended:
    they then know that this rank will open none of its FIFOs."""
    return folder / f".ended-{local_rank}"
