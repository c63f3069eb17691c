"""The master role, for every distribution kind: waits for the workers, starts the job, runs its own
program under the stall watchdog, ends the job early when it must (a host lost, a stall, a task
failed where the kind's policy says so), and decides the job's outcome, which every worker is told.

Whatever happens first of a task failing, a host lost or a stall ends the job at once: the workers
are told `abort`, this host's program gets SIGTERM, SIGKILL ABORT_GRACE_S later (smtrain.proc.supervise)."""
from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Optional

from ..common.console import log
from ..common.signals import SignalWaker
from ..config.defaults import PROFILE_WAIT_S, STACK_DUMP_WAIT_S
from ..errors import PeersUnreachable, StartupFailed
from ..proc.supervise import ProcessResult, supervise
from ..wire.control_protocol import MessageType
from ..wire.progress_file import Counts
from .control_server import ControlServer
from .job import HostJob
from .outcome import JobOutcome, JobView, decide, failure_text
from .policy import Peers, Policy
from .stall import Stall, StallWatch
from .watchdog import Watchdog

__all__ = ["Master", "await_workers", "gather_profiles", "open_control"]


def open_control(peers: Peers, token: str, waker: SignalWaker, dogs: list[Watchdog]) -> ControlServer:
    """The master's control server, feeding what the ranks report to the stall watchdog in `dogs`
    (once it runs); StartupFailed naming the port when it is taken."""
    def on_progress(host: str, rank: int, counts: Counts) -> None:
        for dog in dogs:
            dog.observe(host, rank, counts)

    def on_waiting(waits: dict[int, float], check_s: float) -> None:
        for dog in dogs:
            dog.waited_for(waits, check_s)

    try:
        return ControlServer(peers.control_bind, peers.control_port, token, log, peers.heartbeat_timeout_s,
                             on_lost=waker.post, on_progress=on_progress, on_waiting=on_waiting, on_news=waker.post)
    except OSError as e:
        raise StartupFailed(f"cannot listen on the control port {peers.control_bind}:{peers.control_port}: "
                            f"{e.strerror} (set SM_CONTROL_PORT to a free port)") from None


def await_workers(server: ControlServer, peers: Peers) -> None:
    """Wait for every worker's hello; PeersUnreachable (told to those that came) when one does not."""
    if not peers.workers:
        return
    wait_s = peers.peer_wait_s
    log(f"waiting up to {wait_s:g} s for workers {', '.join(peers.workers)}")
    missing = server.wait_for_workers(list(peers.workers), time.monotonic() + wait_s)
    if missing:
        error = PeersUnreachable(f"workers {', '.join(missing)} did not report within {wait_s:g} s "
                                 f"(their train must reach {peers.master}:{peers.control_port})")
        server.end(int(error.exit_code), failure_text(error.kind, str(error)))
        raise error


def gather_profiles(server: ControlServer, workers: list[str], into: Path) -> list[str]:
    """The workers' profiler data, unpacked into this host's profiler folder for the job's one report
    (at most PROFILE_WAIT_S; a lost host is not waited for). Returns the report's notes on what is missing."""
    import tarfile

    from ..profiler.shipping import SHIP_CAP_BYTES, unpack

    started = time.monotonic()
    shipped = server.wait_for_profiles(workers, started + PROFILE_WAIT_S)
    notes, lost = [], server.lost_hosts()
    for host in workers:
        if host not in shipped:
            why = "lost during the job" if host in lost else f"its profiler data did not come within {PROFILE_WAIT_S:g} s"
            notes.append(f"host {host} is missing from this report: {why}")
            continue
        try:
            _, left_out = unpack(shipped[host], into)
        except (OSError, ValueError, tarfile.TarError) as e:
            notes.append(f"host {host} is missing from this report: its profiler data did not unpack ({e})")
            continue
        finally:
            shipped[host].unlink(missing_ok=True)
        if left_out:
            notes.append(f"host {host}: {left_out.get('files')} profiler file(s) of {left_out.get('bytes')} bytes past the "
                         f"{SHIP_CAP_BYTES >> 20} MiB a host ships are left out; they are in that host's output/profiler")
    log(f"profiler data of {len(shipped)} of {len(workers)} worker(s) gathered in {time.monotonic() - started:.2f} s")
    return notes


class Master:
    """The master role (see the module's docstring)."""

    def __init__(self, policy: Policy) -> None:
        self.policy = policy
        self.aborted: Optional[str] = None  # why the job is being ended early, once it is
        self.dogs: list[Watchdog] = []  # the stall watchdog, once the program runs

    def run(self, job: HostJob) -> JobOutcome:
        self.job = job
        plan, policy = job.plan, self.policy
        peers = policy.peers(plan)
        job.start_helpers()
        self.server = open_control(peers, job.token, job.waker, self.dogs)
        if plan.profiler_dir is not None and peers.workers:
            from ..profiler.shipping import SHIP_CAP_BYTES

            self.server.accept_profiles(plan.profiler_dir / ".incoming", SHIP_CAP_BYTES + (1 << 20))
        try:
            self.server.start_heartbeat()  # from the start: a worker that is in early must not think us lost
            await_workers(self.server, peers)
            self.server.broadcast(MessageType.START, token=job.token)
            policy.start_tasks(self)
            if plan.stall_timeout_s > 0:
                watch = StallWatch(plan.stall_timeout_s, time.monotonic())
                for host, rank in policy.expected_ranks(plan):
                    watch.expect(host, rank)
                self.dogs.append(Watchdog(watch, self._stalled).start())
            log(policy.start_line(plan))
            try:
                result = supervise(plan.argv, policy.program_env(self), plan.cwd, plan.grace_period_s, job.waker,
                                   lambda pid, signum: policy.forward(self, pid, signum), spare=job.helpers.pids,
                                   on_wake=self.why_end)
                policy.after_program(self, result)
            finally:
                for dog in self.dogs:
                    dog.stop()
            outcome = decide(self._view(result), lambda report: policy.where(plan, report))
            self.server.end(outcome.status, outcome.reason)
            if plan.profiler_dir is not None and peers.workers:
                job.report_notes += gather_profiles(self.server, list(peers.workers), plan.profiler_dir)
        finally:
            self.server.close()
        return outcome

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
        if self.policy.ends_on_task_failure:
            if self.server.has_reports(final=True):
                return "a task of the job failed"
            failed = self.server.failed_done()
            if failed:
                return f"the program on host {failed[0]} ended with status {failed[1]}"
        return None

    def _stalled(self, stall: Stall) -> None:
        """The stall watchdog's finding: every rank dumps its stack; then the job ends (why_end)."""
        log(f"Stalled: {stall.describe()}; every rank gets SIGABRT to log its Python stack")
        self.server.tell_ranks(MessageType.STALL)
        threading.Timer(STACK_DUMP_WAIT_S, self.job.waker.post).start()

    def _view(self, result: ProcessResult) -> JobView:
        plan = self.job.plan
        stall = self.dogs[0].stall if self.dogs else None
        # mpirun (or the program) may end while reports are in flight: wait for them when anything failed
        report = self.server.first_report(max_wait_s=2.0 if result.exit_code or self.server.has_reports() else 0.0)
        return JobView(
            program=result, program_name=self.policy.program_name(plan), script=str(plan.program.program_path),
            stall=stall.describe() if stall is not None else None, report=report,
            final_reports=self.server.has_reports(final=True), lost=tuple(self.server.lost_hosts()),
            failed_done=self.server.failed_done(),
        )
