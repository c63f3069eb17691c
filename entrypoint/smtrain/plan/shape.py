"""The job's shape, decided once for every host: which hosts take part in the distribution, its
master, and this host's part - by sagemaker-training 5.1.4's rules, heterogeneous clusters included.
Which kind runs is the kinds' table's business (plan.kinds.choose).

The distribution's instance groups are `sagemaker_distribution_instance_groups` (the SDK writes it from
`distribution={..., "instance_groups": [...]}`), else the current group when a distribution is on; its
hosts are those groups' hosts (every host when resourceconfig.json names no groups) and its master the
first of them. A host outside the distribution runs its program on its own (sagemaker-training's
Process runner), also in an MPI job; MPI and the TF strategies span the distribution's hosts only.
"""
from __future__ import annotations

import enum
from typing import Any, Mapping, NamedTuple, Optional, Protocol, Sequence

from ..config.model import InstanceGroup, TrainingConfig
from ..config.settings import DISTRIBUTION_GROUPS

__all__ = ["JobShape", "Role", "RunsOn", "distribution_groups", "distribution_hosts", "job_shape"]


class Role(enum.Enum):
    """This host's part in the job."""

    SINGLE = "single"  # its program on its own: one host, or a host outside the distribution's hosts
    MASTER = "master"  # runs mpirun for the whole job, or watches a TF strategy job and runs its part
    WORKER = "worker"  # serves the master's ranks (MPI) or runs its part of a TF strategy job; follows the job


class JobShape(NamedTuple):
    """What every host of the job decides alike (only `role` differs between them)."""

    role: Role  # this host's part
    groups: tuple[str, ...]  # the distribution's instance groups (sagemaker-training's distribution_instance_groups)
    hosts: tuple[str, ...]  # the hosts that take part, master first (sagemaker-training's distribution_hosts)
    master: str  # the first of them; the job's first host when no distribution is on

    @property
    def workers(self) -> tuple[str, ...]:
        """The hosts besides the master that take part; their `train` meets the master's."""
        return self.hosts[1:] if self.role is not Role.SINGLE else ()

    def to_json(self) -> dict[str, Any]:
        """As `train --dry-run` shows it."""
        return {"role": self.role.value, "instance_groups": list(self.groups), "hosts": list(self.hosts),
                "master": self.master}


class RunsOn(Protocol):
    """A kind's rule for where it runs (plan.kind.Kind.runs_on)."""

    def runs_on(self, config: TrainingConfig, groups: tuple[str, ...], hosts: tuple[str, ...]) -> bool: ...


def distribution_groups(framework: Mapping[str, Any], current_group: str, flags: Sequence[str],
                        asked: bool = False) -> list[Any]:
    """`sagemaker_distribution_instance_groups`, else the current group when a distribution is on (one of
    `flags`, or `asked`: SDK v3's ModelTrainer asks for MPI in its own files, not by a flag)."""
    if DISTRIBUTION_GROUPS.hyperparameter in framework:
        return list(framework[DISTRIBUTION_GROUPS.hyperparameter])
    return [current_group] if asked or any(framework.get(flag, False) for flag in flags) else []


def distribution_hosts(instance_groups: Sequence[InstanceGroup], groups: Sequence[Any],
                       hosts: Sequence[str]) -> list[str]:
    """The hosts of the distribution's instance groups; every host when the job has no groups."""
    if instance_groups:
        return [h for g in instance_groups if g.name in groups for h in g.hosts]
    return list(hosts)


def job_shape(config: TrainingConfig, asked: Optional[RunsOn], flags: Sequence[str]) -> JobShape:
    """The job's shape from the config's facts (sagemaker-training's Environment and trainer.train):
    `asked` is the kind the job asks for, `flags` every hyperparameter that turns a distribution on."""
    resources = config.resources
    groups = tuple(str(g) for g in distribution_groups(config.framework_parameters, resources.current_group_name,
                                                       flags, asked is not None))
    hosts = tuple(distribution_hosts(resources.instance_groups, groups, resources.hosts))
    master = hosts[0] if hosts else resources.hosts[0]
    if asked is None or not asked.runs_on(config, groups, hosts):
        role = Role.SINGLE
    else:
        role = Role.MASTER if resources.current_host == master else Role.WORKER
    return JobShape(role, groups, hosts, master)
