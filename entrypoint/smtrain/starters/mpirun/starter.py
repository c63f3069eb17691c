"""The master's mpirun starts every rank, on the workers through their sshd (plan.mpirun_command.MpirunSpec):
the master makes the job's ssh key and gives its public half to each worker as it joins, a worker serves
sshd and trusts that key alone; where the spec says so the master holds an ssh connection to each worker
for every attempt's mpirun. Signals reach the ranks through their launchers on each host (Open MPI's
daemons do not pass them on); mpirun aborts the job itself when a rank fails, and the job ends when
mpirun does."""
from __future__ import annotations

import os
import signal
import time
from typing import Optional, Sequence

from ...common.console import log
from ...common.signals import SHUTDOWN_SIGNALS, SignalWaker
from ...config.defaults import ABORT_GRACE_S
from ...errors import StartupFailed
from ...plan.mpirun_command import MpirunSpec
from ...proc.helpers import HelperGroup
from ...proc.supervise import ProcessResult
from ...wire.ssh_trust import parse_public_key
from ..policy import MasterSide, WorkerSide
from .holds import HOLD_WAIT_S, SshHolds
from .keys import make_host_key, make_job_key, trust_key
from .reach import unanswered
from .rank_signals import signal_ranks, signal_ranks_once_started
from .sshd import start_sshd

__all__ = ["MpirunMaster", "MpirunWorker"]

_NOT_REACHABLE = "this host trusts no other key, so mpirun cannot reach it"


class MpirunMaster(MasterSide):
    """mpirun from the master (see the module's docstring): the master's side."""

    joined = "it trusts the job's ssh key"

    def __init__(self, spec: MpirunSpec) -> None:
        self.spec = spec
        self._holds: Optional[SshHolds] = None  # the master's held connections, from `hold` to `release`

    def admission(self, workers: tuple[str, ...]) -> str:
        """The job's key pair, new, and ssh's settings for the workers; its public half for each worker."""
        return make_job_key(self.spec.ssh_dir, workers) if self.spec.ssh_dir else ""

    def not_admitted(self, hosts: list[str]) -> str:
        """Why mpirun cannot start: the workers that did not take the job's key."""
        return (f"workers {', '.join(hosts)} did not take the job's ssh key (see their log and output/failure): "
                "mpirun cannot reach them")

    def unreachable(self, workers: Sequence[str], deadline: float) -> Optional[str]:
        """Workers whose sshd mpirun's ssh cannot reach (a security group that lets the control port through,
        not ssh's): mpirun would fail to start its daemons there, saying only that it could not."""
        missing = unanswered(workers, self.spec.ssh_port, deadline)
        if not missing:
            return None
        return (f"workers {', '.join(missing)} joined the job, but their sshd did not answer on port "
                f"{self.spec.ssh_port}: mpirun cannot start their ranks")

    def hold(self, helpers: HelperGroup) -> None:
        """The connections held to the workers for every attempt's mpirun (where the spec asks for them)."""
        self._holds = SshHolds(helpers, self.spec.held)

    def before_attempt(self, waker: SignalWaker) -> None:
        """Until the held connections are up (bounded), before mpirun's sessions."""
        if self._holds is not None:
            self._holds.wait_ready(time.monotonic() + HOLD_WAIT_S, waker)

    def release(self) -> None:
        """The held connections closed."""
        if self._holds is not None:
            self._holds.release()

    def signal_here(self, pid: int, signum: int, grace_s: float, spared: Sequence[int]) -> Optional[str]:
        """To each rank launcher here (and, as `tells_workers` says, on every worker)."""
        ranks = _signal_here(pid, signum, grace_s)
        return f"forwarded {signal.Signals(signum).name} to {ranks} local rank(s) and to every worker"

    def senders_gone(self, result: ProcessResult) -> bool:
        """mpirun's own end (not one by a signal, which may leave the workers' launchers running for a
        moment) means every rank's launcher has ended."""
        return result.term_signal is None and result.started


class MpirunWorker(WorkerSide):
    """mpirun from the master: a worker's side, which serves sshd and trusts the job's key alone."""

    def __init__(self, spec: MpirunSpec) -> None:
        self.spec = spec

    def serve(self, helpers: HelperGroup, deadline: float) -> None:
        """A new host key and sshd, listening before the hello."""
        assert self.spec.sshd is not None, "a worker of an mpirun job serves sshd"
        make_host_key(self.spec.ssh_dir)
        start_sshd(helpers, self.spec.sshd.argv, self.spec.sshd.port, deadline)
        log("sshd is up")

    def admit(self, admission: Optional[str], master_host: str, waited_s: float) -> str:
        """The job's key, as the master gave it, becomes the one key this host's sshd accepts; StartupFailed
        when none came or it is malformed: this host never falls back to another key."""
        if admission is None:
            raise StartupFailed(f"the master {master_host} gave no ssh key for the job within {waited_s:.0f} s; {_NOT_REACHABLE}")
        try:
            public = parse_public_key(admission)
        except ValueError as e:
            raise StartupFailed(f"the ssh key the master {master_host} gave for the job is malformed ({e}); "
                                f"{_NOT_REACHABLE}") from None
        trust_key(self.spec.ssh_dir, public)
        return "trusting the job's ssh key (from the master)"

    def forward_here(self, signum: int, grace_s: float) -> Optional[int]:
        """To the ranks mpirun started here, through their launchers."""
        return _signal_here(os.getpid(), signum, grace_s)

    def kill_here(self) -> None:
        signal_ranks(os.getpid(), signal.SIGKILL)

    def end_attempt_here(self) -> None:
        """Until no rank of the failed attempt runs here (mpirun's daemons end them); SIGKILL after
        ABORT_GRACE_S."""
        me = os.getpid()
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


def _signal_here(root: int, signum: int, grace_period_s: float) -> int:
    """`signum` to the rank launchers mpirun (or its daemon) started under `root`; a stop that comes while
    mpirun is still starting them reaches them once they are there. How many got it now."""
    count = signal_ranks(root, signum)
    if not count and signum in SHUTDOWN_SIGNALS:
        name = signal.Signals(signum).name
        signal_ranks_once_started(root, signum, grace_period_s,
                                  lambda sent: log(f"forwarded {name} to {sent} local rank(s) once started"))
    return count
