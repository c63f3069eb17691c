"""The master's mpirun starts every rank (starter.Mpirun, the policy of plan.mpirun_command.MpirunSpec), with
what it needs of the hosts: the workers' sshd (sshd), the job's ssh keys (keys), the connections held for
every attempt's mpirun (holds) and signals to the ranks' launchers on each host (rank_signals)."""

# Submodules are imported where they are used, never here: a process loads only what its role needs.
__all__ = ["holds", "keys", "rank_signals", "sshd", "starter"]
