"""A new way of starting ranks is its spec (data the kind's planner puts in the plan), its policy (a master's
side and a worker's: `smtrain.starters.policy`) and one row of the starters' registry, nothing else: shown with a
hypothetical starter defined here - ranks started through a scheduler's own launcher, as Slurm's `srun` would -
given by a hypothetical kind put in the kinds' table, planned from real config files and carried out by the
real master and worker roles over the real control channel: `train --dry-run` shows its spec; the master
gives each worker the policy's admission, asks it how a signal goes on and whether a task's failure ends the
job; the worker serves what it serves, takes the admission, and hands it the signals for the ranks started
on its host. (That the roles branch on no starter and hand a step none of themselves is
tests/static/test_layers.py's.)"""
from __future__ import annotations

import json
import signal
import sys
import time
from pathlib import Path
from typing import Any, NamedTuple, Optional, Sequence

import pytest

import smtrain.plan.kinds as kinds
from smtrain.config.model import TrainingConfig
from smtrain.errors import StartupFailed
from smtrain.plan.kind import HostPart, Kind, KindInputs
from smtrain.plan.launch import LaunchPlan, Role, dumps
from smtrain.run.attempt import HostState
from smtrain.run.job import HostJob
from smtrain.run.master import Master
from smtrain.run.roster import await_workers, open_control
from smtrain.run.worker import Worker
from smtrain.starters import registry
from smtrain.starters.policy import MasterSide, TaskNews, WorkerSide
from smtrain.wire.control_protocol import ControlClient, MessageType
from tests.harness.plans import plan_for

FLAG = "sagemaker_scheduler_enabled"
CALLS: list[Any] = []  # the policy's steps, as the roles took them


class SchedulerSpec(NamedTuple):
    """The hypothetical starter's spec: the partition its launcher asks for."""

    partition: str
    name: str = "scheduler"


class SchedulerLaunch(MasterSide):
    """Its policy on the master, as its module would define it: the master's program is the scheduler's launcher,
    which starts every rank through the scheduler's daemons; a step the scheduler cancelled ends the job."""

    joined = "it is in the job's allocation"

    def __init__(self, spec: SchedulerSpec) -> None:
        self.spec = spec

    def admission(self, workers: tuple[str, ...]) -> str:
        CALLS.append(("admission", workers))
        return f"allocation-42:{self.spec.partition}"

    def not_admitted(self, hosts: list[str]) -> str:
        return f"hosts {', '.join(hosts)} are not in the job's allocation"

    def signal_here(self, pid: int, signum: int, grace_s: float, spared: Sequence[int]) -> Optional[str]:
        CALLS.append(("signal_here", pid, signum))
        return "passed on to the scheduler's launcher"

    def task_failure(self, news: TaskNews) -> Optional[str]:
        return f"the scheduler cancelled the step on {news.failed_program[0]}" if news.failed_program else None


class SchedulerJoin(WorkerSide):
    """Its policy on a worker: the host joins the job's allocation (its admission) and passes signals to the
    ranks the scheduler's daemons started there."""

    def __init__(self, spec: SchedulerSpec) -> None:
        self.spec = spec

    def serve(self, helpers: Any, deadline: float) -> None:
        CALLS.append("serve")

    def admit(self, admission: Optional[str], master_host: str, waited_s: float) -> str:
        if not (admission or "").startswith("allocation-"):
            raise StartupFailed(f"the master {master_host} gave no allocation")
        CALLS.append(("admit", admission))
        return f"in allocation {admission}"

    def forward_here(self, signum: int, grace_s: float) -> Optional[int]:
        CALLS.append(("forward_here", signum))
        return 1


class Scheduled(Kind):
    """The hypothetical kind that gives it: on two hosts or more, the master runs the launcher."""

    name = "scheduled"
    flag = FLAG
    offer = f"scheduled jobs ({FLAG})"

    def runs_on(self, config: TrainingConfig, groups: tuple[str, ...], hosts: tuple[str, ...]) -> bool:
        return len(hosts) >= 2

    def plan(self, given: KindInputs) -> HostPart:
        shape, pipes = given.shape, given.pipes()
        coordination = given.coordination(
            ranks=tuple((h, i) for i, h in enumerate(shape.hosts)), program_name="the scheduler's launcher",
            start_line="starting every step", starter=SchedulerSpec("gpu"))
        argv = ("launcher", "--nodes", str(len(shape.hosts)), *given.launch.argv) if shape.role is not Role.WORKER else ()
        contract = given.contract(shape.master, given.token, pipes)
        return HostPart(argv, {**given.base_env(pipes), "SCHEDULER_CONTRACT": contract.to_json()}, pipes, 1, coordination)


@pytest.fixture
def with_scheduler(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(kinds, "KINDS", (*kinds.KINDS[:-1], Scheduled(), kinds.KINDS[-1]))
    monkeypatch.setitem(registry.POLICIES, "scheduler", lambda: (SchedulerLaunch, SchedulerJoin))
    CALLS.clear()


HOSTS = ("algo-1", "algo-2")
QUIET = {"SM_SYSTEM_MONITOR": "off", "SM_FRAMEWORK_METRICS": "off"}  # no helper process, no profiler data


class Waker:
    """The role's loop events: `signals` once, then none (each wait a short sleep)."""

    def __init__(self, *signals: int) -> None:
        self.signals, self.shutdown_seen = list(signals), None
        self.then = lambda: None  # what happens once the signals were handed out

    def post(self) -> None:
        pass

    def wait(self, timeout: float) -> list[int]:
        if self.signals:
            given, self.signals = self.signals, []
            return given
        self.then()
        time.sleep(min(timeout, 0.02))
        return []


def _job(plan: LaunchPlan, waker: Waker) -> HostJob:
    return HostJob(plan, {}, sys.executable, waker, "t" * 32)  # type: ignore[arg-type]


def _on_loopback(plan: LaunchPlan, port: int = 0) -> LaunchPlan:
    assert plan.coordination is not None
    return plan._replace(coordination=plan.coordination._replace(control_bind="127.0.0.1", control_port=port,
                                                                 master="127.0.0.1"))


def test_the_plan_gives_the_new_starters_spec_and_the_dry_run_shows_it(tmp_path: Path, with_scheduler: None) -> None:
    master = plan_for(tmp_path / "m", {FLAG: "true"}, HOSTS, "algo-1")
    assert master.coordination is not None and master.coordination.starter == SchedulerSpec("gpu")
    assert json.loads(dumps(master))["coordination"]["starter"] == {"partition": "gpu", "name": "scheduler"}
    assert isinstance(registry.master_policy(master.coordination.starter), SchedulerLaunch)
    assert isinstance(registry.worker_policy(master.coordination.starter), SchedulerJoin)


def test_the_master_role_takes_the_new_policys_admission_signals_and_task_failures(tmp_path: Path,
                                                                                  with_scheduler: None) -> None:
    plan = _on_loopback(plan_for(tmp_path, {FLAG: "true"}, HOSTS, "algo-1", **QUIET))
    master = Master(_job(plan, Waker()))
    try:
        client = ControlClient.open("127.0.0.1", master.server.port, time.monotonic() + 10, MessageType.HELLO,
                                    host="algo-2")
        assert client is not None
        welcome = client.receive(timeout=10)
        assert welcome is not None and (welcome.type, dict(welcome.fields)) == (MessageType.WELCOME,
                                                                                {"admission": "allocation-42:gpu"})
        client.send(MessageType.JOINED)
        await_workers(master.server, master.coordination, master.policy.not_admitted)  # joined: no error
        client.send(MessageType.DONE, status=3)
        deadline = time.monotonic() + 10
        while master.server.failed_done() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        master._forward(4321, signal.SIGTERM)
        assert master._why_end() == "the scheduler cancelled the step on algo-2"
        heard = [client.receive(timeout=10) for _ in range(2)]
        assert [(m.type, dict(m.fields)) for m in heard if m is not None] == [
            (MessageType.SIGNAL, {"signum": signal.SIGTERM}),
            (MessageType.ABORT, {"reason": "the scheduler cancelled the step on algo-2"})]
        assert CALLS == [("admission", ("algo-2",)), ("signal_here", 4321, signal.SIGTERM)]
        client.close()
    finally:
        master.server.close()


def test_the_worker_role_serves_takes_the_admission_and_hands_the_policy_its_signals(tmp_path: Path,
                                                                                    with_scheduler: None) -> None:
    master_plan = _on_loopback(plan_for(tmp_path / "m", {FLAG: "true"}, HOSTS, "algo-1", **QUIET))
    assert master_plan.coordination is not None
    server = open_control(master_plan.coordination, "t" * 32, Waker(), "allocation-42:gpu", SchedulerLaunch.joined)
    refusing = open_control(master_plan.coordination, "t" * 32, Waker(), "")  # gives no allocation
    try:
        plan = _on_loopback(plan_for(tmp_path / "w", {FLAG: "true"}, HOSTS, "algo-2", **QUIET), server.port)
        assert plan.role is Role.WORKER and plan.argv == ()
        waker = Waker(signal.SIGTERM)
        waker.then = lambda: server.announce_end(0, "")
        worker = Worker(_job(plan, waker))
        try:
            assert worker._join()
            worker._attempts()  # until the job is over for it: the master's `end`
            assert CALLS == ["serve", ("admit", "allocation-42:gpu"), ("forward_here", signal.SIGTERM)]
            assert server.records["algo-2"].state is HostState.JOINED and worker.link.end is not None
        finally:
            worker.client.close()
        refused = Worker(_job(_on_loopback(plan, refusing.port), Waker()))
        try:
            with pytest.raises(StartupFailed, match="the master 127.0.0.1 gave no allocation"):
                refused._join()  # the worker says nothing: it never joined
            deadline = time.monotonic() + 10  # the server records the hello's connection just after its welcome
            while "algo-2" not in refusing.records and time.monotonic() < deadline:
                time.sleep(0.01)
            assert refusing.records["algo-2"].state is HostState.CONNECTED
        finally:
            refused.client.close()
    finally:
        server.close()
        refusing.close()
