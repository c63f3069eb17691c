"""sshd for mpirun on worker hosts, started by `train` with the command the plan gives it
(plan.mpirun_command.sshd_command), and whether it listens."""
from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Sequence

from ...errors import StartupFailed
from ...proc.helpers import Helper, HelperGroup, HelperSpec

__all__ = ["listening", "start_sshd", "wait_listening"]


def start_sshd(helpers: HelperGroup, argv: Sequence[str], port: int, deadline: float) -> Helper:
    """Start sshd as one of `helpers` and wait until it listens; StartupFailed when it cannot."""
    if not os.access(argv[0], os.X_OK):
        raise StartupFailed(f"{argv[0]} is missing or not executable: workers need sshd for mpirun to reach them")
    Path("/run/sshd").mkdir(mode=0o755, parents=True, exist_ok=True)  # sshd's privilege-separation folder
    helper = helpers.start(HelperSpec("sshd", tuple(argv)))
    if not wait_listening(port, deadline, helper.process):
        raise StartupFailed(f"sshd ({' '.join(argv)}) did not start listening on port {port}")
    return helper


def listening(port: int, tables: tuple[str, ...] = ("/proc/net/tcp", "/proc/net/tcp6")) -> bool:
    """Whether something listens on TCP `port` here (read from /proc: a probe connection would
    show up in sshd's log as a failed login)."""
    wanted = f":{port:04X}"
    for table in tables:
        try:
            with open(table) as f:
                for line in f.readlines()[1:]:
                    fields = line.split()
                    if fields[1].endswith(wanted) and fields[3] == "0A":  # 0A: LISTEN
                        return True
        except OSError:
            continue
    return False


def wait_listening(port: int, deadline: float, proc: subprocess.Popen) -> bool:
    """Whether sshd listens on `port` before `deadline` (False as soon as it died)."""
    while time.monotonic() < deadline and proc.poll() is None:
        if listening(port):
            return True
        time.sleep(0.02)
    return False
