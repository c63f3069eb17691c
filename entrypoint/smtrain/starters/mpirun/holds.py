"""The master's ssh connections to the workers, held for the whole job where restarts in place are asked
for (OpenSSH's ControlMaster): every attempt's mpirun opens its sessions through them (its
`-oControlPath`, smtrain.plan.mpirun_command), so a restart skips ssh's key exchange and login to each worker,
most of what an ssh session costs (benchmarks/bench_restart.py). Where a connection is
missing or has died, mpirun's ssh connects on its own, as without them.

Each connection is an `ssh -M -N` helper of this `train` (stopped with the others, or at once when the
attempts are over); its control socket appears once it has logged in."""
from __future__ import annotations

import os
import subprocess
import time
from typing import Sequence

from ...common.console import log
from ...common.signals import SignalWaker
from ...proc.helpers import HelperGroup, HelperSpec, stop_all
from ...wire.ssh_trust import CONTROL_PATH, held_socket

__all__ = ["HOLD_WAIT_S", "SshHolds"]

HOLD_WAIT_S = 15.0  # at most this long for the connections before the first mpirun (ssh's ConnectTimeout is 10 s)
_NAME = "ssh hold "


class SshHolds:
    """The connections held to `workers`, begun when made (see the module's docstring)."""

    def __init__(self, helpers: HelperGroup, workers: Sequence[str]) -> None:
        self.helpers = helpers
        self.began = time.monotonic()
        self.pending: dict[str, subprocess.Popen] = {}
        for host in workers:
            try:
                self.pending[host] = helpers.start(HelperSpec(_NAME + host, (
                    "ssh", "-M", "-N", "-T", "-oControlPersist=no", f"-oControlPath={CONTROL_PATH}", host))).process
            except OSError as e:  # no ssh client here: mpirun will say what it lacks
                log(f"cannot hold ssh connections to the workers ({e}): mpirun logs into them on its own")
                return

    def wait_ready(self, deadline: float, waker: SignalWaker) -> None:
        """Until every connection is up or has failed (by `deadline`, or until a stop `train` was asked for,
        which is left to the caller): before mpirun's first sessions, which would otherwise log in on their
        own beside them. Says how it went, once."""
        if not self.pending:
            return
        failed: list[str] = []
        while self.pending and time.monotonic() < deadline:
            for host, process in list(self.pending.items()):
                if os.path.exists(held_socket(host)):
                    del self.pending[host]
                elif process.poll() is not None:
                    failed.append(f"{host} (ssh exited {process.returncode})")
                    del self.pending[host]
            if self.pending:
                if waker.shutdown_requested() is not None:
                    break
                time.sleep(0.01)
        failed += [f"{host} (not up yet after {time.monotonic() - self.began:.1f} s)" for host in self.pending]
        self.pending = {}
        if failed:
            log(f"no ssh connection held to {', '.join(failed)}: mpirun logs into them on its own")
        else:
            log(f"ssh connections to the workers held for every attempt's mpirun ({time.monotonic() - self.began:.2f} s)")

    def release(self) -> None:
        """Close them all (the attempts are over): the workers' sshd sessions end before the job's end is told."""
        stop_all(self.helpers.take([_NAME]))
