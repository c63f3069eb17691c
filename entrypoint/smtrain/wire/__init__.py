"""The bottom layer: the typed values that cross process boundaries (between `train`, the rank
launchers, the demultiplexers and the program) and how they are written down. Standard library
only; nothing here imports another part of smtrain, so every layer above may use it."""

# Submodules are imported where they are used, never here: a process loads only what its role needs.
__all__ = ["contract", "control_protocol", "pipe_assignment", "profiler_settings", "progress_file", "rank_failure", "record_format",
           "ssh_trust"]
