"""MPI (Horovod): the master runs mpirun, which starts every rank through the workers' sshd; mpirun
itself aborts the job when a rank fails, so the master does not. A worker forwards the signals it
gets (its own, and those the master passes on) to its local ranks, with the grace period."""
from __future__ import annotations

import os
import shlex
import signal
import time
from typing import Optional

from ...common import linux
from ...common.console import log
from ...common.signals import SHUTDOWN_SIGNALS, WAKE
from ...plan.launch import LaunchPlan, MpiPlan
from ...wire.control_protocol import MessageType
from ...wire.rank_failure import RankFailure
from ..policy import MasterRole, Policy, WorkerRole
from ..sshd import start_sshd

__all__ = ["MpiPolicy", "signal_ranks"]

# The processes that start ranks: their children are the rank launchers.
RANK_PARENTS = {b"orted", b"mpirun", b"orterun", b"prted", b"prterun"}


def signal_ranks(root: int, signum: int) -> int:
    """Send `signum` to every rank launcher under `root` (children of mpirun/orted); how many got it."""
    sent = 0
    for daemon in [root, *linux.descendants_of(root)]:
        if linux.command_name(daemon) in RANK_PARENTS:
            for rank in linux.children_of(daemon):
                try:
                    os.kill(rank, signum)
                    sent += 1
                except ProcessLookupError:
                    pass
    return sent


def _mpi(plan: LaunchPlan) -> MpiPlan:
    assert plan.mpi is not None
    return plan.mpi


class MpiPolicy(Policy):
    """MPI (Horovod): mpirun on the master; sshd and signal forwarding on the workers."""

    def peers(self, plan: LaunchPlan) -> MpiPlan:
        return _mpi(plan)

    def expected_ranks(self, plan: LaunchPlan) -> list[tuple[str, int]]:
        """Every rank of the job, as mpirun places them (--map-by slot: host after host)."""
        layout = _mpi(plan).layout
        return [(layout.hosts[rank // layout.processes_per_host], rank) for rank in range(layout.num_processes)]

    def start_line(self, plan: LaunchPlan) -> str:
        layout = _mpi(plan).layout
        return (f"host {plan.host}: starting {layout.num_processes} ranks on {', '.join(layout.hosts)}: "
                f"{shlex.join(plan.argv)}")

    def forward(self, master: MasterRole, pid: int, signum: int) -> None:
        ranks = signal_ranks(pid, signum)
        master.server.broadcast(MessageType.SIGNAL, signum=signum)
        log(f"forwarded {signal.Signals(signum).name} to {ranks} local rank(s) and to every worker")

    def where(self, plan: LaunchPlan, report: RankFailure) -> str:
        return f"{plan.program.program_path} (rank {report.rank}, local rank {report.local_rank}, on host {report.host})"

    def program_name(self, plan: LaunchPlan) -> str:
        return f"mpirun ({plan.program.program_path})"

    def before_connect(self, worker: WorkerRole) -> None:
        mpi = _mpi(worker.job.plan)
        start_sshd(worker.job.helpers, mpi.sshd_argv, mpi.sshd_port, worker.deadline)
        log("sshd is up")

    def work(self, worker: WorkerRole) -> None:
        """Forward signals to this host's ranks until the job is over; SIGKILL them when a shutdown's
        grace period ends first."""
        me, waker, link = os.getpid(), worker.job.waker, worker.link
        forwarded: set[int] = set()
        grace_deadline: Optional[float] = None
        while not link.over():
            timeout = 1.0 if grace_deadline is None else max(0.0, min(1.0, grace_deadline - time.monotonic()))
            for signum in waker.wait(timeout):
                if signum in (WAKE, signal.SIGCHLD):
                    continue
                if signum in forwarded and signum in SHUTDOWN_SIGNALS:
                    continue  # the same stop asked for twice (locally and by the master): one signal is enough
                count = signal_ranks(me, signum)
                if count:
                    forwarded.add(signum)
                log(f"forwarded {signal.Signals(signum).name} to {count} local rank(s)")
                if signum in SHUTDOWN_SIGNALS and grace_deadline is None:
                    grace_deadline = time.monotonic() + worker.job.plan.grace_period_s
            if grace_deadline is not None and time.monotonic() >= grace_deadline:
                log("grace period is over: sending SIGKILL to the local ranks")
                signal_ranks(me, signal.SIGKILL)
                grace_deadline = None
