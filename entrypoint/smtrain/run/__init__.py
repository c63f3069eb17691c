"""Running a plan on this host (effects), whatever its distribution kind: the job skeleton (job), the
roles (single, master, worker), the outcome and its rendering (outcome), the
control server (control_server) and a worker's link to it (link), the stall watchdog (stall, watchdog), code
set-up and a TF server for TF_CONFIG's task (tfserver). How the ranks start is the plan's rank starter's
(smtrain.starters), whose steps the roles call."""

# Submodules are imported where they are used, never here: a process loads only what its role needs.
__all__ = ["codesetup", "control_server", "job", "link", "master", "outcome", "single", "stall",
           "tfserver", "watchdog", "worker"]
