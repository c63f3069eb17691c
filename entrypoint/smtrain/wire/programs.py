"""The product's own programs, each declared once: its name, the module `python -m` runs, and who starts it.
Every command line that starts one is built here (`Program.argv`), so that no module string is written
anywhere else; the layer test (tests/static/test_layers.py) reads this table and holds each program's
module to it."""
from __future__ import annotations

from typing import NamedTuple

__all__ = ["DEMUX", "FEEDER", "INTERMEDIATE_SYNC", "MONITOR", "PROGRAMS", "Program", "RANK_LAUNCHER", "REPORT",
           "TF_SERVER", "TRAIN"]


class Program(NamedTuple):
    """One of the product's programs."""

    name: str  # how the log and the docs name it
    module: str  # what `python -m` runs
    started_by: str  # who starts it, and when

    def argv(self, python: str, *args: str) -> tuple[str, ...]:
        """Its command line, run by `python`."""
        return (python, "-m", self.module, *args)


TRAIN = Program("train", "smtrain", "the container's entry point: SageMaker, `docker run IMAGE train`, SDK v3's drivers")
RANK_LAUNCHER = Program("rank launcher", "smtrain.rank",
                        "mpirun (each rank) or train (each TF strategy task): the program under it reports its end")
DEMUX = Program("demultiplexer", "smtrain.data.demux", "train, beside the ranks: one channel's FIFO dealt to its ranks")
FEEDER = Program("feeder", "smtrain.data.feeder", "train in local mode: File channels streamed as Pipe mode")
MONITOR = Program("system monitor", "smtrain.profiler.monitor", "train on every host, for the whole job")
REPORT = Program("profiler report", "smtrain.profiler.job_report",
                 "train on the master (or alone) at the job's start; it writes the report at the end")
TF_SERVER = Program("parameter server", "smtrain.run.tfserver", "train beside the program, on parameter-server hosts")
INTERMEDIATE_SYNC = Program("intermediate output syncer", "smtrain.sync.intermediate_output",
                            "train on every host, where the job names an S3 output for its intermediate files")

PROGRAMS: tuple[Program, ...] = (TRAIN, RANK_LAUNCHER, DEMUX, FEEDER, MONITOR, REPORT, TF_SERVER, INTERMEDIATE_SYNC)
