"""Each distribution kind's coordination (smtrain.plan.kinds) and the master's decisions on it, without
processes: plans from real config files, the control server's knowledge rebuilt from recorded control
messages (bytes as the wire carries them), the rank starters' policies and the master's `why_end` on it,
the stall rule on a fake clock, and the table of endings
(`decide`) and their rendering (`render`)."""
from __future__ import annotations

import signal
from pathlib import Path
from typing import Any, Optional

import pytest

from smtrain.config.load import load_config
from smtrain.errors import ConfigError, FailureCause
from smtrain.plan.kinds import KINDS
from smtrain.plan.kinds.mpi import MPI
from smtrain.plan.kinds.multi_worker_mirrored import MULTI_WORKER_MIRRORED
from smtrain.plan.kinds.parameter_server import PARAMETER_SERVER
from smtrain.plan.kinds.single import SINGLE
from smtrain.plan.launch import LaunchPlan, plan_launch
from smtrain.proc.supervise import ProcessResult
from smtrain.progress import Counts
from smtrain.run.attempt import Attempt
from smtrain.run.master import why_end
from smtrain.run.outcome import FileState, JobOutcome, JobView, decide, render
from smtrain.run.stall import Stall, StallEvidence, StallWatch
from smtrain.starters.policy import AfterProgram, MasterSide, TaskNews
from smtrain.starters.registry import master_policy
from smtrain.wire.control_protocol import MessageType, decode, encode
from smtrain.wire.rank_failure import RankFailure, root_cause
from tests.support import make_tree
from tests.harness.plans import FACTS

MPI_HPS = {"sagemaker_mpi_enabled": "true", "sagemaker_mpi_num_of_processes_per_host": "2"}
PS = {"sagemaker_parameter_server_enabled": "true"}
MWMS = {"sagemaker_multi_worker_mirrored_strategy_enabled": "true"}
HOSTS = ("algo-1", "algo-2", "algo-3")


def _plan(tmp_path: Path, hyperparameters: dict[str, str], hosts: tuple[str, ...] = HOSTS) -> LaunchPlan:
    tree = make_tree(tmp_path, hosts=hosts, current_host=hosts[0], hyperparameters=hyperparameters)
    return plan_launch(load_config(tree.env(SM_CONTROL_PORT="7100")), FACTS, "/venv/bin/python", token="t" * 32)


class RecordedServer:
    """What the master's control server knows, rebuilt from recorded messages: (peer host, line)."""

    def __init__(self, recorded: list[tuple[str, bytes]], lost: tuple[str, ...] = ()) -> None:
        self.reports: list[RankFailure] = []
        self.done: dict[str, int] = {}
        self.lost = list(lost)
        self.sent: list[Any] = []
        for host, line in recorded:
            message = decode(line)
            if message.type is MessageType.RANK_EXIT:
                self.reports.append(RankFailure.from_fields(message.fields))
            elif message.type is MessageType.DONE:
                self.done[host] = message.fields["status"]

    def lost_hosts(self) -> list[str]:
        return list(self.lost)

    def has_reports(self, final: bool = False) -> bool:
        return any(r.final or not final for r in self.reports)

    def failed_done(self) -> Optional[tuple[str, int]]:
        return next(((h, s) for h, s in self.done.items() if s != 0), None)

    def done_hosts(self) -> dict[str, int]:
        return dict(self.done)

    def first_report(self, quiet_s: float = 0.3, max_wait_s: float = 2.0) -> Optional[RankFailure]:
        return root_cause(self.reports)

    def broadcast(self, message_type: MessageType, **fields: Any) -> None:
        self.sent.append(decode(encode(message_type, **fields)))


def _rank_exit(host: str, rank: int, final: bool = True, tail: str = "Traceback (most recent call last):\n"
               "  File \"train.py\", line 3\nValueError: bad batch\n", **ending: Any) -> tuple[str, bytes]:
    report = RankFailure(host=host, rank=rank, local_rank=rank % 2, final=final, program="train.py", error_at=100.0 + rank,
                         stderr_tail=tail, traceback_seen=final or None, exit_code=1 if final else None, **ending)
    return host, encode(MessageType.RANK_EXIT, token="t" * 32, **report.to_fields())


def _policy(plan: LaunchPlan) -> MasterSide:
    assert plan.coordination is not None
    return master_policy(plan.coordination.starter)


def _news(server: RecordedServer) -> TaskNews:
    return TaskNews(server.has_reports(final=True), server.failed_done())


def test_every_kind_has_a_planner_and_the_plan_names_its_kind(tmp_path: Path) -> None:
    kinds = {name: _plan(tmp_path / name, hps).distribution for name, hps in (("mpi", MPI_HPS), ("ps", PS), ("mwms", MWMS))}
    assert kinds == {"mpi": MPI.name, "ps": PARAMETER_SERVER.name, "mwms": MULTI_WORKER_MIRRORED.name}
    assert KINDS[-1] is SINGLE and len({k.name for k in KINDS}) == len(KINDS)
    assert _plan(tmp_path / "one", {}, hosts=("algo-1",)).distribution == SINGLE.name


def test_mpi_watches_every_rank_where_mpirun_places_it_and_a_fake_clock_names_the_stopped_one(tmp_path: Path) -> None:
    plan = _plan(tmp_path, MPI_HPS)
    assert plan.coordination is not None
    ranks = plan.coordination.ranks
    assert ranks == (("algo-1", 0), ("algo-1", 1), ("algo-2", 2), ("algo-2", 3), ("algo-3", 4), ("algo-3", 5))
    watch = StallWatch(20.0, now=0.0)
    for host, rank in ranks:
        watch.expect(host, rank)
    for t in range(1, 40):  # rank 4 stops after step 5; the others go on until t=10, then wait for it
        for host, rank in ranks:
            steps = min(t, 5 if rank == 4 else 10)
            watch.observe(host, rank, Counts(steps=steps), now=float(t))
        if t < 30:
            assert watch.check(float(t)) is None, t
    stall = watch.check(40.0)
    assert stall is not None and stall.evidence is StallEvidence.STEPS
    assert [(r.host, r.rank) for r in stall.stopped] == [("algo-3", 4)]


def test_strategy_kinds_watch_their_programs_not_the_parameter_servers(tmp_path: Path) -> None:
    plan = _plan(tmp_path, PS)
    assert plan.coordination is not None
    assert plan.coordination.ranks == (("algo-1", 0), ("algo-2", 1), ("algo-3", 2))


def test_a_failed_rank_is_left_to_mpirun_but_ends_a_strategy_job_at_once(tmp_path: Path) -> None:
    failed = RecordedServer([_rank_exit("algo-2", 1)])
    mpi, ps = _plan(tmp_path / "mpi", MPI_HPS), _plan(tmp_path / "ps", PS)
    assert why_end([], None, _policy(mpi), _news(failed)) is None  # mpirun aborts the job itself
    assert why_end([], None, _policy(ps), _news(failed)) == "a task of the job failed"
    done = RecordedServer([("algo-3", encode(MessageType.DONE, status=3))])
    assert why_end([], None, _policy(_plan(tmp_path / "mwms", MWMS)), _news(done)) == \
        "the program on host algo-3 ended with status 3"


def test_a_lost_host_or_a_stall_ends_every_kind_of_job_and_an_attempt_is_aborted_once(tmp_path: Path) -> None:
    found = Stall(StallEvidence.STEPS, 1800.0, (), 40)
    for name, hps in (("mpi", MPI_HPS), ("ps", PS), ("mwms", MWMS)):
        policy = _policy(_plan(tmp_path / name, hps))
        assert why_end(["algo-3"], None, policy, _news(RecordedServer([]))) == "lost worker host algo-3", name
        assert why_end([], found, policy, _news(RecordedServer([]))) == "the job stalled", name
    attempt = Attempt(0)
    assert attempt.abort("lost worker host algo-3") and not attempt.abort("the job stalled")
    assert attempt.aborted == "lost worker host algo-3"


def test_after_its_program_a_mwms_master_waits_for_every_worker_a_ps_master_only_when_it_failed(tmp_path: Path) -> None:
    ps, mwms = _policy(_plan(tmp_path / "ps", PS)), _policy(_plan(tmp_path / "mwms", MWMS))
    assert ps.after_program(0, aborted=False) == AfterProgram()  # a parameter-server job ends with its master
    assert ps.after_program(2, aborted=False) == AfterProgram("the master's program failed", await_workers=True)
    assert ps.after_program(0, aborted=True) == AfterProgram(None, await_workers=True)
    assert mwms.after_program(0, aborted=False) == AfterProgram(None, await_workers=True)
    assert _policy(_plan(tmp_path / "mpi", MPI_HPS)).after_program(1, aborted=False) == AfterProgram()  # mpirun's own


def _view(plan: LaunchPlan, program: ProcessResult, server: RecordedServer, stall: Optional[str] = None) -> JobView:
    assert plan.coordination is not None
    return JobView(program, plan.coordination.program_name, str(plan.program.program_path), stall, server.first_report(),
                   server.has_reports(final=True), tuple(server.lost), server.failed_done())


def _ending(plan: LaunchPlan, view: JobView) -> tuple[int, Any, str]:
    coordination, program = plan.coordination, str(plan.program.program_path)
    assert coordination is not None
    outcome = decide(view, lambda report: coordination.name_rank(program, report.rank, report.local_rank, report.host))
    return outcome.status, outcome.cause, outcome.reason.splitlines()[0] if outcome.reason else ""


def test_the_table_of_endings_is_the_same_for_every_kind(tmp_path: Path) -> None:
    mpi, ps = _plan(tmp_path / "mpi", MPI_HPS), _plan(tmp_path / "ps", PS)
    program = str(mpi.program.program_path)
    ok = ProcessResult(0, None, None, False, b"")
    mpirun_failed = ProcessResult(1, None, None, False, b"mpirun noticed that process rank 1 ... exited\n")
    sigterm = int(signal.SIGTERM)
    consequence = _rank_exit("algo-1", 0, tail="", shutdown_signal=sigterm)[1].replace(b'"traceback_seen":true',
                                                                                         b'"traceback_seen":false')
    crash = ("Traceback (most recent call last):\n  File \"train.py\", line 9\nRuntimeError: boom\n"
             "Fatal Python error: Segmentation fault\n\nCurrent thread 0x01 (most recent call first):\n  <no Python frame>\n")
    for plan in (mpi, ps):
        name = plan.distribution
        # success, also with a traceback the program handled and went on from (an early report only)
        assert _ending(plan, _view(plan, ok, RecordedServer([]))) == (0, None, ""), name
        assert _ending(plan, _view(plan, ok, RecordedServer([_rank_exit("algo-2", 1, final=False)])))[0] == 0, name
        # a rank that raised: status 1, its exception, where it ran
        status, cause, line = _ending(plan, _view(plan, mpirun_failed, RecordedServer([_rank_exit("algo-2", 1)])))
        assert (status, cause) == (1, "ValueError") and "on host algo-2" in line and line.startswith("ValueError: "), name
        # a lost host: 69 and HostLost for every kind, even when a rank then failed because of it
        lost = _view(plan, mpirun_failed, RecordedServer([("algo-1", consequence)], lost=("algo-3",)))
        status, cause, line = _ending(plan, lost)
        assert (status, cause) == (69, FailureCause.HOST_LOST) and "lost worker host algo-3 during the job" in line, name
        # a stall
        assert _ending(plan, _view(plan, mpirun_failed, RecordedServer([]), stall="rank 4 on algo-3 stopped"))[:2] == (
            124, FailureCause.STALLED), name
        # raised, then crashed in the interpreter's teardown: 1, as an uncaught exception
        crashed = _rank_exit("algo-2", 1, tail=crash, term_signal=11)[1].replace(b'"exit_code":1', b'"exit_code":139')
        status, cause, line = _ending(plan, _view(plan, mpirun_failed, RecordedServer([("algo-2", crashed)])))
        assert (status, cause) == (1, "RuntimeError") and "died of SIGSEGV while it shut down" in line, name
        # ... also when the job's abort for that very failure reached the rank's launcher during its
        # teardown (seen on a fresh clone: SIGILL, status 132 on every host); a stop `train` itself
        # was asked for still makes it a kill
        aborted = _rank_exit("algo-2", 1, tail=crash, term_signal=4, shutdown_signal=sigterm)[1].replace(
            b'"exit_code":1', b'"exit_code":132')
        status, cause, line = _ending(plan, _view(plan, mpirun_failed, RecordedServer([("algo-2", aborted)])))
        assert (status, cause) == (1, "RuntimeError") and "died of SIGILL while it shut down" in line, name
        stopped = ProcessResult(143, None, sigterm, False, b"")
        assert _ending(plan, _view(plan, stopped, RecordedServer([("algo-2", aborted)])))[:2] == (
            132, FailureCause.PROGRAM_KILLED), name
    # a worker's own program (strategy kinds): its status
    assert _ending(ps, _view(ps, ok, RecordedServer([("algo-2", encode(MessageType.DONE, status=3))]))) == (
        3, FailureCause.PROGRAM_ERROR, f"ProgramError: {ps.program.program_path} on host algo-2 ended with status 3")
    # the master's own program, with nothing reported: its status, named as the kind names it
    assert _ending(mpi, _view(mpi, mpirun_failed, RecordedServer([]))) == (
        1, FailureCause.PROGRAM_ERROR, f"ProgramError: program mpirun ({program}) exited with status 1")


def test_render_reports_each_ending_once_and_keeps_a_failure_file_the_program_wrote(tmp_path: Path) -> None:
    failure, success = tmp_path / "failure", tmp_path / "success"
    cases = [
        (JobOutcome(0), 0, None),
        (JobOutcome.failed(124, FailureCause.STALLED, "rank 1 on algo-1 stopped"), 124, "Stalled: rank 1 on algo-1 stopped\n"),
        (JobOutcome.failed(69, FailureCause.HOST_LOST, "lost worker host algo-3"), 69, "HostLost: lost worker host algo-3\n"),
        (JobOutcome.failed(3, "KeyError", "program p exited with status 3", b"Traceback ...\nKeyError: 'x'\n"), 3,
         "KeyError: program p exited with status 3\nstderr (last lines):\nTraceback ...\nKeyError: 'x'\n"),
        (JobOutcome.of_error(ConfigError("resourceconfig.json: hosts must be a list")), 78,
         "ConfigError: resourceconfig.json: hosts must be a list\n"),
        (JobOutcome(1, told="ValueError: as the master wrote it\n"), 1, "ValueError: as the master wrote it\n"),
    ]
    for outcome, status, text in cases:
        failure.unlink(missing_ok=True)
        success.unlink(missing_ok=True)
        assert render(outcome, failure, FileState.of(failure), success) == status
        assert (failure.read_text() if failure.exists() else None) == text
        assert success.exists() == (status == 0)
    failure.write_text("MyError: the program's own words\n")
    at_start = FileState.of(tmp_path / "absent")  # the program wrote it after train started
    assert render(JobOutcome.failed(2, FailureCause.PROGRAM_ERROR, "exited with status 2"), failure, at_start) == 2
    assert failure.read_text() == "MyError: the program's own words\n"


@pytest.mark.parametrize("secret", ["hunter22"])
def test_render_masks_secret_values(tmp_path: Path, secret: str) -> None:
    failure = tmp_path / "failure"
    outcome = JobOutcome.failed(1, "ValueError", f"bad password {secret}")
    render(outcome, failure, FileState.of(failure), redact=lambda text: text.replace(secret, "****"))
    assert secret not in failure.read_text() and "****" in failure.read_text()
