"""The distribution kinds' table (smtrain.plan.kinds): a new kind is its module and its table row, and
nothing else - shown with a hypothetical kind defined here and put in the table, planned from real
config files (config, the shape and run's `Coordination` take it as it is)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

import smtrain.plan.kinds as kinds
from smtrain.config.load import load_config
from smtrain.config.model import TrainingConfig
from smtrain.errors import ConfigError
from smtrain.plan.kind import HostPart, Kind, KindInputs
from smtrain.plan.kinds.mpi import MPI
from smtrain.plan.kinds.single import SINGLE
from smtrain.plan.launch import LaunchPlan, Role, dumps, plan_launch
from smtrain.wire.programs import RANK_LAUNCHER
from smtrain.plan.coordination import EveryHostSpec, JobEnd
from tests.support import make_tree
from tests.harness.plans import FACTS

FLAG = "sagemaker_ring_allreduce_enabled"


class RingAllreduce(Kind):
    """A hypothetical kind, as its module would define it: every host of two or more runs its program,
    which finds its neighbours in RING_HOSTS (set on every distribution host, one host too)."""

    name = "ring-allreduce"
    flag = FLAG
    offer = f"ring all-reduce jobs ({FLAG})"

    def runs_on(self, config: TrainingConfig, groups: tuple[str, ...], hosts: tuple[str, ...]) -> bool:
        return len(hosts) >= 2

    def environment(self, config: TrainingConfig, hosts: tuple[str, ...]) -> dict[str, str]:
        return {"RING_HOSTS": ",".join(hosts)}

    def plan(self, given: KindInputs) -> HostPart:
        config, shape = given.config, given.shape
        here = config.resources.current_host
        rank = shape.hosts.index(here)
        pipes = given.pipes()
        coordination = given.coordination(
            contract=given.contract(shape.master, "", pipes),
            program_rank=rank, ranks=tuple((h, i) for i, h in enumerate(shape.hosts)),
            program_name=f"{given.launch.program_path} (ring member {rank})", start_line=f"host {here}: ring member {rank}",
            starter=EveryHostSpec(JobEnd.EVERY_PROGRAM))
        argv = RANK_LAUNCHER.argv(given.python, "--", *given.launch.argv)
        return HostPart(argv, given.base_env(pipes), pipes, 1, coordination)


RING = RingAllreduce()


@pytest.fixture
def with_ring(monkeypatch: pytest.MonkeyPatch) -> None:
    """The table with the new kind's row (before the last row, the program on its own)."""
    monkeypatch.setattr(kinds, "KINDS", (*kinds.KINDS[:-1], RING, kinds.KINDS[-1]))


def _plan(tmp_path: Path, hyperparameters: dict[str, str], hosts: tuple[str, ...], current: str) -> LaunchPlan:
    tree = make_tree(tmp_path, hosts=hosts, current_host=current, hyperparameters=hyperparameters)
    return plan_launch(load_config(tree.env(SM_CONTROL_PORT="7100")), FACTS, "/venv/bin/python", token="t" * 32)


def test_a_new_kind_needs_its_module_and_its_table_row_only(tmp_path: Path, with_ring: None) -> None:
    master = _plan(tmp_path / "m", {FLAG: "true"}, ("algo-1", "algo-2", "algo-3"), "algo-1")
    worker = _plan(tmp_path / "w", {FLAG: "true"}, ("algo-1", "algo-2", "algo-3"), "algo-3")
    assert (master.distribution, master.role, worker.distribution, worker.role) == (RING.name, Role.MASTER, RING.name, Role.WORKER)
    assert master.env_set["RING_HOSTS"] == "algo-1,algo-2,algo-3"
    coordination = worker.coordination
    assert coordination is not None and coordination.workers == ("algo-2", "algo-3") and coordination.program_rank == 2
    assert coordination.starter == EveryHostSpec(JobEnd.EVERY_PROGRAM) and coordination.master == "algo-1"
    shown = json.loads(dumps(master))
    assert shown["distribution"] == "ring-allreduce" and shown["coordination"]["starter"]["name"] == "every-host"
    assert not [a for a in worker.argv if FLAG in a]  # the kind's flag is the toolkit's, no program argument
    # on one host the kind does not run: the program on its own, with the kind's environment still set
    alone = _plan(tmp_path / "one", {FLAG: "true"}, ("algo-1",), "algo-1")
    assert alone.distribution == SINGLE.name and alone.coordination is None and alone.env_set["RING_HOSTS"] == "algo-1"


def test_the_table_decides_what_is_refused_and_what_is_offered(tmp_path: Path, with_ring: None) -> None:
    with pytest.raises(ConfigError, match=f"'sagemaker_mpi_enabled' and '{FLAG}' each turn on a distribution"):
        _plan(tmp_path / "two", {MPI.flag: "true", FLAG: "true"}, ("algo-1", "algo-2"), "algo-1")
    with pytest.raises(ConfigError) as refused:
        _plan(tmp_path / "ddp", {"sagemaker_pytorch_ddp_enabled": "true"}, ("algo-1", "algo-2"), "algo-1")
    message = str(refused.value)
    assert "hyperparameters.json: hyperparameter 'sagemaker_pytorch_ddp_enabled' asks for PyTorch DDP" in message
    assert f"ring all-reduce jobs ({FLAG})" in message and message.endswith("and single-host programs")


def test_without_its_row_the_flag_is_no_distribution(tmp_path: Path) -> None:
    plan = _plan(tmp_path, {FLAG: "true"}, ("algo-1", "algo-2"), "algo-2")
    assert plan.distribution == SINGLE.name and plan.role is Role.SINGLE and "RING_HOSTS" not in plan.env_set
