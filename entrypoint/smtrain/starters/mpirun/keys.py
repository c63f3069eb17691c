"""The job's ssh keys (smtrain.wire.ssh_trust says which files): the master makes the job's key pair and
ssh's settings for the job's hosts, a worker its sshd's host key, and then trusts the one public key the
master gives it. Made with `ssh-keygen` (ed25519: a few milliseconds) in a root-only folder of the
container, never under /opt/ml and never logged; a new job makes new ones, a restart in place keeps them."""
from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Sequence

from ...common.atomic_file import write_atomically
from ...errors import StartupFailed
from ...wire.ssh_trust import AUTHORIZED_KEYS, CLIENT_CONFIG, HOST_KEY, JOB_KEY, client_config, parse_public_key

__all__ = ["make_host_key", "make_job_key", "trust_key"]


def _private_folder(folder: str) -> Path:
    path = Path(folder)
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.chmod(0o700)
    return path


def _keygen(key: Path, comment: str) -> None:
    for stale in (key, key.with_name(key.name + ".pub")):
        stale.unlink(missing_ok=True)  # ssh-keygen would ask before overwriting
    try:
        done = subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", comment, "-f", str(key)],
                              stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise StartupFailed(f"cannot make the job's ssh key {key}: {e}") from None
    if done.returncode != 0:
        raise StartupFailed(f"ssh-keygen could not make {key}: {done.stderr.strip()[-300:]}")


def make_job_key(folder: str, hosts: Sequence[str]) -> str:
    """The master's key pair for this job, new, and ssh's settings for logging into `hosts` (the workers)
    with it; returns its public key line."""
    try:
        settings = client_config(hosts)
    except ValueError as e:
        raise StartupFailed(f"cannot write ssh's settings for the job's hosts: {e}") from None
    key = _private_folder(folder) / JOB_KEY
    _keygen(key, "smtrain-job")
    write_atomically(key.with_name(CLIENT_CONFIG), settings, mode=0o600)
    return parse_public_key(key.with_name(JOB_KEY + ".pub").read_text())  # the line without its comment


def make_host_key(folder: str) -> None:
    """A worker's sshd host key, new, and no trusted key yet (a stale one from an earlier job in the same
    container goes before sshd starts)."""
    path = _private_folder(folder)
    (path / AUTHORIZED_KEYS).unlink(missing_ok=True)
    _keygen(path / HOST_KEY, "smtrain-host")


def trust_key(folder: str, key: str) -> None:
    """Make `key` (a checked public key line, smtrain.wire.ssh_trust.parse_public_key) the one key this
    worker's sshd accepts: written aside, then renamed into place."""
    write_atomically(_private_folder(folder) / AUTHORIZED_KEYS, key + "\n", mode=0o600)
