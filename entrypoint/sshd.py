"""sshd for MPI on worker hosts: started by `train`, key authentication only (see docker/sshd_config)."""
from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

SSHD = "/usr/sbin/sshd"
DEFAULT_CONFIG = "/etc/ssh/sshd_config"


def start_sshd(config: str, port: int) -> subprocess.Popen:
    Path("/run/sshd").mkdir(mode=0o755, parents=True, exist_ok=True)  # sshd's privilege-separation folder
    return subprocess.Popen(
        [SSHD, "-D", "-e", "-f", config, "-p", str(port)], stdin=subprocess.DEVNULL, stdout=2, start_new_session=True
    )


def wait_listening(port: int, deadline: float, proc: subprocess.Popen) -> bool:
    """Whether sshd accepts connections on this host's `port` before `deadline` (False if it died)."""
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return True
        except OSError:
            time.sleep(0.05)
    return False

