"""MPI (Horovod), asked for by `sagemaker_mpi_enabled` or SDK v3 ModelTrainer's `distributed=MPI(...)`,
on the distribution's hosts (one host too): the master runs mpirun, which starts every rank through
the workers' sshd (a worker runs no program of its own). mpirun aborts the job itself when a rank fails; the job ends when mpirun
does. Signals reach the ranks through their launchers on each host (mpirun does not pass them on)."""
from __future__ import annotations

import shlex
from pathlib import Path
from typing import Optional

from ...wire.programs import RANK_LAUNCHER
from ...config.model import MpiSettings, TrainingConfig
from ...config.settings import MAX_RESTARTS, MPI_ENABLED, SSHD_CONFIG, SSHD_PORT
from ...wire.contract import RANK_CONTRACT_ENV, without_internals
from ...wire.ssh_trust import CONTROL_PATH, SSH_DIR
from ..kind import HostPart, Kind, KindInputs
from ..mpirun_command import (RANK_IDENTITY, WAITING_YIELDS, MpirunSpec, cpus_per_rank, layout, mpirun_command,
                              mpirun_shapes_output, ssh_port, sshd_command)
from ..shape import Role

__all__ = ["MPI", "Mpi", "plan_mpi"]


class Mpi(Kind):
    """mpirun's command on the master; sshd on a worker; every rank, host after host (--map-by slot)."""

    name = "mpi"
    flag = MPI_ENABLED.hyperparameter
    offer = f"Horovod and MPI jobs (distribution={{'mpi': {{'enabled': True}}}}, i.e. {flag})"

    def asked(self, config: TrainingConfig) -> bool:
        return self.flag_on(config.hyperparameters) or config.model_trainer_mpi is not None

    def runs_on(self, config: TrainingConfig, groups: tuple[str, ...], hosts: tuple[str, ...]) -> bool:
        return config.resources.current_group_name in groups and bool(hosts)

    def plan(self, given: KindInputs) -> HostPart:
        return plan_mpi(given)

    def settings(self, config: TrainingConfig) -> MpiSettings:
        """The `sagemaker_mpi_*` hyperparameters' settings where their flag asks for MPI, else ModelTrainer's."""
        if self.flag_on(config.hyperparameters) or config.model_trainer_mpi is None:
            return config.mpi
        return config.model_trainer_mpi

    def horovod_timeline(self, config: TrainingConfig, program_dir: Path) -> Optional[Path]:
        """HOROVOD_TIMELINE as the ranks get it (`-x NAME=VALUE` in the custom MPI options, else the
        environment), relative paths from the ranks' working folder; None when off or DYNAMIC."""
        value = config.environ.get("HOROVOD_TIMELINE")
        options = list(self.settings(config).custom_options)
        for i, option in enumerate(options):
            given = options[i + 1] if option == "-x" and i + 1 < len(options) else ""
            if given.startswith("HOROVOD_TIMELINE="):
                value = given.partition("=")[2]
        if not value or value.upper() == "DYNAMIC":
            return None
        return program_dir / value


MPI = Mpi()


def plan_mpi(given: KindInputs) -> HostPart:
    """This host's part in an MPI job."""
    config, python, shape = given.config, given.python, given.shape
    here = config.resources.current_host
    mpi = MPI.settings(config)
    placed = layout(shape.hosts, mpi.processes_per_host, mpi.num_processes, given.facts.num_gpus)
    per_host = placed.processes_per_host
    first_rank = placed.hosts.index(here) * per_host if here in placed.hosts else 0
    pipes = given.pipes(per_host, True, placed.num_processes)
    env_set = given.base_env(pipes)
    argv: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()
    ssh_dir = SSH_DIR if shape.workers else ""  # mpirun's ssh logs into the workers with the job's key (docker/ssh_config)
    # where restarts in place are asked for, every attempt's mpirun shares the master's connections to the workers
    held = shape.workers if config.settings[MAX_RESTARTS] > 0 and shape.role is not Role.WORKER else ()
    if shape.role is not Role.WORKER:  # on a worker, the master's mpirun starts this host's ranks through sshd
        control_host = shape.master if shape.workers else "127.0.0.1"
        contract = given.contract(control_host, given.token, pipes, output=not mpirun_shapes_output(
            mpi.custom_options))._replace(identity=RANK_IDENTITY, waiting_yields=WAITING_YIELDS)
        env_set[RANK_CONTRACT_ENV] = contract.to_json()
        command = mpirun_command(
            placed, here, config.resources.network_interface_name, config.resources.current_instance_type,
            given.facts.network, {**without_internals(config.environ), **env_set}, mpi.custom_options,
            RANK_LAUNCHER.argv(python, "--", *given.launch.argv),
            cpus_per_rank=cpus_per_rank(per_host, given.facts.bindable_cpus, given.facts.num_gpus,
                                        config.resources.current_instance_type),
            ssh_control_path=CONTROL_PATH if held else "",
        )
        argv = command.argv
        notes = tuple(f"{name}: the job's own value is kept (the image's default: {value})"
                      for name, value in sorted(command.kept.items()))
        env_set = {k: v for k, v in command.env.items() if config.environ.get(k) != v}
    sshd = sshd_command(config.settings[SSHD_CONFIG], config.settings[SSHD_PORT], ssh_dir)
    coordination = given.coordination(
        ranks=tuple((placed.hosts[rank // per_host], rank) for rank in range(placed.num_processes)),
        program_name=f"mpirun ({given.launch.program_path})",
        start_line=f"host {here}: starting {placed.num_processes} ranks on {', '.join(placed.hosts)}: {shlex.join(argv)}",
        starter=MpirunSpec(ssh_dir, sshd if shape.role is Role.WORKER else None, held,
                           ssh_port=ssh_port(mpi.custom_options)),
    )
    return HostPart(argv, env_set, pipes, per_host, coordination, first_rank, notes)
