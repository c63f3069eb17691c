"""The worker role, for every distribution kind, as the plan's `Coordination` says: starts what the
master needs of this host, says hello, takes what the master answers with and says it has joined,
does its part of each attempt while a link thread follows the master (run.link), and ends with the job's
outcome as the master tells it, or MasterLost when the master goes silent. What depends on how the ranks
start (sshd and the job's key, running a program of its own or passing signals on to ranks started from
the master), the rank starter's policy decides (smtrain.starters): the worker asks it, hands it data, and
branches on nothing of its own."""
from __future__ import annotations

import signal
import time
from typing import Optional

from ..common.console import log
from ..common.signals import SHUTDOWN_SIGNALS, WAKE
from ..config.settings import GRACE_PERIOD
from ..proc.supervise import supervise
from ..starters.registry import worker_policy
from ..wire.control_protocol import MessageType
from .job import HostJob
from .link import MasterLink, connect_to_master
from .outcome import JobOutcome
from .profiles import ship_profile

__all__ = ["Worker"]


class Worker:
    """The worker role (see the module's docstring): made once its host is prepared, with its helpers and what
    the starter serves started and the master's link up; `run` is the rest of the job."""

    def __init__(self, job: HostJob) -> None:
        coordination = job.plan.coordination
        assert coordination is not None, "the worker role needs the plan's coordination"
        self.job, self.plan, self.coordination = job, job.plan, coordination
        self.policy = worker_policy(coordination.starter)
        self.deadline = time.monotonic() + coordination.peer_wait_s  # for the master to be reachable
        job.start_helpers()
        self.policy.serve(job.helpers, self.deadline)
        log(f"connecting to the master {coordination.master}:{coordination.control_port}")
        self.client = connect_to_master(self.plan.host, coordination.master, coordination.control_port,
                                        self.deadline, coordination.peer_wait_s)
        self.link = MasterLink(self.client, coordination.master, coordination.heartbeat_timeout_s, job.waker,
                               job.ranks_progress_age).start()

    def run(self) -> JobOutcome:
        """Joined, this host's part of every attempt, then the master's word (and this host's profiler data)."""
        try:
            if self._join():
                self._attempts()
            outcome = self._await_end()
            if self.link.end is not None and self.plan.profiler_dir is not None:
                self.job.helpers.stop()  # first: the monitor writes its last samples
                ship_profile(self.link, self.plan.profiler_dir, self.job.started_at)
            return outcome
        finally:
            self.client.close()

    def _join(self) -> bool:
        """The starter takes what the master gave on hello (StartupFailed when it cannot); then `joined`.
        False when the job ended (or the master was lost) first: the outcome says so."""
        wait_s = max(self.deadline - time.monotonic(), self.coordination.heartbeat_timeout_s)
        admission = self.link.wait_welcome(time.monotonic() + wait_s)
        if admission is None and self.link.over():
            return False
        said = self.policy.admit(admission, self.coordination.master, wait_s)
        self.link.send(MessageType.JOINED)
        if said:
            log(said)
        return True

    def _attempts(self) -> None:
        """This host's part of each attempt, until the job is over for it: its own program where the starter
        runs one here (once the master starts the attempt), signals passed on to the ranks others started here;
        after a failed attempt, ready for the next once its part is gone."""
        number = 0
        while True:
            if self.policy.runs_program():
                token = self.link.wait_start((self.deadline if number == 0 else time.monotonic())
                                             + self.coordination.peer_wait_s, number)
                if token is None:
                    return
                self._run_program(token, number)
            asked = self._until_next_attempt(number)
            if asked is None:
                return
            self.policy.end_attempt_here()
            why_not = self.job.rewind_pipes()
            if why_not is not None:
                log(f"cannot take part in attempt {asked}: {why_not}")
            self.link.send(MessageType.READY, attempt=asked, **({"refused": why_not} if why_not else {}))
            number = asked

    def _run_program(self, token: str, number: int) -> None:
        """This host's program for attempt `number` (its companions with the first); `done` with its status."""
        job = self.job
        if number == 0:
            job.start_companions(token)
        log(self.coordination.start_line)
        result = supervise(self.plan.argv, job.program_env(token), self.plan.cwd, self.plan.settings[GRACE_PERIOD],
                           job.waker, spare=job.spared_pids, on_wake=self.link.why_end)
        self.link.send(MessageType.DONE, status=result.exit_code)

    def _until_next_attempt(self, number: int) -> Optional[int]:
        """Until the master asks every host to be ready for the attempt after `number` (its number) or the job is
        over for this host (None): meanwhile signals go to the ranks others started here, as the starter says, and
        SIGKILL follows once a shutdown's grace period is over."""
        waker, grace_s = self.job.waker, self.plan.settings[GRACE_PERIOD]
        forwarded: set[int] = set()
        grace_deadline: Optional[float] = None
        while not self.link.over():
            if self.link.next_attempt > number:
                return self.link.next_attempt
            timeout = 1.0 if grace_deadline is None else max(0.0, min(1.0, grace_deadline - time.monotonic()))
            for signum in waker.wait(timeout):
                if signum in (WAKE, signal.SIGCHLD) or (signum in forwarded and signum in SHUTDOWN_SIGNALS):
                    continue  # the same stop asked for twice (locally and by the master): one signal is enough
                count = self.policy.forward_here(signum, grace_s)
                if count is None:
                    continue
                log(f"forwarded {signal.Signals(signum).name} to {count} local rank(s)")
                if count or signum in SHUTDOWN_SIGNALS:
                    forwarded.add(signum)
                if signum in SHUTDOWN_SIGNALS and grace_deadline is None:
                    grace_deadline = time.monotonic() + grace_s
            if grace_deadline is not None and time.monotonic() >= grace_deadline:
                log("grace period is over: sending SIGKILL to the local ranks")
                self.policy.kill_here()
                grace_deadline = None
        return None

    def _await_end(self) -> JobOutcome:
        """The job's outcome, as the master tells it (the heartbeats bound the wait)."""
        while not self.link.over():
            if any(signum in SHUTDOWN_SIGNALS for signum in self.job.waker.wait(1.0)):
                log("this host's part has ended; waiting for the master to end the job")
        return self.link.outcome()
