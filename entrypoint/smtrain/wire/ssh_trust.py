"""The job's ssh trust, as master and workers share it: the master's `train` makes a key pair for the
job, and each worker's sshd accepts exactly its public half, which the master gives it over the
control channel (`trust {key}`). Here: where the files live in each container (a root-only folder
outside /opt/ml, made anew by every container: nothing of it is in the image), what a public key
given over the wire must look like, and the ssh client's settings for the job's hosts - for them alone:
the image's ssh configuration (docker/ssh_config) only includes the file the master writes, so any
other host a script reaches keeps the system's defaults (host keys checked, no job key offered)."""
from __future__ import annotations

import base64
import binascii
import re
from typing import Sequence

__all__ = ["AUTHORIZED_KEYS", "CLIENT_CONFIG", "CONTROL_PATH", "HOST_KEY", "JOB_KEY", "KEY_TYPE", "SSH_DIR",
           "client_config", "held_socket", "parse_public_key"]

SSH_DIR = "/run/smtrain/ssh"  # 0700, root's; /run is the container's own
JOB_KEY = "job_ed25519"  # the master's private key for this job (and .pub beside it)
HOST_KEY = "host_ed25519_key"  # a worker's sshd host key, made when its container starts
AUTHORIZED_KEYS = "authorized_keys"  # a worker's: the one key its sshd accepts, this job's
CLIENT_CONFIG = "job_hosts.conf"  # the master's: ssh's settings for the job's hosts (docker/ssh_config includes it)
KEY_TYPE = "ssh-ed25519"
# Where restarts in place are asked for: the master's ssh connection held to a worker for the job, which
# mpirun's ssh sessions share (OpenSSH's ControlPath; %n: the host as mpirun names it)
CONTROL_PATH = f"{SSH_DIR}/mux-%n"

_HOST_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,252}")  # no ssh pattern characters (* ? ! ,), no space
_LINE = re.compile(r"ssh-ed25519 ([A-Za-z0-9+/]+={0,2})(?: [\x21-\x7e ]{0,100})?")


def held_socket(host: str) -> str:
    """The control socket of the connection held to `host` (CONTROL_PATH as ssh expands it)."""
    return CONTROL_PATH.replace("%n", host)


def client_config(hosts: Sequence[str]) -> str:
    """ssh's settings for logging into the job's `hosts` as mpirun and the held connections do, in a `Host`
    block of exactly those names. Their host keys cannot be known (new every job), so they are not
    checked; the job's key is the one identity offered. Key exchange: curve25519, not OpenSSH 9's default
    sntrup761x25519, whose key generation costs ~80 ms of CPU a connection (mpirun opens one to every
    worker at once; docs/design.md, "The job's ssh keys"). ValueError naming a host that is not a plain
    host name (ssh would read it as a pattern, or as more than one)."""
    if not hosts:
        raise ValueError("no host was given")
    for host in hosts:
        if not isinstance(host, str) or _HOST_NAME.fullmatch(host) is None:
            raise ValueError(f"host {host!r} is not a plain host name (letters, digits, '.', '_', '-')")
    return (f"# Written by train for this job: ssh's settings for the job's hosts alone ({SSH_DIR}/{CLIENT_CONFIG})\n"
            f"Host {' '.join(hosts)}\n"
            f"  IdentityFile {SSH_DIR}/{JOB_KEY}\n"
            "  IdentitiesOnly yes\n"
            "  StrictHostKeyChecking no\n"
            "  UserKnownHostsFile /dev/null\n"
            "  LogLevel ERROR\n"
            "  BatchMode yes\n"
            "  ConnectTimeout 10\n"
            "  KexAlgorithms curve25519-sha256,curve25519-sha256@libssh.org\n")


def parse_public_key(text: object) -> str:
    """The one ed25519 public key `text` must be (an OpenSSH public key line), without its comment;
    ValueError saying what is wrong. A key line with options (`command=...`), several lines or another
    key type is refused: the worker's sshd must trust exactly one plain key."""
    if not isinstance(text, str) or not text.strip():
        raise ValueError("no key was given")
    line = text.strip()
    match = _LINE.fullmatch(line)
    if match is None:
        raise ValueError(f"expected one '{KEY_TYPE} <base64>' line, got {line[:40]!r}")
    try:
        blob = base64.b64decode(match.group(1), validate=True)
    except binascii.Error:
        raise ValueError("its base64 part does not decode") from None
    # the blob: string "ssh-ed25519", string <32-byte key>, each with a 4-byte big-endian length
    name_len = int.from_bytes(blob[:4], "big")
    if blob[4:4 + name_len] != KEY_TYPE.encode() or len(blob) != 4 + name_len + 4 + 32 \
            or int.from_bytes(blob[4 + name_len:8 + name_len], "big") != 32:
        raise ValueError("its base64 part is not an ed25519 public key")
    return f"{KEY_TYPE} {match.group(1)}"
