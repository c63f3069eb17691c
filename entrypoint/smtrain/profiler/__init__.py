"""The system profiler: the per-host monitor (smdebug's system-metrics files), the rules in the
spirit of SageMaker Debugger's, and the `train report` HTML report."""

# Submodules are imported where they are used, never here: a process loads only what its role needs.
__all__ = ["monitor", "report", "rules"]
