"""sshd for MPI on worker hosts: started by `train`, key authentication only (see docker/sshd_config)."""
from __future__ import annotations

import subprocess
import time
from pathlib import Path

from .supervise import spawn_helper

SSHD = "/usr/sbin/sshd"
DEFAULT_CONFIG = "/etc/ssh/sshd_config"


def start_sshd(config: str, port: int) -> subprocess.Popen:
    Path("/run/sshd").mkdir(mode=0o755, parents=True, exist_ok=True)  # sshd's privilege-separation folder
    return spawn_helper([SSHD, "-D", "-e", "-f", config, "-p", str(port)])


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

