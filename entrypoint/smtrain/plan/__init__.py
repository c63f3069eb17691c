"""Pure planning: from a `TrainingConfig` and the host's facts to what this host does (its role, the
command, each environment variable, helpers, FIFOs). Nothing here starts a process or touches a file;
`train --dry-run` prints the plan."""

# Submodules are imported where they are used, never here: a process loads only what its role needs.
__all__ = ["fifo_plan", "launch", "mpirun_command", "program", "shape", "smenv"]
