"""The master role, for every distribution kind, as the plan's `Coordination` says: waits for the
workers, starts the job (and this host's companions), runs its own program under the stall watchdog,
passes signals on to the ranks, ends the job early when it must (a host lost, a stall, a task failed
where the starter says so), waits for the workers' programs where the job ends with every program, and
decides the job's outcome, which every worker is told. One loop runs the job's attempts (run.attempts
says whether another follows); each attempt is the control server's `Attempt` (run.attempt). What depends
on how the ranks start, the rank starter's policy decides (smtrain.starters): the master asks it, hands it
data, and branches on nothing of its own.

Whatever happens first of a task failing, a host lost or a stall ends the job at once: the workers
are told `abort`, this host's program gets SIGTERM, SIGKILL ABORT_GRACE_S later (smtrain.proc.supervise)."""
from __future__ import annotations

import threading
import time
from typing import Optional

from ..common.console import log
from ..common.signals import SHUTDOWN_SIGNALS, WAKE
from ..config.defaults import OUTPUT_DRAIN_S, STACK_DUMP_WAIT_S
from ..config.settings import GRACE_PERIOD, STALL_TIMEOUT
from ..proc.supervise import ProcessResult, supervise
from ..starters.policy import MasterSide, TaskNews
from ..starters.registry import master_policy
from ..wire.control_protocol import MessageType
from .attempt import Attempt
from .attempts import ABORT_WAIT_S, Attempts, ask_workers_ready
from .job import HostJob
from .outcome import JobOutcome, JobView, decide
from .profiles import accept_profiles, gather_profiles
from .roster import await_reach, await_workers, open_control
from .stall import Stall

__all__ = ["Master", "why_end"]


def why_end(lost: list[str], stall: Optional[Stall], policy: MasterSide, news: TaskNews) -> Optional[str]:
    """Why the job must end now, if it must: a worker host lost, the attempt stalled, or a task's failure where
    the starter's policy says it ends the job."""
    if lost:
        return f"lost worker host {lost[0]}"
    if stall is not None:
        return "the job stalled"
    return policy.task_failure(news)


class Master:
    """The master role (see the module's docstring): made once its host is prepared, with its helpers and its
    control server started; `run` is the rest of the job."""

    def __init__(self, job: HostJob) -> None:
        coordination = job.plan.coordination
        assert coordination is not None, "the master role needs the plan's coordination"
        self.job, self.plan, self.coordination = job, job.plan, coordination
        self.policy = master_policy(coordination.starter)
        self.attempts = Attempts(job.plan, job.waker, job.wrote_progress_since)
        job.start_helpers()
        self.server = open_control(coordination, job.token, job.waker, self.policy.admission(coordination.workers),
                                   self.policy.joined, job.ranks_progress_age)
        if self.plan.profiler_dir is not None and coordination.workers:
            accept_profiles(self.server, self.plan.profiler_dir)

    def run(self) -> JobOutcome:
        """The workers joined, the job's attempts (restarts in place included), the outcome told to every worker,
        their profiler data gathered."""
        job, server, workers = self.job, self.server, self.coordination.workers
        try:
            if workers:  # from the start: a worker that is in early must not think us lost
                server.start_heartbeat()
            await_workers(server, self.coordination, self.policy.not_admitted)
            await_reach(server, self.coordination, self.policy.unreachable)
            self.policy.hold(job.helpers)
            job.start_companions(job.token)
            outcome = self.attempts.run(
                lambda number: self._attempt(server.begin_attempt(number)),
                lambda number, cause: ask_workers_ready(server, workers, number, cause, job.waker) or job.rewind_pipes())
            self.policy.release()
            server.announce_end(outcome.status, outcome.reason)
            job.helpers.ask_to_stop()  # this host's monitor writes its last samples while the workers ship theirs
            if self.plan.profiler_dir is not None and workers:
                job.report_notes += gather_profiles(server, list(workers))
            job.helpers.stop()
            server.await_hang_ups()
        finally:
            server.close()
        return outcome

    def _attempt(self, attempt: Attempt) -> tuple[Attempt, JobOutcome]:
        """One run of the job's program, and its outcome."""
        job, plan, coordination = self.job, self.plan, self.coordination
        self.server.broadcast(MessageType.START, token=job.token, attempt=attempt.number)
        if plan.settings[STALL_TIMEOUT] > 0:
            attempt.watch(plan.settings[STALL_TIMEOUT], coordination.ranks, self._stalled)
        self.policy.before_attempt(job.waker)
        log(coordination.start_line)
        try:
            result = supervise(plan.argv, job.program_env(job.token), plan.cwd, plan.settings[GRACE_PERIOD], job.waker,
                               self._forward, spare=job.spared_pids, on_wake=self._why_end)
            if not self.server.rank_output.drain(OUTPUT_DRAIN_S):
                log(f"some ranks' output did not end within {OUTPUT_DRAIN_S:g} s of the program's end; not waiting for it")
            after = self.policy.after_program(result.exit_code, attempt.aborted is not None)
            if after.abort is not None:
                self._abort(after.abort)
            if after.await_workers:
                self._await_workers_done(attempt)
        finally:
            attempt.stop_watching()
        program = str(plan.program.program_path)
        outcome = decide(self._view(attempt, result),
                         lambda report: coordination.name_rank(program, report.rank, report.local_rank, report.host))
        return attempt, outcome

    def _forward(self, pid: int, signum: int) -> None:
        """Pass a signal `train` received on to the job's processes, here and (where the starter says) on the
        workers."""
        note = self.policy.signal_here(pid, signum, self.plan.settings[GRACE_PERIOD], self.job.spared_pids)
        if self.policy.tells_workers(self.server.attempt.aborted is not None):
            self.server.broadcast(MessageType.SIGNAL, signum=signum)
        if note:
            log(note)

    def _abort(self, reason: str) -> None:
        """End the attempt early, once: the workers are told to stop their programs now."""
        if self.server.attempt.abort(reason):
            self.server.broadcast(MessageType.ABORT, reason=reason)

    def _why_end(self) -> Optional[str]:
        """Why the job must end now, if it must (called when the loop is woken); tells the workers once."""
        server = self.server
        reason = why_end(server.lost_hosts(), server.attempt.stall, self.policy,
                         TaskNews(server.has_reports(final=True), server.failed_done()))
        if reason is not None:
            self._abort(reason)
        return reason

    def _await_workers_done(self, attempt: Attempt) -> None:
        """Until every worker's program has ended (bounded once the attempt is aborted or `train` asked to stop)."""
        waker, server, workers = self.job.waker, self.server, self.coordination.workers
        deadline: Optional[float] = None
        while not all(w in {*server.done_hosts(), *server.lost_hosts()} for w in workers):
            if attempt.aborted and deadline is None:
                deadline = time.monotonic() + ABORT_WAIT_S
            if deadline is not None and time.monotonic() >= deadline:
                waiting = [w for w in workers if w not in server.done_hosts()]
                log(f"workers {', '.join(waiting)} did not report their program's end in time")
                return
            for signum in waker.wait(1.0 if deadline is None else max(0.0, min(1.0, deadline - time.monotonic()))):
                if signum == WAKE:
                    self._why_end()
                elif signum in SHUTDOWN_SIGNALS:
                    server.broadcast(MessageType.SIGNAL, signum=signum)
                    deadline = min(deadline or float("inf"),
                                   time.monotonic() + self.plan.settings[GRACE_PERIOD] + ABORT_WAIT_S)

    def _stalled(self, stall: Stall) -> None:
        """The stall watchdog's finding: every rank dumps its stack; then the job ends (_why_end)."""
        log(f"Stalled: {stall.describe()}; every rank gets SIGABRT to log its Python stack")
        self.server.tell_ranks(MessageType.STALL)
        threading.Timer(STACK_DUMP_WAIT_S, self.job.waker.post).start()

    def _view(self, attempt: Attempt, result: ProcessResult) -> JobView:
        # the program (or its ranks' launcher) may end while reports are in flight: wait for them when anything failed
        # (once every rank's launcher has ended, as the starter tells from the program's end, for those already sent only)
        server = self.server
        report = server.first_report(max_wait_s=2.0 if result.exit_code or server.has_reports() else 0.0,
                                     ranks=len(self.coordination.ranks), senders_gone=self.policy.senders_gone(result))
        return JobView(
            program=result, program_name=self.coordination.program_name, script=str(self.plan.program.program_path),
            stall=attempt.stall.describe() if attempt.stall is not None else None, report=report,
            final_reports=server.has_reports(final=True), lost=tuple(server.lost_hosts()),
            failed_done=server.failed_done(),
        )
