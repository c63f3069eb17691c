"""Turning how a program ended into SageMaker's outcome: exit status and `output/failure`.

The failure file holds at most 1 KiB: the error class (the toolkit's, or the Python exception found
at the end of a traceback in the program's stderr), what happened, and the last lines of stderr.
A failure file the program wrote itself is kept.
"""
from __future__ import annotations

import os
import re
import signal
from pathlib import Path
from typing import Callable, NamedTuple, Optional, Union

from ..errors import FailureKind
from .supervise import ProcessResult

__all__ = [
    "FileState", "describe_program_failure", "failure_text", "oom_kill_count", "python_exception",
    "report_failure", "report_success", "write_atomically",
]

FAILURE_FILE_LIMIT = 1024
# The last line of a Python traceback: "pkg.module.SomeError: message" or "SomeError".
_EXCEPTION_LINE = re.compile(rb"^([A-Za-z_][\w.]*)(?::|$)")


class FileState(NamedTuple):
    """Identity of a file at start, to tell later whether the program wrote it."""

    exists: bool
    inode: int = 0
    mtime_ns: int = 0
    size: int = 0

    @classmethod
    def of(cls, path: Path) -> "FileState":
        try:
            st = path.stat()
        except OSError:
            return cls(False)
        return cls(True, st.st_ino, st.st_mtime_ns, st.st_size)


def python_exception(stderr_tail: bytes) -> Optional[str]:
    """The exception class of the last Python traceback in the tail, if the tail ends with one."""
    lines = stderr_tail.splitlines()
    try:
        start = max(i for i, line in enumerate(lines) if line.startswith(b"Traceback (most recent call last):"))
    except ValueError:
        return None
    for line in lines[start + 1:]:
        if not line.startswith((b" ", b"\t")):
            match = _EXCEPTION_LINE.match(line)
            if match:
                return match.group(1).decode("ascii", "replace")
    return None


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def describe_program_failure(result: ProcessResult, program: str, oom_killed: bool) -> tuple[Union[FailureKind, str], str]:
    """(error class, one-line description) for a program that did not end with status 0."""
    if result.term_signal is not None:
        what = f"program {program} was killed by {signal_name(result.term_signal)} (exit status {result.exit_code})"
        if result.killed_after_grace:
            return FailureKind.PROGRAM_KILLED, f"{what} after {signal_name(result.shutdown_signal or signal.SIGTERM)} and the grace period"
        if oom_killed:
            return FailureKind.OUT_OF_MEMORY, f"{what}; the kernel's OOM killer ran in this container: out of memory"
        # An uncaught exception, then a crash while the interpreter shut down (TensorFlow's gRPC
        # server often segfaults there): the exception is the cause.
        exception = python_exception(result.stderr_tail) if result.shutdown_signal is None else None
        if exception is not None:
            return exception, f"{what} after it printed a {exception} traceback"
        return FailureKind.PROGRAM_KILLED, what
    what = f"program {program} exited with status {result.exit_code}"
    if result.shutdown_signal is not None:
        what += f" after {signal_name(result.shutdown_signal)}"
    return python_exception(result.stderr_tail) or FailureKind.PROGRAM_ERROR, what


def failure_text(kind: Union[FailureKind, str], what: str, stderr_tail: bytes = b"", limit: int = FAILURE_FILE_LIMIT) -> str:
    """`kind: what`, then as many whole last lines of stderr as fit in `limit` bytes of UTF-8.
    `kind` is the toolkit's FailureKind, or the name of the program's Python exception."""
    head = f"{kind.value if isinstance(kind, FailureKind) else kind}: {what}\n"
    room = limit - len(head.encode("utf-8")) - len("stderr (last lines):\n")
    lines = stderr_tail.decode("utf-8", "replace").splitlines()
    kept: list[str] = []
    for line in reversed(lines):
        cost = len(line.encode("utf-8")) + 1
        if cost > room:
            if not kept:  # one very long last line: keep its end
                kept.append(line.encode("utf-8")[-(room - 1):].decode("utf-8", "ignore"))
            break
        kept.append(line)
        room -= cost
    text = head + ("stderr (last lines):\n" + "\n".join(reversed(kept)) + "\n" if kept else "")
    return text.encode("utf-8")[:limit].decode("utf-8", "ignore")


def write_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def report_failure(path: Path, text: str, at_start: FileState, redact: Callable[[str], str] = str) -> bool:
    """Write the failure file, secret values masked, unless the program wrote one itself since `train` started."""
    if FileState.of(path) != at_start:
        return False
    try:
        write_atomically(path, redact(text)[:FAILURE_FILE_LIMIT])
    except OSError:
        return False
    return True


def report_success(path: Path) -> None:
    try:
        write_atomically(path, "")
    except OSError:
        pass


CGROUP_OOM_FILES = (Path("/sys/fs/cgroup/memory.events"), Path("/sys/fs/cgroup/memory/memory.oom_control"))


def oom_kill_count(files: tuple[Path, ...] = CGROUP_OOM_FILES) -> Optional[int]:
    """The container's OOM-kill counter (`oom_kill N`, cgroup v2's memory.events or v1's
    memory.oom_control), to tell an OOM kill from another SIGKILL; None when neither is readable."""
    for path in files:
        try:
            for line in path.read_text().splitlines():
                key, _, value = line.partition(" ")
                if key == "oom_kill":
                    return int(value)
        except (OSError, ValueError):
            continue
    return None
