"""Plans made from real config files in a tmp tree, for the tests that plan without running anything: this
host's facts as a plain CPU host, an MPI job's hyperparameters, and the plan of one host of a job."""
from __future__ import annotations

from pathlib import Path
from typing import Mapping

from smtrain.config.load import load_config
from smtrain.config.model import HostFacts, NetworkFacts
from smtrain.plan.launch import LaunchPlan, plan_launch
from tests.support import make_tree

FACTS = HostFacts(num_cpus=8, num_gpus=0, num_neurons=0, smddprun_installed=False, smddpmprun_installed=False,
                  network=NetworkFacts(("eth0", "lo"), "eth0", efa_present=False))
MPI = {"sagemaker_mpi_enabled": "true", "sagemaker_mpi_num_of_processes_per_host": "2", "db_password": '"hunter22"'}


def plan_for(tmp_path: Path, hyperparameters: Mapping[str, str], hosts: tuple[str, ...], current: str,
             **env: str) -> LaunchPlan:
    """Host `current`'s plan of a job on `hosts` (control port 7100)."""
    tree = make_tree(tmp_path, hosts=hosts, current_host=current, hyperparameters=hyperparameters)
    return plan_launch(load_config(tree.env(SM_CONTROL_PORT="7100", **env)), FACTS, "/venv/bin/python", token="t" * 32)
