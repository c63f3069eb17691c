"""The product's own programs, each declared once: its name, the module `python -m` runs, and who starts it.
Every command line that starts one is built by its `Program.argv`, so that no module string is written
anywhere else. The helper processes' programs are declared with the rest of their helper (plan.helper_plan); the
ones here are those the ranks' starters and `train` itself run."""
from __future__ import annotations

from typing import NamedTuple

__all__ = ["PROGRAMS", "Program", "RANK_LAUNCHER", "TF_SERVER", "TRAIN"]


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
TF_SERVER = Program("parameter server", "smtrain.run.tfserver", "train beside the program, on parameter-server hosts")

PROGRAMS: tuple[Program, ...] = (TRAIN, RANK_LAUNCHER, TF_SERVER)
