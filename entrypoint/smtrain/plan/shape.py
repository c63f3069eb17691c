"""The job's shape, decided once for every host: which distribution kind runs, which hosts take part in
it, its master, and this host's part - by sagemaker-training 5.1.4's rules, heterogeneous clusters
included.

The distribution's instance groups are `sagemaker_distribution_instance_groups` (the SDK writes it from
`distribution={..., "instance_groups": [...]}`), else the current group when a distribution is on; its
hosts are those groups' hosts (every host when resourceconfig.json names no groups) and its master the
first of them. A host outside the distribution runs its program on its own (sagemaker-training's
Process runner), also in an MPI job; MPI and the TF strategies span the distribution's hosts only.
"""
from __future__ import annotations

import enum
from typing import Any, Mapping, NamedTuple, Sequence

from ..config.model import InstanceGroup, Strategy, TrainingConfig

__all__ = ["DISTRIBUTION_FLAGS", "Distribution", "JobShape", "Role", "distribution_groups", "distribution_hosts",
           "job_shape"]

# sagemaker-training puts the current instance group in the distribution when one of these is on:
# MPI's, each TF strategy's (config.model.Strategy) and those of the libraries this image does not serve.
DISTRIBUTION_FLAGS = (
    "sagemaker_mpi_enabled",
    *(strategy.hyperparameter for strategy in Strategy),
    "sagemaker_distributed_dataparallel_enabled",
    "sagemaker_pytorch_ddp_enabled",
    "sagemaker_pytorch_xla_multi_worker_enabled",
    "sagemaker_torch_distributed_enabled",
)


class Distribution(enum.Enum):
    """How the job's processes work together."""

    SINGLE = "single"  # this host runs its program on its own: one host, or outside the distribution's hosts
    MPI = "mpi"  # mpirun starts every rank (Horovod), on one host or several
    MULTI_WORKER_MIRRORED = "multi-worker-mirrored"  # a TF strategy across two or more hosts
    PARAMETER_SERVER = "parameter-server"  # TF parameter servers on two or more hosts


class Role(enum.Enum):
    """This host's part in the job."""

    SINGLE = "single"  # one host, or a host running its own copy (outside the distribution)
    MASTER = "master"  # runs mpirun for the whole job, or watches a TF strategy job and runs its part
    WORKER = "worker"  # serves the master's ranks (MPI) or runs its part of a TF strategy job; follows the job


class JobShape(NamedTuple):
    """What every host of the job decides alike (only `role` differs between them)."""

    distribution: Distribution  # the kind that runs on this host
    role: Role  # this host's part
    groups: tuple[str, ...]  # the distribution's instance groups (sagemaker-training's distribution_instance_groups)
    hosts: tuple[str, ...]  # the hosts that take part, master first (sagemaker-training's distribution_hosts)
    master: str  # the first of them; the job's first host when no distribution is on

    @property
    def workers(self) -> tuple[str, ...]:
        """The hosts besides the master that take part; their `train` meets the master's."""
        return self.hosts[1:] if self.role is not Role.SINGLE else ()

    def to_json(self) -> dict[str, Any]:
        return {"distribution": self.distribution.value, "role": self.role.value, "instance_groups": list(self.groups),
                "hosts": list(self.hosts), "master": self.master}


def distribution_groups(framework: Mapping[str, Any], current_group: str, mpi: bool = False) -> list[Any]:
    """`sagemaker_distribution_instance_groups`, else the current group when a distribution is on (one of
    DISTRIBUTION_FLAGS, or `mpi`: SDK v3's ModelTrainer asks for MPI in its own files, not by a flag)."""
    if "sagemaker_distribution_instance_groups" in framework:
        return list(framework["sagemaker_distribution_instance_groups"])
    return [current_group] if mpi or any(framework.get(flag, False) for flag in DISTRIBUTION_FLAGS) else []


def distribution_hosts(instance_groups: Sequence[InstanceGroup], groups: Sequence[Any],
                       hosts: Sequence[str]) -> list[str]:
    """The hosts of the distribution's instance groups; every host when the job has no groups."""
    if instance_groups:
        return [h for g in instance_groups if g.name in groups for h in g.hosts]
    return list(hosts)


def job_shape(config: TrainingConfig) -> JobShape:
    """The job's shape from the config's facts (sagemaker-training's Environment and trainer.train)."""
    resources = config.resources
    groups = distribution_groups(config.framework_parameters, resources.current_group_name, config.mpi.enabled)
    hosts = distribution_hosts(resources.instance_groups, groups, resources.hosts)
    here = resources.current_host
    master = hosts[0] if hosts else resources.hosts[0]
    if config.mpi.enabled and resources.current_group_name in groups and hosts:
        distribution = Distribution.MPI
    elif config.strategy is not None and len(hosts) >= 2 and here in hosts:
        distribution = Distribution[config.strategy.name]  # each TF strategy runs as the kind of its name
    else:
        distribution = Distribution.SINGLE
    if distribution is Distribution.SINGLE:
        role = Role.SINGLE
    else:
        role = Role.MASTER if here == master else Role.WORKER
    return JobShape(distribution, role, tuple(str(g) for g in groups), tuple(hosts), master)
