"""What this image adds to the environment a program gets, beyond what sagemaker-training 5.1.4 and, for
TensorFlow jobs, sagemaker-tensorflow-training 20.5.0 give it: each variable declared once, with when it is
set and what it means. The reference's table (docs/reference.md) is `markdown_table()`; tests/process/test_internals.py holds a
real job's ranks to it (every variable they get that the toolkits do not give is declared here). `<C>`
stands for a channel's name in capitals."""
from __future__ import annotations

import re
from typing import NamedTuple

from .settings import CHECKPOINT_DIR, CURRENT_HOST, SKIP_TEARDOWN

__all__ = ["ADDED", "ProgramVariable", "declared", "markdown_table"]


class ProgramVariable(NamedTuple):
    """Variables of the program's environment that this image sets (a `<C>` in a name: any channel)."""

    names: tuple[str, ...]
    meaning: str


ADDED: tuple[ProgramVariable, ...] = (
    ProgramVariable(("SM_RANK", "SM_SIZE", "SM_LOCAL_RANK", "SM_LOCAL_SIZE"),
                    f"under MPI, the rank's place in the job and on its host; `{CURRENT_HOST.variable}` and "
                    "`CURRENT_HOST` are the rank's own host"),
    ProgramVariable((CHECKPOINT_DIR.variable,), "the checkpoint folder (`checkpointconfig.json`'s, else `/opt/ml/checkpoints`)"),
    ProgramVariable(("SM_PIPE_<C>", "SM_PIPE_FORMAT_<C>", "SM_PIPE_MODE_<C>", "SM_PIPE_SHUFFLED_<C>",
                     "SM_PIPE_DEALT_<C>"),
                    "each Pipe channel's FIFO prefix for this rank (epoch e is `<prefix>_<e>`), its record format, "
                    "how it is fed (dealt by a demultiplexer, or read directly), whether SageMaker shuffles it, "
                    "whom its records are dealt across (`job`: the job's ranks, `host`: this host's, `none`)"),
    ProgramVariable(("SM_TENSORBOARD_DIR",), "`tensorboardoutputconfig.json`'s `LocalPath`, which SageMaker uploads"),
    ProgramVariable(("SM_PROGRESS_FILE", "PYTHONFAULTHANDLER"),
                    "where the program's progress goes for the stall watchdog; a stalled program's stacks reach the log"),
    ProgramVariable(("SM_FRAMEWORK_PROFILER",), "the step profiler's settings, read by the start-up hook on `PYTHONPATH`"),
    ProgramVariable(("HOROVOD_STALL_CHECK_TIME_SECONDS",),
                    "unless set: a sixth of the stall timeout, 2-10 s, so that Horovod's stall inspector tells which "
                    "rank the others wait for"),
    ProgramVariable(("OMP_NUM_THREADS", "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS"),
                    "unless set, under MPI without GPUs with P >= 2 ranks a host: the host's cores / P each"),
    ProgramVariable(("OMPI_MCA_mpi_yield_when_idle",),
                    "1 unless set, under MPI without GPUs with P >= 2 ranks a host: a rank waiting in MPI (Horovod's "
                    "background thread, every cycle) yields its core to the ranks' compute"),
    ProgramVariable((SKIP_TEARDOWN.variable,), "1 where restarts in place are asked for, unless set"),
    ProgramVariable(("NCCL_SOCKET_IFNAME", "GLOO_SOCKET_IFNAME", "HOROVOD_GLOO_IFACE", "FI_PROVIDER",
                     "FI_EFA_USE_DEVICE_RDMA", "NCCL_PROTO", "NCCL_DEBUG"),
                    "under MPI, the network: the table below"),
)


def declared(name: str, table: tuple[ProgramVariable, ...] = ADDED) -> bool:
    """Whether `name` is one of the declared variables (`SM_PIPE_TRAIN` is `SM_PIPE_<C>`'s)."""
    patterns = [re.escape(n).replace(re.escape("<C>"), "[A-Z0-9_]+") for v in table for n in v.names]
    return any(re.fullmatch(p, name) for p in patterns)


def markdown_table(table: tuple[ProgramVariable, ...] = ADDED) -> str:
    """The reference's table of them (docs/reference.md)."""
    rows = ["| variable | what |", "| --- | --- |"]
    rows += [f"| {', '.join(f'`{n}`' for n in v.names)} | {v.meaning} |" for v in table]
    return "\n".join(rows) + "\n"
