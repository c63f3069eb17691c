"""A new helper process is one declaration plus its own module (plan/helper_plan.py): a hypothetical helper - a row
added to `HELPERS` here, its module the standard library's `http.server` - is planned on the hosts its row says,
shown by the dry run, started by the job with the role's helpers and stopped with them, with nothing else
changed."""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import pytest

import smtrain.plan.helper_plan as helper_plan
from smtrain.config.load import load_config
from smtrain.plan.helper_plan import Declared, HelperInputs, Starts
from smtrain.plan.launch import LaunchPlan, Role, dumps, plan_launch
from smtrain.run.job import HostJob
from smtrain.wire.programs import Program
from tests.harness.plans import FACTS, MPI
from tests.support import make_tree

SERVER = Program("hypothetical server", "http.server", "train on the master, beside the program (a test's)")


def _on_the_master(given: HelperInputs) -> tuple[tuple[str, tuple[str, ...]], ...]:
    return ((SERVER.name, ("0", "--bind", "127.0.0.1")),) if given.role is not Role.WORKER else ()


@pytest.fixture
def with_new_helper(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(helper_plan, "HELPERS", (*helper_plan.HELPERS, Declared(SERVER, Starts.WITH_PROGRAM,
                                                                                 _on_the_master)))


def _plan(tmp_path: Path, current: str) -> LaunchPlan:
    tree = make_tree(tmp_path, hosts=("algo-1", "algo-2"), current_host=current, hyperparameters=MPI)
    config = load_config(tree.env(SM_CONTROL_PORT="7100", SM_SYSTEM_MONITOR="off", SM_FRAMEWORK_METRICS="off"))
    return plan_launch(config, FACTS, sys.executable, token="t" * 32)


class _Waker:
    shutdown_seen = None


def test_a_helper_declared_in_one_row_is_planned_shown_started_and_stopped_by_the_job(
        tmp_path: Path, with_new_helper: None) -> None:
    master, worker = _plan(tmp_path / "m", "algo-1"), _plan(tmp_path / "w", "algo-2")
    assert worker.helper(SERVER) is None
    spec = master.helper(SERVER)
    assert spec is not None and spec.argv == (sys.executable, "-m", "http.server", "0", "--bind", "127.0.0.1")
    shown = json.loads(dumps(master))["helpers"]
    assert {"name": SERVER.name, "starts": "with_program", "argv": list(spec.argv)} in shown
    job = HostJob(master, os.environ, sys.executable, _Waker(), "t" * 32)  # type: ignore[arg-type]
    with job.helpers:
        job.start_helpers()
        started = job.helpers.get(SERVER.name)
        assert started is not None and started.process.pid in job.spared_pids
        time.sleep(0.2)
        assert started.process.poll() is None  # it runs beside the program
    assert started.process.poll() is not None  # and ends with the role's helpers
