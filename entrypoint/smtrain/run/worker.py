"""The worker role, for every distribution kind, as the plan's `Coordination` says: starts what the
master needs of this host (sshd with a new host key, for mpirun), says hello (and trusts the job's ssh
key the master answers with), does its part while a link thread follows
the master (run.link) - runs its own program once the job starts and tells its status, or passes
signals on to the ranks mpirun started here - and ends with the job's outcome as the master tells it,
or MasterLost when the master goes silent."""
from __future__ import annotations

import base64
import os
import signal
import time
from pathlib import Path
from typing import Optional

from ..common.console import log
from ..common.signals import SHUTDOWN_SIGNALS, WAKE
from ..config.defaults import ABORT_GRACE_S
from ..errors import StartupFailed
from ..plan.coordination import RankStarter
from ..proc.rank_signals import signal_ranks, signal_ranks_once_started
from ..proc.supervise import supervise
from ..wire.control_protocol import PROFILE_CHUNK, MessageType
from ..wire.ssh_trust import parse_public_key
from .job import HostJob
from .link import MasterLink, connect_to_master
from .outcome import JobOutcome
from .ssh_keys import make_host_key, trust_key
from .sshd import start_sshd

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
        """The worker's part: helpers, sshd and the job's key (mpirun) or its own program, the master's link,
        then the master's word."""
        self.job = job
        coordination = job.plan.coordination
        assert coordination is not None, "the worker role needs the plan's coordination"
        self.coordination = coordination
        self.deadline = time.monotonic() + coordination.peer_wait_s  # for the master to be reachable
        job.start_helpers()
        serves_mpirun = coordination.starter is RankStarter.MPIRUN  # else this host starts its own program
        if serves_mpirun:
            make_host_key(coordination.ssh_dir)
            start_sshd(job.helpers, coordination.sshd_argv, coordination.sshd_port, self.deadline)
            log("sshd is up")
        log(f"connecting to the master {coordination.master}:{coordination.control_port}")
        client = connect_to_master(job.plan.host, coordination.master, coordination.control_port, self.deadline,
                                   coordination.peer_wait_s)
        try:
            self.link = MasterLink(client, coordination.master, coordination.heartbeat_timeout_s, job.waker).start()
            if serves_mpirun:
                self._trust_job_key()
                self._serve_ranks()
            else:
                self._run_program()
            outcome = self._await_end()
            if self.link.end is not None and job.plan.profiler_dir is not None:
                ship_profile(self.link, job)
            return outcome
        finally:
            client.close()

    def _trust_job_key(self) -> None:
        """The job's ssh key, as the master gives it on hello, becomes the one key this host's sshd
        accepts; then `ready` for attempt 0. StartupFailed when none comes or it is malformed: this
        host never falls back to another key."""
        coordination = self.coordination
        wait_s = max(self.deadline - time.monotonic(), coordination.heartbeat_timeout_s)
        key = self.link.wait_key(time.monotonic() + wait_s)
        if key is None:
            if self.link.over():
                return  # the job ended (or the master was lost) first: the outcome says so
            raise StartupFailed(f"the master {coordination.master} gave no ssh key for the job within {wait_s:.0f} s; "
                                "this host trusts no other key, so mpirun cannot reach it")
        try:
            public = parse_public_key(key)
        except ValueError as e:
            raise StartupFailed(f"the ssh key the master {coordination.master} gave for the job is malformed ({e}); "
                                "this host trusts no other key, so mpirun cannot reach it") from None
        trust_key(coordination.ssh_dir, public)
        self.link.send(MessageType.READY, attempt=0)
        log("trusting the job's ssh key (from the master)")

    def _run_program(self) -> None:
        """Once the master starts the job: this host's companions and program; `done` when it ended.
        Again for each restart the master asks for (the program has ended by then: `ready` at once)."""
        job, link = self.job, self.link
        deadline = self.deadline + self.coordination.peer_wait_s  # the master waits for every worker
        attempt = 0
        while True:
            token = link.wait_start(deadline, attempt)
            if token is None:
                return
            if attempt == 0:
                job.start_companions(token)
            log(self.coordination.start_line)
            result = supervise(job.plan.argv, job.program_env(token), job.plan.cwd, job.plan.grace_period_s,
                               job.waker, spare=job.spared_pids, on_wake=link.why_end)
            link.send(MessageType.DONE, status=result.exit_code)
            while not link.over() and link.restart_asked <= attempt:
                job.waker.wait(1.0)
            if link.over():
                return
            attempt = link.restart_asked
            self._ready_for(attempt)
            deadline = time.monotonic() + self.coordination.peer_wait_s

    def _ready_for(self, attempt: int) -> None:
        """This host's Pipe channels made ready for restart `attempt`; `ready` to the master, saying why
        not where they could not be."""
        why_not = self.job.restart_pipes()
        if why_not is not None:
            log(f"cannot take part in restart {attempt}: {why_not}")
        self.link.send(MessageType.READY, attempt=attempt, **({"refused": why_not} if why_not else {}))

    def _serve_ranks(self) -> None:
        """The ranks mpirun started here: forward signals to them until the job is over; SIGKILL them
        when a shutdown's grace period ends first."""
        me, waker, link = os.getpid(), self.job.waker, self.link
        forwarded: set[int] = set()
        grace_deadline: Optional[float] = None
        ready_for = 0
        while not link.over():
            if link.restart_asked > ready_for:  # the attempt failed: its ranks here must be gone first
                ready_for = link.restart_asked
                self._await_ranks_gone(me)
                self._ready_for(ready_for)
                forwarded.clear()
                grace_deadline = None
            timeout = 1.0 if grace_deadline is None else max(0.0, min(1.0, grace_deadline - time.monotonic()))
            for signum in waker.wait(timeout):
                if signum in (WAKE, signal.SIGCHLD):
                    continue
                if signum in forwarded and signum in SHUTDOWN_SIGNALS:
                    continue  # the same stop asked for twice (locally and by the master): one signal is enough
                name = signal.Signals(signum).name
                count = signal_ranks(me, signum)
                if not count and signum in SHUTDOWN_SIGNALS:  # mpirun is still starting them: they get it once there
                    signal_ranks_once_started(
                        me, signum, self.job.plan.grace_period_s,
                        lambda sent, name=name: log(f"forwarded {name} to {sent} local rank(s) once started"))
                if count or signum in SHUTDOWN_SIGNALS:
                    forwarded.add(signum)
                log(f"forwarded {name} to {count} local rank(s)")
                if signum in SHUTDOWN_SIGNALS and grace_deadline is None:
                    grace_deadline = time.monotonic() + self.job.plan.grace_period_s
            if grace_deadline is not None and time.monotonic() >= grace_deadline:
                log("grace period is over: sending SIGKILL to the local ranks")
                signal_ranks(me, signal.SIGKILL)
                grace_deadline = None

    def _await_ranks_gone(self, me: int) -> None:
        """Until no rank of the failed attempt runs here (mpirun's daemons end them); SIGKILL after
        ABORT_GRACE_S."""
        killed, deadline = False, time.monotonic() + ABORT_GRACE_S
        while signal_ranks(me, 0):
            if time.monotonic() >= deadline:
                if killed:
                    log("ranks of the failed attempt did not go after SIGKILL; going on")
                    return
                log("ranks of the failed attempt still run: sending them SIGKILL")
                signal_ranks(me, signal.SIGKILL)
                killed, deadline = True, time.monotonic() + 2.0
            time.sleep(0.05)

    def _await_end(self) -> JobOutcome:
        """The job's outcome, as the master tells it (the heartbeats bound the wait)."""
        while not self.link.over():
            if any(signum in SHUTDOWN_SIGNALS for signum in self.job.waker.wait(1.0)):
                log("this host's part has ended; waiting for the master to end the job")
        return self.link.outcome()
