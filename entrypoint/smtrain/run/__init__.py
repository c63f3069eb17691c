"""Running a plan on this host (effects): the job skeleton (job), the roles (single, master, worker),
the policy of each distribution kind (policy, kinds), the outcome and its rendering (outcome), the
control server (control_server) and a worker's link to it (link), the stall watchdog (stall, watchdog), code
set-up, sshd and the TF tasks' helpers."""

# Submodules are imported where they are used, never here: a process loads only what its role needs.
__all__ = ["codesetup", "control_server", "job", "kinds", "link", "master", "outcome", "policy", "psserver", "single", "sshd",
           "stall", "tftasks", "watchdog", "worker"]
