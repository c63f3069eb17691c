"""The master's mpirun starts every rank, on the workers through their sshd: the master makes the
job's ssh key and gives its public half to each worker as it joins, a worker serves sshd and trusts
that key alone; where restarts in place are asked for the master holds an ssh connection to each
worker for every attempt's mpirun. Signals reach the ranks through their launchers on each host
(Open MPI's daemons do not pass them on); mpirun aborts the job itself when a rank fails, and the
job ends when mpirun does."""
from __future__ import annotations

import os
import signal
import time
from typing import Any, Optional

from ...common.console import log
from ...common.signals import SHUTDOWN_SIGNALS, WAKE, SignalWaker
from ...config.defaults import ABORT_GRACE_S
from ...errors import StartupFailed
from ...proc.helpers import HelperGroup
from ...proc.supervise import ProcessResult
from ...wire.control_protocol import MessageType
from ...wire.ssh_trust import AUTHORIZED_KEYS, HOST_KEY, parse_public_key
from ..base import MasterSide, RankStarter, WorkerSide
from .holds import HOLD_WAIT_S, SshHolds
from .keys import make_host_key, make_job_key, trust_key
from .rank_signals import signal_ranks, signal_ranks_once_started
from .sshd import SshdCommand, start_sshd

__all__ = ["Mpirun"]

_NOT_REACHABLE = "this host trusts no other key, so mpirun cannot reach it"


class Mpirun(RankStarter):
    """mpirun from the master (see the module's docstring). `ssh_dir`: the job's keys (empty: no host logs
    into another); `sshd`: what this worker serves (None on the master); `held`: the workers the master
    holds a connection to."""

    name = "mpirun"
    signals = "rank-launchers"  # to each rank launcher under mpirun/orted (mpirun would not pass them on)
    joined = "it trusts the job's ssh key"

    def __init__(self, ssh_dir: str, sshd: Optional[SshdCommand], held: tuple[str, ...]) -> None:
        self.ssh_dir, self.sshd, self.held = ssh_dir, sshd, held
        self._holds: Optional[SshHolds] = None

    @staticmethod
    def sshd_files(ssh_dir: str) -> tuple[str, str]:
        """The host key and the trusted-key file a worker's sshd is given."""
        return os.path.join(ssh_dir, HOST_KEY), os.path.join(ssh_dir, AUTHORIZED_KEYS)

    def to_json(self) -> dict[str, Any]:
        """What it will do, with the sshd a worker serves, the keys' folder and the held connections."""
        return {**super().to_json(), "sshd": list(self.sshd.argv) if self.sshd else [], "ssh_dir": self.ssh_dir,
                "ssh_held": list(self.held)}

    # -- the master's steps ------------------------------------------------------------------------
    def admission(self, workers: tuple[str, ...]) -> str:
        """The job's key pair, new, and ssh's settings for the workers; its public half for each worker."""
        return make_job_key(self.ssh_dir, workers) if self.ssh_dir else ""

    def not_admitted(self, hosts: list[str]) -> str:
        """Why mpirun cannot start: the workers that did not take the job's key."""
        return (f"workers {', '.join(hosts)} did not take the job's ssh key (see their log and output/failure): "
                "mpirun cannot reach them")

    def master_begin(self, helpers: HelperGroup) -> None:
        """The connections held to the workers for every attempt's mpirun (where asked for)."""
        self._holds = SshHolds(helpers, self.held)

    def before_attempt(self, waker: SignalWaker) -> None:
        """Until the held connections are up (bounded), before mpirun's sessions."""
        if self._holds is not None:
            self._holds.wait_ready(time.monotonic() + HOLD_WAIT_S, waker)

    def master_end(self) -> None:
        """The held connections closed."""
        if self._holds is not None:
            self._holds.release()

    def forward(self, master: MasterSide, pid: int, signum: int) -> None:
        """To each rank launcher here and, through the control channel, on every worker."""
        ranks = _signal_here(pid, signum, master.grace_period_s)
        master.tell_workers(MessageType.SIGNAL, signum=signum)
        log(f"forwarded {signal.Signals(signum).name} to {ranks} local rank(s) and to every worker")

    def senders_gone(self, result: ProcessResult) -> bool:
        """mpirun's own end (not one by a signal, which may leave the workers' launchers running for a
        moment) means every rank's launcher has ended."""
        return result.term_signal is None and result.started

    # -- the worker's steps ------------------------------------------------------------------------
    def worker_begin(self, helpers: HelperGroup, deadline: float) -> None:
        """A new host key and sshd, listening before the hello."""
        assert self.sshd is not None, "a worker of an mpirun job serves sshd"
        make_host_key(self.ssh_dir)
        start_sshd(helpers, self.sshd.argv, self.sshd.port, deadline)
        log("sshd is up")

    def admit(self, admission: Optional[str], master: str, waited_s: float) -> str:
        """The job's key, as the master gave it, becomes the one key this host's sshd accepts; StartupFailed
        when none came or it is malformed: this host never falls back to another key."""
        if admission is None:
            raise StartupFailed(f"the master {master} gave no ssh key for the job within {waited_s:.0f} s; {_NOT_REACHABLE}")
        try:
            public = parse_public_key(admission)
        except ValueError as e:
            raise StartupFailed(f"the ssh key the master {master} gave for the job is malformed ({e}); "
                                f"{_NOT_REACHABLE}") from None
        trust_key(self.ssh_dir, public)
        return "trusting the job's ssh key (from the master)"

    def worker_part(self, worker: WorkerSide) -> None:
        """The ranks mpirun started here: signals forwarded to them until the job is over, SIGKILL when a
        shutdown's grace period ends first; after a failed attempt, `ready` once they are gone."""
        me, waker = os.getpid(), worker.waker
        forwarded: set[int] = set()
        grace_deadline: Optional[float] = None
        ready_for = 0
        while not worker.over():
            if worker.restart_asked() > ready_for:  # the attempt failed: its ranks here must be gone first
                ready_for = worker.restart_asked()
                _await_ranks_gone(me)
                worker.ready_for(ready_for)
                forwarded.clear()
                grace_deadline = None
            timeout = 1.0 if grace_deadline is None else max(0.0, min(1.0, grace_deadline - time.monotonic()))
            for signum in waker.wait(timeout):
                if signum in (WAKE, signal.SIGCHLD):
                    continue
                if signum in forwarded and signum in SHUTDOWN_SIGNALS:
                    continue  # the same stop asked for twice (locally and by the master): one signal is enough
                count = _signal_here(me, signum, worker.grace_period_s)
                log(f"forwarded {signal.Signals(signum).name} to {count} local rank(s)")
                if count or signum in SHUTDOWN_SIGNALS:
                    forwarded.add(signum)
                if signum in SHUTDOWN_SIGNALS and grace_deadline is None:
                    grace_deadline = time.monotonic() + worker.grace_period_s
            if grace_deadline is not None and time.monotonic() >= grace_deadline:
                log("grace period is over: sending SIGKILL to the local ranks")
                signal_ranks(me, signal.SIGKILL)
                grace_deadline = None


def _signal_here(root: int, signum: int, grace_period_s: float) -> int:
    """`signum` to the rank launchers mpirun (or its daemon) started under `root`; a stop that comes while
    mpirun is still starting them reaches them once they are there. How many got it now."""
    count = signal_ranks(root, signum)
    if not count and signum in SHUTDOWN_SIGNALS:
        name = signal.Signals(signum).name
        signal_ranks_once_started(root, signum, grace_period_s,
                                  lambda sent: log(f"forwarded {name} to {sent} local rank(s) once started"))
    return count


def _await_ranks_gone(me: int) -> None:
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
