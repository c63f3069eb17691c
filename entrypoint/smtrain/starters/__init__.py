"""The ways the job's ranks start (smtrain.starters.base.RankStarter), each one module or package: a
kind's planner gives one in the plan, and the master and worker roles (smtrain.run) call its steps.
`every_host`: each host starts its own program; `mpirun`: the master's mpirun starts every rank, on
the workers through their sshd."""

# Submodules are imported where they are used, never here: a process loads only what its role needs.
__all__ = ["base", "every_host", "mpirun"]
