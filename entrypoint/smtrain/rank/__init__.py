"""The rank launcher (`python -m smtrain.rank -- PROGRAM ...`), which mpirun (or `train`, for a TF
strategy's tasks) starts for every rank: its environment, what it reports to the master, and the
watch on the program's stderr (tracebacks; Horovod's stall inspector)."""

# Submodules are imported where they are used, never here: a process loads only what its role needs.
__all__ = ["collectives", "launcher", "reporter", "startup_hook", "watch"]
