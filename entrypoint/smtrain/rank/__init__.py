"""The rank launcher (`python -m smtrain.rank -- PROGRAM ...`), which mpirun starts for every rank,
its contract with the master, and the failure reports it sends."""

# Submodules are imported where they are used, never here: a process loads only what its role needs.
__all__ = ["contract", "launcher", "report", "watch"]
