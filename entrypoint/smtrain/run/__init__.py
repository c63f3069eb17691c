"""Running a plan on this host (effects): the supervisor, signals, output streams, outcome, the
single-host, master and worker roles, the control channel between hosts, sshd and the helpers."""

# Submodules are imported where they are used, never here: a process loads only what its role needs.
__all__ = ["codesetup", "control", "helpers", "master", "outcome", "single", "sshd", "streams", "supervise", "worker"]
