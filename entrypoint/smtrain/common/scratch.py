"""Per-process scratch entries in shared memory (progress files, Pipe spool folders) whose names say
who made them, so that what a killed process left behind (SIGKILL runs no clean-up) is removed by
the next process that makes one of the same kind, and nothing of a live process ever is.

Names are `<prefix><pid namespace>-<pid>-<random>`: a process judges only entries of its own PID
namespace (simulated hosts and containers may share /dev/shm while their PIDs mean different things).
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Optional

from .linux import alive

__all__ = ["make_scratch_dir", "make_scratch_file", "shm_folder"]


def shm_folder() -> Optional[str]:
    """/dev/shm where it is writable, else None (the system's temporary folder)."""
    return "/dev/shm" if os.access("/dev/shm", os.W_OK) else None


def _namespace() -> str:
    try:
        return str(os.stat("/proc/self/ns/pid").st_ino)
    except OSError:
        return "0"


def _remove_stale(folder: str, prefix: str) -> None:
    pattern = re.compile(re.escape(prefix) + r"(\d+)-(\d+)-")
    me = _namespace()
    for entry in os.scandir(folder):
        match = pattern.match(entry.name)
        if match and match.group(1) == me and not alive(int(match.group(2))):
            if entry.is_dir(follow_symlinks=False):
                import shutil  # here, as tempfile below: neither is loaded before a program's start

                shutil.rmtree(entry.path, ignore_errors=True)
            else:
                try:
                    os.unlink(entry.path)
                except OSError:
                    pass


def _named(prefix: str, folder: Optional[str]) -> tuple[str, str]:
    if not folder:
        import tempfile

        folder = tempfile.gettempdir()
    _remove_stale(folder, prefix)
    return f"{prefix}{_namespace()}-{os.getpid()}-", folder


def make_scratch_file(prefix: str, folder: Optional[str] = None) -> tuple[int, str]:
    """As tempfile.mkstemp (a new file only this user may read and write), named for this process, after
    removing dead processes' files."""
    name, folder = _named(prefix, folder)
    for _ in range(100):
        path = os.path.join(folder, name + os.urandom(6).hex())
        try:
            return os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600), path
        except FileExistsError:
            continue
    raise FileExistsError(f"no free name for a scratch file {name}... in {folder}")


def make_scratch_dir(prefix: str, folder: Optional[str] = None) -> Path:
    """As tempfile.mkdtemp, named for this process, after removing dead processes' folders."""
    import tempfile

    name, folder = _named(prefix, folder)
    return Path(tempfile.mkdtemp(prefix=name, dir=folder))
