"""The worker role, for every distribution kind, as the plan's `Coordination` says: starts what the
master needs of this host, says hello, takes what the master answers with and says it has joined,
does its part while a link thread follows the master (run.link), and ends with the job's outcome as
the master tells it, or MasterLost when the master goes silent. What depends on how the ranks start
(sshd and the job's key, running a program of its own or passing signals on to ranks started from
the master), the plan's rank starter does (smtrain.starters): the worker calls its steps and branches
on none of its own."""
from __future__ import annotations

import base64
import time
from pathlib import Path
from typing import Optional

from ..common.console import log
from ..common.signals import SHUTDOWN_SIGNALS, SignalWaker
from ..proc.supervise import supervise
from ..wire.control_protocol import PROFILE_CHUNK, MessageType
from .job import HostJob
from .link import MasterLink, connect_to_master
from .outcome import JobOutcome

__all__ = ["Worker", "ship_profile"]


def ship_profile(link: MasterLink, job: HostJob) -> None:
    """This host's profiler data to the master, once the job is over, for the job's one report: the
    helpers stopped first (the monitor writes its last samples), the step events of ranks that left no
    digest of their own digested (smtrain.profiler.digests: the report reads those instead of parsing
    every rank's events), then the files in pieces."""
    from ..profiler.shipping import pack

    started = time.monotonic()
    job.helpers.stop()
    folder = job.plan.profiler_dir
    assert folder is not None
    try:
        _digest_the_rest(folder, job.started_at)
    except Exception as e:  # whatever went wrong, the data still ships: the report parses these ranks' events
        log(f"could not digest this host's step events ({type(e).__name__}: {e}); the report will parse them")
    packed = pack(folder, job.started_at - 1.0)
    data = packed.data
    for at in range(0, len(data), PROFILE_CHUNK):
        piece = data[at:at + PROFILE_CHUNK]
        link.send(MessageType.PROFILE, data=base64.b64encode(piece).decode(), last=at + PROFILE_CHUNK >= len(data))
    left = f"; {packed.left_out_files} file(s) past the cap left out" if packed.left_out_files else ""
    log(f"sent {packed.files} profiler file(s) ({len(data)} bytes packed) to the master in "
        f"{time.monotonic() - started:.2f} s{left}")


def _digest_the_rest(folder: Path, since: float) -> None:
    """Digests of this host's ranks whose own (written at their exit) is missing or does not cover all
    their event files: killed, or restarted in place."""
    from ..profiler.digest_files import covering, open_files
    from ..profiler.events import event_files

    files = list(event_files([folder]))
    rest = {node for _, node in files} - set(covering([folder], since))
    if rest:
        from ..profiler import digests
        from ..profiler.events import read_folder

        read_open = open_files(files, rest)
        digests.write(folder, digests.digest(e for e in read_folder([folder], rest.__contains__) if e.end >= since),
                      read_open)


class Worker:
    """The worker role (see the module's docstring)."""

    def run(self, job: HostJob) -> JobOutcome:
        """The worker's part: helpers, what the starter serves, the master's link and the admission it
        gives, the starter's part while the job runs, then the master's word."""
        self.job = job
        coordination = job.plan.coordination
        assert coordination is not None, "the worker role needs the plan's coordination"
        self.coordination, starter = coordination, coordination.starter
        self.deadline = time.monotonic() + coordination.peer_wait_s  # for the master to be reachable
        job.start_helpers()
        starter.worker_begin(job.helpers, self.deadline)
        log(f"connecting to the master {coordination.master}:{coordination.control_port}")
        client = connect_to_master(job.plan.host, coordination.master, coordination.control_port, self.deadline,
                                   coordination.peer_wait_s)
        try:
            self.link = MasterLink(client, coordination.master, coordination.heartbeat_timeout_s, job.waker).start()
            if self._join():
                starter.worker_part(self)
            outcome = self._await_end()
            if self.link.end is not None and job.plan.profiler_dir is not None:
                ship_profile(self.link, job)
            return outcome
        finally:
            client.close()

    def _join(self) -> bool:
        """The starter takes what the master gave on hello (StartupFailed when it cannot); then `joined`.
        False when the job ended (or the master was lost) first: the outcome says so."""
        wait_s = max(self.deadline - time.monotonic(), self.coordination.heartbeat_timeout_s)
        admission = self.link.wait_welcome(time.monotonic() + wait_s)
        if admission is None and self.link.over():
            return False
        said = self.coordination.starter.admit(admission, self.coordination.master, wait_s)
        self.link.send(MessageType.JOINED)
        if said:
            log(said)
        return True

    # -- what the rank starter's steps use of the worker (smtrain.starters.base.WorkerSide) ------------
    @property
    def grace_period_s(self) -> float:
        """How long the job's processes get between SIGTERM and SIGKILL."""
        return self.job.plan.grace_period_s

    @property
    def waker(self) -> SignalWaker:
        """This `train`'s signals and news, as loop events."""
        return self.job.waker

    def over(self) -> bool:
        """Whether the job is over for this host (the master said so, or was lost)."""
        return self.link.over()

    def restart_asked(self) -> int:
        """The restart in place the master last asked for (0: none)."""
        return self.link.restart_asked

    def wait_start(self, attempt: int) -> Optional[str]:
        """The job's token once the master starts `attempt` (bounded: the master waits for every worker
        first); None when the job ended first."""
        deadline = (self.deadline if attempt == 0 else time.monotonic()) + self.coordination.peer_wait_s
        return self.link.wait_start(deadline, attempt)

    def run_program(self, token: str, attempt: int) -> None:
        """This host's program for `attempt` (its companions with the first); `done` with its status."""
        job = self.job
        if attempt == 0:
            job.start_companions(token)
        log(self.coordination.start_line)
        result = supervise(job.plan.argv, job.program_env(token), job.plan.cwd, job.plan.grace_period_s,
                           job.waker, spare=job.spared_pids, on_wake=self.link.why_end)
        self.link.send(MessageType.DONE, status=result.exit_code)

    def ready_for(self, attempt: int) -> None:
        """This host's Pipe channels made ready for restart `attempt`; `ready` to the master, saying why
        not where they could not be."""
        why_not = self.job.restart_pipes()
        if why_not is not None:
            log(f"cannot take part in restart {attempt}: {why_not}")
        self.link.send(MessageType.READY, attempt=attempt, **({"refused": why_not} if why_not else {}))

    def _await_end(self) -> JobOutcome:
        """The job's outcome, as the master tells it (the heartbeats bound the wait)."""
        while not self.link.over():
            if any(signum in SHUTDOWN_SIGNALS for signum in self.job.waker.wait(1.0)):
                log("this host's part has ended; waiting for the master to end the job")
        return self.link.outcome()
