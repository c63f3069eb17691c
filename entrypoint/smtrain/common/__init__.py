"""Small process facilities every process of the toolkit shares: the console (toolkit log lines),
signals as loop events, and the Linux process calls Python's os module lacks."""

# Submodules are imported where they are used, never here: a process loads only what its role needs.
__all__ = ["atomic_file", "console", "frameworks", "linux", "signals"]
