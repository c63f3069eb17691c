"""What goes to S3 while the job runs: the intermediate output (`intermediate_output`), on every host."""

# Submodules are imported where they are used, never here: a process loads only what its role needs.
__all__ = ["intermediate_output"]
