"""MPI (Horovod): the master runs mpirun, which starts every rank through the workers' sshd (a worker
runs no program of its own). mpirun aborts the job itself when a rank fails; the job ends when mpirun
does. Signals reach the ranks through their launchers on each host (mpirun does not pass them on)."""
from __future__ import annotations

import os
import shlex

from ...config.defaults import SSHD
from ...wire.contract import RANK_CONTRACT_ENV, RankContract, without_internals
from ...wire.ssh_trust import AUTHORIZED_KEYS, HOST_KEY, SSH_DIR
from ..coordination import JobEnd, KindInputs, KindPlan, RankSignals
from ..mpirun import cpus_per_rank, layout, mpirun_command
from ..shape import Role

__all__ = ["plan_mpi"]


def plan_mpi(given: KindInputs) -> KindPlan:
    """mpirun's command on the master; sshd on a worker; every rank, host after host (--map-by slot)."""
    config, python, shape = given.config, given.python, given.shape
    here = config.resources.current_host
    placed = layout(shape.hosts, config.mpi.processes_per_host, config.mpi.num_processes, given.facts.num_gpus)
    per_host = placed.processes_per_host
    first_rank = placed.hosts.index(here) * per_host if here in placed.hosts else 0
    pipes = given.pipes(per_host, True, placed.num_processes)
    env_set = given.base_env(pipes)
    argv: tuple[str, ...] = ()
    ssh_dir = SSH_DIR if shape.workers else ""  # mpirun's ssh logs into the workers with the job's key (docker/ssh_config)
    if shape.role is not Role.WORKER:  # on a worker, the master's mpirun starts this host's ranks through sshd
        control_host = shape.master if shape.workers else "127.0.0.1"
        contract = RankContract(control_host, config.control_port, given.token, config.grace_period_s, pipes,
                                stall_timeout_s=config.stall_timeout_s)
        env_set[RANK_CONTRACT_ENV] = contract.to_json()
        command = mpirun_command(
            placed, here, config.resources.network_interface_name, config.resources.current_instance_type,
            given.facts.network, {**without_internals(config.environ), **env_set}, config.mpi.custom_options,
            (python, "-m", "smtrain.rank", "--", *given.launch.argv),
            cpus_per_rank=cpus_per_rank(per_host, given.facts.bindable_cpus, given.facts.num_gpus,
                                        config.resources.current_instance_type),
        )
        argv = command.argv
        env_set = {k: v for k, v in command.env.items() if config.environ.get(k) != v}
    sshd = config.sshd
    serves_sshd = shape.role is Role.WORKER
    coordination = given.coordination(
        sshd_argv=(SSHD, "-D", "-e", "-f", sshd.config, "-p", str(sshd.port), "-h", os.path.join(ssh_dir, HOST_KEY),
                   "-o", f"AuthorizedKeysFile={os.path.join(ssh_dir, AUTHORIZED_KEYS)}") if serves_sshd else (),
        sshd_port=sshd.port if serves_sshd else 0,
        ssh_dir=ssh_dir,
        ranks=tuple((placed.hosts[rank // per_host], rank) for rank in range(placed.num_processes)),
        program_name=f"mpirun ({given.launch.program_path})",
        start_line=f"host {here}: starting {placed.num_processes} ranks on {', '.join(placed.hosts)}: {shlex.join(argv)}",
        signals=RankSignals.RANK_LAUNCHERS, end=JobEnd.MASTER_PROGRAM, ends_on_task_failure=False,
        workers_run_programs=False,
    )
    return KindPlan(argv, env_set, pipes, per_host, first_rank, coordination)
