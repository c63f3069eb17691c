"""Toolkit errors and the failures' causes, each with the exit status `train` uses for it.

A program's own exit status always passes through unchanged; these codes are used only when the
toolkit itself cannot run the program or the job. They follow sysexits(3) and the shell's 126/127,
so they read naturally in logs, and they are listed in the README.
"""
from __future__ import annotations

import enum

__all__ = [
    "CodeSetupFailed", "ConfigError", "FailureCause", "PeersUnreachable", "ProgramNotExecutable", "ProgramNotFound",
    "StartupFailed", "ToolkitError",
]


class FailureCause(enum.Enum):
    """Why a job failed: the name that starts `output/failure` when the toolkit, not the program, names
    it, and the exit status `train` ends with for it - None where the program's own status passes
    through (a program's own failure is named by the Python exception of its last traceback, if any)."""

    CONFIG_ERROR = ("ConfigError", 78)  # EX_CONFIG: a config file, field or value is wrong
    CODE_SETUP_FAILED = ("CodeSetupFailed", 65)  # EX_DATAERR: the code not fetched, or its requirements not installed
    PROGRAM_NOT_FOUND = ("ProgramNotFound", 127)  # as the shell: no such program
    PROGRAM_NOT_EXECUTABLE = ("ProgramNotExecutable", 126)  # as the shell: found but cannot be executed
    PEERS_UNREACHABLE = ("PeersUnreachable", 69)  # EX_UNAVAILABLE: other hosts of the job could not be reached
    STARTUP_FAILED = ("StartupFailed", 71)  # EX_OSERR: a part of the toolkit could not start (port in use, no sshd)
    INTERNAL_ERROR = ("InternalError", 70)  # EX_SOFTWARE: a bug in the toolkit
    PROGRAM_ERROR = ("ProgramError", None)  # the program's non-zero status, without a Python traceback
    PROGRAM_KILLED = ("ProgramKilled", None)  # the program died of a signal: 128+N
    OUT_OF_MEMORY = ("OutOfMemory", None)  # ... of SIGKILL while the kernel's OOM killer ran in its cgroup
    HOST_LOST = ("HostLost", 69)  # the master lost a worker mid-job
    MASTER_LOST = ("MasterLost", 69)  # a worker lost its master mid-job
    STALLED = ("Stalled", 124)  # as timeout(1): the stall watchdog ended a job whose ranks stopped progressing

    def __init__(self, label: str, status: "int | None") -> None:
        self.label = label  # as output/failure and the README's exit table name it
        self.status = status

    @property
    def exit_code(self) -> int:
        """The status `train` ends with for this cause (causes whose status is the program's have none)."""
        if self.status is None:
            raise ValueError(f"{self.label}: the program's own status is the job's")
        return self.status


class ToolkitError(Exception):
    """An error of the toolkit's inputs or environment, reported without a traceback."""

    cause: FailureCause = FailureCause.INTERNAL_ERROR

    @property
    def exit_code(self) -> int:
        return self.cause.exit_code


class ConfigError(ToolkitError):
    """A config file, field or value is wrong; the message names which and what was expected."""

    cause = FailureCause.CONFIG_ERROR


class ProgramNotFound(ToolkitError):
    """The program named by the job does not exist in the code folder."""
    cause = FailureCause.PROGRAM_NOT_FOUND


class ProgramNotExecutable(ToolkitError):
    """The program exists but cannot be executed."""
    cause = FailureCause.PROGRAM_NOT_EXECUTABLE


class PeersUnreachable(ToolkitError):
    """Other hosts of the job could not be reached in the peer wait."""
    cause = FailureCause.PEERS_UNREACHABLE


class StartupFailed(ToolkitError):
    """A part of the toolkit could not start on this host: the control port is taken, sshd is
    missing or does not listen. Nothing the toolkit started is left running."""

    cause = FailureCause.STARTUP_FAILED


class CodeSetupFailed(ToolkitError):
    """The program's code could not be fetched or unpacked, or its requirements.txt not installed."""

    cause = FailureCause.CODE_SETUP_FAILED
