"""sshd for mpirun on worker hosts: its command as the plan gives it (SMTRAIN_SSHD_CONFIG,
SMTRAIN_SSHD_PORT; the job's own host key and trusted key), started by `train`, key authentication
only (see docker/sshd_config)."""
from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Mapping, NamedTuple, Sequence

from ...config.setting_values import tcp_port
from ...errors import ConfigError, StartupFailed
from ...proc.helpers import Helper, HelperGroup

__all__ = ["DEFAULT_SSHD_CONFIG", "DEFAULT_SSHD_PORT", "SSHD", "SshdCommand", "listening", "sshd_command", "start_sshd"]

SSHD = "/usr/sbin/sshd"
DEFAULT_SSHD_CONFIG = "/etc/ssh/sshd_config"
DEFAULT_SSHD_PORT = 22


class SshdCommand(NamedTuple):
    """The sshd a worker serves for the master's mpirun."""
    argv: tuple[str, ...]
    port: int


def sshd_command(environ: Mapping[str, str], host_key: str, authorized_keys: str) -> SshdCommand:
    """sshd's command from SMTRAIN_SSHD_CONFIG and SMTRAIN_SSHD_PORT (ConfigError naming a bad one),
    with the job's host key and trusted key."""
    config = environ.get("SMTRAIN_SSHD_CONFIG") or DEFAULT_SSHD_CONFIG
    if not config.startswith("/"):
        raise ConfigError(f"environment variable SMTRAIN_SSHD_CONFIG: expected an absolute path, got {config!r}")
    port = tcp_port(environ, "SMTRAIN_SSHD_PORT", DEFAULT_SSHD_PORT)
    return SshdCommand((SSHD, "-D", "-e", "-f", config, "-p", str(port), "-h", host_key,
                        "-o", f"AuthorizedKeysFile={authorized_keys}"), port)


def start_sshd(helpers: HelperGroup, argv: Sequence[str], port: int, deadline: float) -> Helper:
    """Start sshd as one of `helpers` and wait until it listens; StartupFailed when it cannot."""
    if not os.access(argv[0], os.X_OK):
        raise StartupFailed(f"{argv[0]} is missing or not executable: workers need sshd for mpirun to reach them")
    Path("/run/sshd").mkdir(mode=0o755, parents=True, exist_ok=True)  # sshd's privilege-separation folder
    helper = helpers.start("sshd", argv)
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
