"""The profiler: the per-host system monitor (smdebug's system-metrics files), every rank's step
recorder and the hooks that feed it (smdebug's framework events), the rules in the spirit of
SageMaker Debugger's, and the HTML report (`train report`, and at every job's end)."""

# Submodules are imported where they are used, never here: a process loads only what its role needs.
__all__ = ["digest_files", "digests", "events", "hooks", "job_report", "monitor", "plots", "report_html", "rules", "shipping",
           "step_files", "steprules", "steps", "timeline"]
