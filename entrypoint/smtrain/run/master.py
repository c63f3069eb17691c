"""The master role, for every distribution kind, as the plan's `Coordination` says: waits for the
workers, starts the job (and this host's companions), runs its own program under the stall watchdog,
passes signals on to the ranks, ends the job early when it must (a host lost, a stall, a task failed
where the plan says so), waits for the workers' programs where the job ends with every program, and
decides the job's outcome, which every worker is told. What depends on how the ranks start, the plan's
rank starter does (smtrain.starters): the master calls its steps and branches on none of its own.

Whatever happens first of a task failing, a host lost or a stall ends the job at once: the workers
are told `abort`, this host's program gets SIGTERM, SIGKILL ABORT_GRACE_S later (smtrain.proc.supervise)."""
from __future__ import annotations

import signal
import threading
import time
from pathlib import Path
from typing import IO, Any, Callable, Optional

from ..common.console import log
from ..common.signals import SHUTDOWN_SIGNALS, WAKE, SignalWaker
from ..config.defaults import ABORT_GRACE_S, PROFILE_WAIT_S, STACK_DUMP_WAIT_S
from ..errors import PeersUnreachable, StartupFailed, ToolkitError
from ..plan.coordination import Coordination
from ..proc.supervise import LEFTOVER_WAIT_S, ProcessResult, supervise
from ..wire.control_protocol import MessageType
from ..wire.progress_file import Counts
from .control_server import ControlServer
from .job import HostJob
from .outcome import JobOutcome, JobView, decide, failure_text
from .attempts import run_attempts
from .restart_rule import Attempt, AttemptProgress
from .stall import Stall, StallWatch
from .watchdog import Watchdog

__all__ = ["ABORT_WAIT_S", "Master", "await_workers", "gather_profiles", "open_control", "unpack_profile"]

# After an abort, for the workers' own programs: ABORT_GRACE_S, their leftovers LEFTOVER_WAIT_S, their
# launchers' reports a few seconds more.
ABORT_WAIT_S = ABORT_GRACE_S + LEFTOVER_WAIT_S + 3.0


def open_control(coordination: Coordination, token: str, waker: SignalWaker, dogs: list[Watchdog],
                 on_counts: Callable[[str, int, Counts], None] = lambda host, rank, counts: None,
                 admission: str = "") -> ControlServer:
    """The master's control server, feeding what the ranks report to the stall watchdog in `dogs`
    (once it runs) and to `on_counts`, giving each worker the rank starter's `admission` when it joins;
    StartupFailed naming the port when it is taken."""
    def on_progress(host: str, rank: int, counts: Counts) -> None:
        on_counts(host, rank, counts)
        for dog in dogs:
            dog.observe(host, rank, counts)

    def on_waiting(waits: dict[int, float], check_s: float) -> None:
        for dog in dogs:
            dog.waited_for(waits, check_s)

    try:
        return ControlServer(coordination.control_bind, coordination.control_port, token, log,
                             coordination.heartbeat_timeout_s,
                             on_lost=waker.post, on_progress=on_progress, on_waiting=on_waiting, on_news=waker.post,
                             admission=admission, joined=coordination.starter.joined)
    except OSError as e:
        raise StartupFailed(f"cannot listen on the control port {coordination.control_bind}:{coordination.control_port}: "
                            f"{e.strerror} (set SM_CONTROL_PORT to a free port)") from None


def await_workers(server: ControlServer, coordination: Coordination) -> None:
    """Wait until every worker has joined (said hello and taken its admission); PeersUnreachable (told to
    those that came) when one never came, StartupFailed when one came but did not join."""
    if not coordination.workers:
        return
    wait_s = coordination.peer_wait_s
    log(f"waiting up to {wait_s:g} s for workers {', '.join(coordination.workers)}")
    missing = server.wait_for_workers(list(coordination.workers), time.monotonic() + wait_s)
    if not missing:
        return
    absent = [host for host in missing if not server.said_hello(host)]
    error: ToolkitError
    if absent:
        error = PeersUnreachable(f"workers {', '.join(absent)} did not report within {wait_s:g} s "
                                 f"(their train must reach {coordination.master}:{coordination.control_port})")
    else:
        error = StartupFailed(coordination.starter.not_admitted(missing))
    server.end(int(error.exit_code), failure_text(error.cause, str(error)))
    raise error


def unpack_profile(host: str, archive: IO[bytes], into: Path) -> Optional[str]:
    """A worker's profiler archive unpacked into this host's profiler folder (as soon as it came: the
    control server calls this); the report's note on what is missing from it, if anything."""
    from ..profiler.shipping import SHIP_CAP_BYTES, unpack

    try:
        _, left_out = unpack(archive, into)
    except Exception as e:  # truncated, corrupt (tarfile, gzip, zlib), or the disk: this host is left out
        return f"host {host} is missing from this report: its profiler data did not unpack ({e})"
    if left_out:
        return (f"host {host}: {left_out.get('files')} profiler file(s) of {left_out.get('bytes')} bytes past the "
                f"{SHIP_CAP_BYTES >> 20} MiB a host ships are left out; they are in that host's output/profiler")
    return None


def gather_profiles(server: ControlServer, workers: list[str]) -> list[str]:
    """The workers' profiler data, unpacked into this host's profiler folder as it comes (unpack_profile),
    for the job's one report (at most PROFILE_WAIT_S; a lost host is not waited for). Returns the
    report's notes on what is missing."""
    started = time.monotonic()
    shipped = server.wait_for_profiles(workers, started + PROFILE_WAIT_S)
    notes, lost = [], server.lost_hosts()
    for host in workers:
        if host not in shipped:
            why = "lost during the job" if host in lost else f"its profiler data did not come within {PROFILE_WAIT_S:g} s"
            notes.append(f"host {host} is missing from this report: {why}")
        elif shipped[host] is not None:
            notes.append(str(shipped[host]))
    log(f"profiler data of {len(shipped)} of {len(workers)} worker(s) gathered in {time.monotonic() - started:.2f} s")
    return notes


class Master:
    """The master role (see the module's docstring)."""

    def __init__(self) -> None:
        self.aborted: Optional[str] = None  # why the job is being ended early, once it is
        self.dogs: list[Watchdog] = []  # the stall watchdog, once the program runs
        self.progress = AttemptProgress()  # what the ranks of this attempt reported

    @property
    def coordination(self) -> Coordination:
        coordination = self.job.plan.coordination
        assert coordination is not None, "the master role needs the plan's coordination"
        return coordination

    def run(self, job: HostJob) -> JobOutcome:
        """The master's part: helpers, control server, workers, the attempts (restarts in place included), the
        outcome told to every worker."""
        self.job = job
        plan, coordination = job.plan, self.coordination
        job.start_helpers()
        starter = coordination.starter
        self.server = open_control(coordination, job.token, job.waker, self.dogs,
                                   lambda host, rank, counts: self.progress.observe(host, rank, counts),
                                   starter.admission(coordination.workers))
        if plan.profiler_dir is not None and coordination.workers:
            from ..profiler.shipping import SHIP_CAP_BYTES

            into = plan.profiler_dir
            self.server.accept_profiles(into / ".incoming", SHIP_CAP_BYTES + (1 << 20),
                                        lambda host, archive: unpack_profile(host, archive, into))
        try:
            self.server.start_heartbeat()  # from the start: a worker that is in early must not think us lost
            await_workers(self.server, coordination)
            starter.master_begin(job.helpers)
            job.start_companions(job.token)
            outcome = run_attempts(self._attempt, self._restart, plan.restarts.max_restarts, job.waker)
            starter.master_end()
            self.server.announce_end(outcome.status, outcome.reason)
            job.helpers.stop()  # this host's monitor writes its last samples while the workers pack theirs
            if plan.profiler_dir is not None and coordination.workers:
                job.report_notes += gather_profiles(self.server, list(coordination.workers))
            self.server.await_hang_ups()
        finally:
            self.server.close()
        return outcome

    def _attempt(self, number: int) -> tuple[JobOutcome, Attempt]:
        """One run of the job's program (number 0, then one more for each restart) and how it ended."""
        job, plan, coordination = self.job, self.job.plan, self.coordination
        started, started_wall = time.monotonic(), time.time()
        self.server.broadcast(MessageType.START, token=job.token, attempt=number)
        if plan.stall_timeout_s > 0:
            watch = StallWatch(plan.stall_timeout_s, time.monotonic())
            for host, rank in coordination.ranks:
                watch.expect(host, rank)
            self.dogs.append(Watchdog(watch, self._stalled).start())
        coordination.starter.before_attempt(job.waker)
        log(coordination.start_line)
        try:
            result = supervise(plan.argv, job.program_env(job.token), plan.cwd, plan.grace_period_s, job.waker,
                               self.forward, spare=job.spared_pids, on_wake=self.why_end)
            self.after_program(result)
        finally:
            for dog in self.dogs:
                dog.stop()
        program = str(plan.program.program_path)
        outcome = decide(self._view(result),
                         lambda report: coordination.name_rank(program, report.rank, report.local_rank, report.host))
        return outcome, Attempt(outcome, self._progressed(started_wall), self.progress.steps, time.monotonic() - started)

    def _progressed(self, since: float) -> bool:
        """Whether the attempt begun at `since` (wall clock) made progress: a rank said so, or (where
        restarts are asked for) this host's ranks wrote a checkpoint or step events meanwhile - what a
        TF strategy's script that counts no steps leaves (the step profiler's events of Keras batches)."""
        if self.progress.progressed or self.job.plan.restarts.max_restarts == 0:
            return self.progress.progressed
        return self.job.wrote_progress_since(since)

    def _restart(self, number: int, failed: Attempt) -> Optional[str]:
        """Restart `number` in place: every worker ends its part of the failed attempt and says it is
        ready (bounded; a shutdown signal ends the wait at once). None when the job can start again,
        else why not."""
        coordination, waker = self.coordination, self.job.waker
        began = time.monotonic()
        self.server.broadcast(MessageType.RESTART, attempt=number, cause=failed.cause())
        deadline = began + ABORT_WAIT_S
        while True:
            refused = self.server.refused_restart(list(coordination.workers))
            if refused:
                return f"worker {refused[0]} could not: {refused[1]}"
            waiting = self.server.not_ready(list(coordination.workers), number)
            if not waiting:
                break
            lost = self.server.lost_hosts()
            if lost:
                return f"a host was lost ({lost[0]})"
            if time.monotonic() >= deadline:
                return f"workers {', '.join(waiting)} did not end their part of the attempt in time"
            for signum in waker.wait(0.2):
                if signum in SHUTDOWN_SIGNALS:
                    return f"train was asked to stop ({signal.Signals(signum).name})"
        why_not = self.job.restart_pipes()
        if why_not is not None:
            return why_not
        self.server.new_attempt()
        self.aborted, self.progress = None, AttemptProgress()
        self.dogs.clear()
        log(f"restart {number}: every host is ready after {time.monotonic() - began:.2f} s; starting the job again")
        return None

    # -- what the rank starter's steps use of the master (smtrain.starters.base.MasterSide) ------------
    def forward(self, pid: int, signum: int) -> None:
        """Pass a signal `train` received on to the job's processes, here and on the workers (the starter
        knows how)."""
        self.coordination.starter.forward(self, pid, signum)

    @property
    def grace_period_s(self) -> float:
        """How long the job's processes get between SIGTERM and SIGKILL."""
        return self.job.plan.grace_period_s

    def spared_pids(self) -> list[int]:
        """This host's processes a signal to the program's tree must not reach (the toolkit's helpers)."""
        return self.job.spared_pids

    def tell_workers(self, message_type: MessageType, **fields: Any) -> None:
        """Send a message to every worker connected now."""
        self.server.broadcast(message_type, **fields)

    def final_report_came(self) -> bool:
        """Whether a rank's launcher reported its program's end as a failure."""
        return self.server.has_reports(final=True)

    def failed_program(self) -> Optional[tuple[str, int]]:
        """The first worker whose own program ended non-zero, and its status."""
        return self.server.failed_done()

    def after_program(self, result: ProcessResult) -> None:
        """Once this host's program has ended: what the starter says follows it."""
        self.coordination.starter.after_program(self, result)

    def abort(self, reason: str) -> None:
        """End the job early, once: the workers are told to stop their programs now."""
        if self.aborted is None:
            self.aborted = reason
            self.server.broadcast(MessageType.ABORT, reason=reason)

    def why_end(self) -> Optional[str]:
        """Why the job must end now, if it must (called when the loop is woken); tells the workers once."""
        reason = self._reason()
        if reason is not None:
            self.abort(reason)
        return reason

    def _reason(self) -> Optional[str]:
        lost = self.server.lost_hosts()
        if lost:
            return f"lost worker host {lost[0]}"
        if self.dogs and self.dogs[0].stall is not None:
            return "the job stalled"
        return self.coordination.starter.task_failure(self)

    def _all_done(self) -> bool:
        finished = {*self.server.done_hosts(), *self.server.lost_hosts()}
        return all(w in finished for w in self.coordination.workers)

    def await_workers_done(self) -> None:
        """Until every worker's program has ended (bounded once the job is aborted or asked to stop)."""
        waker, server = self.job.waker, self.server
        deadline: Optional[float] = None
        while not self._all_done():
            if self.aborted and deadline is None:
                deadline = time.monotonic() + ABORT_WAIT_S
            if deadline is not None and time.monotonic() >= deadline:
                waiting = [w for w in self.coordination.workers if w not in server.done_hosts()]
                log(f"workers {', '.join(waiting)} did not report their program's end in time")
                return
            for signum in waker.wait(1.0 if deadline is None else max(0.0, min(1.0, deadline - time.monotonic()))):
                if signum == WAKE:
                    self.why_end()
                elif signum in SHUTDOWN_SIGNALS:
                    server.broadcast(MessageType.SIGNAL, signum=signum)
                    deadline = min(deadline or float("inf"),
                                   time.monotonic() + self.job.plan.grace_period_s + ABORT_WAIT_S)

    def _stalled(self, stall: Stall) -> None:
        """The stall watchdog's finding: every rank dumps its stack; then the job ends (why_end)."""
        log(f"Stalled: {stall.describe()}; every rank gets SIGABRT to log its Python stack")
        self.server.tell_ranks(MessageType.STALL)
        threading.Timer(STACK_DUMP_WAIT_S, self.job.waker.post).start()

    def _view(self, result: ProcessResult) -> JobView:
        stall = self.dogs[0].stall if self.dogs else None
        # the program (or its ranks' launcher) may end while reports are in flight: wait for them when anything failed
        # (once every rank's launcher has ended, as the starter tells from the program's end, for those already sent only)
        report = self.server.first_report(max_wait_s=2.0 if result.exit_code or self.server.has_reports() else 0.0,
                                          ranks=len(self.coordination.ranks), senders_gone=self.coordination.starter.senders_gone(result))
        return JobView(
            program=result, program_name=self.coordination.program_name, script=str(self.job.plan.program.program_path),
            stall=stall.describe() if stall is not None else None, report=report,
            final_reports=self.server.has_reports(final=True), lost=tuple(self.server.lost_hosts()),
            failed_done=self.server.failed_done(),
        )
