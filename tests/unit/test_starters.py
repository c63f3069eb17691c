"""A new way of starting ranks is its module (a `smtrain.starters.base.RankStarter`) and the kind's
planner that gives it, nothing else: shown with a hypothetical starter defined here - ranks started
through a scheduler's own launcher, as Slurm's `srun` would - given by a hypothetical kind put in the
kinds' table, planned from real config files and carried out by the real master and worker roles:
`train --dry-run` shows it from the same object, the master gives each worker its admission over the
real control channel and asks it how signals go on, whether a task's failure ends the job and what
follows the program; the worker takes the admission and hands it its part. (The roles' steps are
driven here without processes; that they name no starter and branch on none of their own is
tests/static/test_layers.py's.)"""
from __future__ import annotations

import json
import signal
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Optional

import pytest

import smtrain.plan.kinds as kinds
from smtrain.config.model import TrainingConfig
from smtrain.errors import StartupFailed
from smtrain.plan.kind import HostPart, Kind, KindInputs
from smtrain.plan.launch import Role, dumps
from smtrain.proc.helpers import HelperGroup
from smtrain.proc.supervise import ProcessResult
from smtrain.run.master import await_workers, open_control
from smtrain.run.worker import Worker
from smtrain.starters.base import MasterSide, RankStarter, WorkerSide
from smtrain.wire.contract import RankContract
from smtrain.wire.control_protocol import ControlClient, MessageType
from tests.unit.test_coordination import RecordedServer, _master
from tests.unit.test_kinds import _plan

FLAG = "sagemaker_scheduler_enabled"


class SchedulerLaunch(RankStarter):
    """A hypothetical starter, as its module would define it: the master's program is the scheduler's
    launcher, which starts every rank through the scheduler's daemons; a worker joins the job's
    allocation (its admission) and waits; a step the scheduler cancelled ends the job."""

    name = "scheduler"
    signals = "scheduler-launcher"  # the launcher passes them on to every step
    joined = "it is in the job's allocation"

    def __init__(self, partition: str) -> None:
        self.partition = partition
        self.calls: list[Any] = []

    def to_json(self) -> dict[str, Any]:
        return {**super().to_json(), "partition": self.partition}

    def admission(self, workers: tuple[str, ...]) -> str:
        self.calls.append(("admission", workers))
        return f"allocation-42:{self.partition}"

    def not_admitted(self, hosts: list[str]) -> str:
        return f"hosts {', '.join(hosts)} are not in the job's allocation"

    def forward(self, master: MasterSide, pid: int, signum: int) -> None:
        self.calls.append(("forward", pid, signum))
        master.tell_workers(MessageType.SIGNAL, signum=signum)

    def task_failure(self, master: MasterSide) -> Optional[str]:
        failed = master.failed_program()
        return f"the scheduler cancelled the step on {failed[0]}" if failed else None

    def after_program(self, master: MasterSide, result: ProcessResult) -> None:
        self.calls.append(("after_program", result.exit_code))

    def senders_gone(self, result: ProcessResult) -> bool:
        return True

    def worker_begin(self, helpers: HelperGroup, deadline: float) -> None:
        self.calls.append("worker_begin")

    def admit(self, admission: Optional[str], master: str, waited_s: float) -> str:
        if not (admission or "").startswith("allocation-"):
            raise StartupFailed(f"the master {master} gave no allocation")
        self.calls.append(("admit", admission))
        return f"in allocation {admission}"

    def worker_part(self, worker: WorkerSide) -> None:
        while not worker.over():
            worker.waker.wait(0.01)
        self.calls.append("worker_part")


class Scheduled(Kind):
    """The hypothetical kind that gives it: on two hosts or more, the master runs the launcher."""

    name = "scheduled"
    flag = FLAG
    offer = f"scheduled jobs ({FLAG})"

    def runs_on(self, config: TrainingConfig, groups: tuple[str, ...], hosts: tuple[str, ...]) -> bool:
        return len(hosts) >= 2

    def plan(self, given: KindInputs) -> HostPart:
        config, shape = given.config, given.shape
        pipes = given.pipes()
        contract = RankContract(shape.master, config.control_port, given.token, config.grace_period_s, pipes)
        coordination = given.coordination(
            ranks=tuple((h, i) for i, h in enumerate(shape.hosts)), program_name="the scheduler's launcher",
            start_line="starting every step", starter=SchedulerLaunch("gpu"))
        argv = ("launcher", "--nodes", str(len(shape.hosts)), *given.launch.argv) if shape.role is not Role.WORKER else ()
        return HostPart(argv, {**given.base_env(pipes), "SCHEDULER_CONTRACT": contract.to_json()}, pipes, 1, coordination)


@pytest.fixture
def with_scheduler(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kinds, "KINDS", (*kinds.KINDS[:-1], Scheduled(), kinds.KINDS[-1]))


HOSTS = ("algo-1", "algo-2")


def test_the_plan_gives_the_new_starter_and_the_dry_run_shows_it(tmp_path: Path, with_scheduler: None) -> None:
    master = _plan(tmp_path / "m", {FLAG: "true"}, HOSTS, "algo-1")
    assert master.coordination is not None and isinstance(master.coordination.starter, SchedulerLaunch)
    shown = json.loads(dumps(master))["coordination"]["starter"]
    assert shown == {"name": "scheduler", "signals": "scheduler-launcher", "end": "master-program",
                     "ends_on_task_failure": False, "workers_run_programs": False, "partition": "gpu"}


def test_the_master_role_carries_out_the_new_starters_steps(tmp_path: Path, with_scheduler: None) -> None:
    plan = _plan(tmp_path, {FLAG: "true"}, HOSTS, "algo-1")
    assert plan.coordination is not None
    starter = plan.coordination.starter
    assert isinstance(starter, SchedulerLaunch)
    # its admission goes to a worker over the real control channel, on hello; the worker is in once it says `joined`
    coordination = plan.coordination._replace(control_bind="127.0.0.1", control_port=0)
    server = open_control(coordination, "t" * 32, SimpleNamespace(post=lambda: None), [],
                          admission=starter.admission(coordination.workers))
    try:
        client = ControlClient.open("127.0.0.1", server.port, time.monotonic() + 10, MessageType.HELLO, host="algo-2")
        assert client is not None
        welcome = client.receive(timeout=10)
        assert welcome is not None and welcome.type is MessageType.WELCOME
        assert welcome.fields == {"admission": "allocation-42:gpu"}
        with pytest.raises(StartupFailed, match="hosts algo-2 are not in the job's allocation"):
            await_workers(server, coordination._replace(peer_wait_s=0.3))
    finally:
        server.close()
    # signals, a task's failure, what follows the program: the starter's
    master = _master(plan, RecordedServer([("algo-2", b'{"type": "done", "status": 3}')]))
    master.forward(4321, signal.SIGTERM)
    assert master.why_end() == "the scheduler cancelled the step on algo-2"
    master.after_program(ProcessResult(0, None, None, True, b""))
    assert [(m.type, dict(m.fields)) for m in master.server.sent] == [
        (MessageType.SIGNAL, {"signum": signal.SIGTERM}),
        (MessageType.ABORT, {"reason": "the scheduler cancelled the step on algo-2"})]
    assert starter.calls == [("admission", ("algo-2",)), ("forward", 4321, signal.SIGTERM), ("after_program", 0)]


def test_the_worker_role_takes_the_admission_and_hands_the_starter_its_part(tmp_path: Path, with_scheduler: None) -> None:
    plan = _plan(tmp_path, {FLAG: "true"}, HOSTS, "algo-2")
    assert plan.role is Role.WORKER and plan.coordination is not None and plan.argv == ()
    starter = plan.coordination.starter
    assert isinstance(starter, SchedulerLaunch)
    sent: list[Any] = []
    polls = iter([False, False, True])  # the job is over for this host at the third look
    worker = Worker()
    worker.job = SimpleNamespace(plan=plan, waker=SimpleNamespace(wait=lambda timeout: []))
    worker.coordination, worker.deadline = plan.coordination, time.monotonic() + 5
    worker.link = SimpleNamespace(wait_welcome=lambda deadline: "allocation-42:gpu", over=lambda: next(polls, False),
                                  send=lambda message_type, **fields: sent.append(message_type))
    assert worker._join()
    plan.coordination.starter.worker_part(worker)
    assert sent == [MessageType.JOINED]
    assert starter.calls == [("admit", "allocation-42:gpu"), "worker_part"]
    worker.link.wait_welcome = lambda deadline: None  # none came: the starter refuses, the worker says nothing
    with pytest.raises(StartupFailed, match="gave no allocation"):
        worker._join()
    assert sent == [MessageType.JOINED]

