"""The few Linux facilities smtrain needs that Python's os module lacks: the supervisor's process
control, and tee(2) for the Pipe-mode demultiplexer."""
from __future__ import annotations

import ctypes
import errno
import functools
import os
from typing import Collection

__all__ = ["PR_SET_CHILD_SUBREAPER", "PR_SET_PDEATHSIG", "alive", "become_subreaper", "children_of", "command_name",
    "descendants_of", "set_parent_death_signal", "tee"]

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36


@functools.lru_cache(maxsize=1)
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def _prctl(option: int, value: int) -> None:
    if _libc().prctl(option, value, 0, 0, 0) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


@functools.lru_cache(maxsize=1)
def _tee() -> ctypes._CFuncPtr:  # type: ignore[name-defined]
    function = _libc().tee
    function.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_size_t, ctypes.c_uint]
    function.restype = ctypes.c_ssize_t
    return function


def tee(fd_in: int, fd_out: int, length: int, flags: int = 0) -> int:
    """Duplicate up to `length` bytes at the head of pipe `fd_in` into pipe `fd_out` without consuming
    them (tee(2): page references, no copy); 0 when `fd_in` is empty and has no writer. Blocks while
    `fd_in` is empty, unless `flags` has os.SPLICE_F_NONBLOCK."""
    while True:
        copied = _tee()(fd_in, fd_out, length, flags)
        if copied >= 0:
            return copied
        err = ctypes.get_errno()
        if err != errno.EINTR:
            raise OSError(err, os.strerror(err))


def become_subreaper() -> None:
    """Orphaned descendants are re-parented to this process instead of PID 1 (a no-op as PID 1)."""
    _prctl(PR_SET_CHILD_SUBREAPER, 1)


def set_parent_death_signal(signum: int, parent: int) -> None:
    """The calling process gets `signum` when its parent dies (used in a child before exec).

    `parent` is the pid that forked us: had it died between the fork and this call, the kernel
    would never send the signal, so the process sends it to itself."""
    _prctl(PR_SET_PDEATHSIG, signum)
    if os.getppid() != parent:
        os.kill(os.getpid(), signum)


def _parents(zombies: bool = False) -> dict[int, int]:
    """pid -> parent pid of every live process (and of every zombie with `zombies`), from /proc."""
    parents = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue
        fields = stat[stat.rfind(b")") + 2:].split()
        if zombies or fields[0] != b"Z":
            parents[int(entry.name)] = int(fields[1])
    return parents


def children_of(pid: int) -> list[int]:
    """Live child processes of `pid`."""
    return [child for child, parent in _parents().items() if parent == pid]


def descendants_of(pid: int, prune: Collection[int] = (), zombies: bool = False) -> list[int]:
    """Live descendants of `pid`, at any depth, leaving out the processes in `prune` and theirs; with
    `zombies`, also those that exited and are not reaped yet."""
    children: dict[int, list[int]] = {}
    for child, parent in _parents(zombies).items():
        children.setdefault(parent, []).append(child)
    found, todo = [], list(children.get(pid, ()))
    while todo:
        current = todo.pop()
        if current in prune:
            continue
        found.append(current)
        todo.extend(children.get(current, ()))
    return found


def command_name(pid: int) -> bytes:
    """The process's command name (/proc/PID/comm), b"" if it is gone."""
    try:
        with open(f"/proc/{pid}/comm", "rb") as f:
            return f.read().strip()
    except OSError:
        return b""


def alive(pid: int) -> bool:
    """Whether `pid` is a live process (a zombie, exited but not yet reaped, is not)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
    except OSError:
        return False
