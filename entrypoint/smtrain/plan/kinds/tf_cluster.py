"""What the TensorFlow strategy kinds share: every host runs its TF_CONFIG task's program under the
rank launcher, which reports failures and progress to the master's control server (the token comes
with the job's start); a task that fails ends the job at once; signals go to each host's program."""
from __future__ import annotations

from typing import Mapping, Sequence

from ...wire.programs import RANK_LAUNCHER
from ...config.model import TrainingConfig
from ..coordination import Companion, EveryHostSpec, JobEnd
from ..kind import HostPart, KindInputs
from ..tfconfig import Task

__all__ = ["plan_tf_cluster", "spans_two_hosts"]


def spans_two_hosts(config: TrainingConfig, hosts: tuple[str, ...]) -> bool:
    """Where a TF strategy runs: on two or more distribution hosts, this one among them."""
    return len(hosts) >= 2 and config.resources.current_host in hosts


def plan_tf_cluster(given: KindInputs, programs: Sequence[Task], companions: Sequence[Companion],
                    env_set: Mapping[str, str], end: JobEnd) -> HostPart:
    """This host's part: its program task of `programs` (one a host), the `companions` on this host
    (those of every host name the job's failures), `env_set` added to the program's environment."""
    config, shape = given.config, given.shape
    here = config.resources.current_host
    pipes = given.pipes()
    program = next(t for t in programs if t.host == here)
    path = str(given.launch.program_path)
    names = {t.rank: f"{path} ({t.describe()})" for t in programs}
    names.update({c.rank: f"the {c.name} ({c.describe})" for c in companions})
    coordination = given.coordination(
        contract=given.contract(shape.master, "", pipes),
        program_rank=program.rank,
        companions=tuple(c for c in companions if c.host == here),
        ranks=tuple((t.host, t.rank) for t in programs),
        rank_names=names,
        program_name=f"{path} ({program.describe()})",
        start_line=f"host {here}: starting {program.describe()}; {len(programs) + len(companions)} tasks "
                   f"on {len(shape.hosts)} hosts",
        starter=EveryHostSpec(end),
    )
    argv = RANK_LAUNCHER.argv(given.python, "--", *given.launch.argv)
    return HostPart(argv, {**given.base_env(pipes), **env_set}, pipes, 1, coordination)
