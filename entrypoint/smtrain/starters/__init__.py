"""The ways the job's ranks start, each a policy that carries out the spec a kind's planner puts in the plan
(registry: which policy for which spec), in two sides (smtrain.starters.policy): the master role consults the
master's, the worker role a worker's (smtrain.run). `every_host`: each host starts its own program; `mpirun`: the master's mpirun
starts every rank, on the workers through their sshd."""

# Submodules are imported where they are used, never here: a process loads only what its role needs.
__all__ = ["every_host", "mpirun", "policy", "registry"]
