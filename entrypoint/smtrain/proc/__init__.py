"""Processes on one host: the supervisor (one program in its own session until it and everything it
started are gone), output relays, the toolkit's helper processes and a rank's progress file. Used by
`train` (smtrain.run) and by the rank launcher (smtrain.rank) alike."""

# Submodules are imported where they are used, never here: a process loads only what its role needs.
__all__ = ["helpers", "oom", "rank_progress", "streams", "supervise"]
