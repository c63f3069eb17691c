"""Toolkit errors, failure kinds and the exit codes `train` uses for them.

A program's own exit status always passes through unchanged; these codes are used only when the
toolkit itself cannot run the program or the job. They follow sysexits(3) and the shell's 126/127,
so they read naturally in logs, and they are listed in the README.
"""
from __future__ import annotations

import enum

__all__ = [
    "CodeSetupFailed", "ConfigError", "ExitCode", "FailureKind", "PeersUnreachable", "ProgramNotExecutable",
    "ProgramNotFound", "StartupFailed", "ToolkitError",
]


class ExitCode(enum.IntEnum):
    SUCCESS = 0
    CODE_SETUP_FAILED = 65  # EX_DATAERR: the code could not be fetched or its requirements installed
    PEERS_UNREACHABLE = 69  # EX_UNAVAILABLE: other hosts of the job could not be reached, or were lost
    INTERNAL_ERROR = 70  # EX_SOFTWARE: a bug in the toolkit
    STARTUP_FAILED = 71  # EX_OSERR: a part of the toolkit could not start here (port in use, no sshd)
    CONFIG_ERROR = 78  # EX_CONFIG: a config file, field or value is wrong
    STALLED = 124  # as timeout(1): the stall watchdog ended a job whose ranks stopped progressing
    PROGRAM_NOT_EXECUTABLE = 126  # as the shell: found but cannot be executed
    PROGRAM_NOT_FOUND = 127  # as the shell: no such program


class FailureKind(enum.Enum):
    """The error class that starts `output/failure` when the toolkit, not the program, names it.
    (A program's own failure is named by the Python exception of its last traceback, if any.)"""

    CONFIG_ERROR = "ConfigError"
    CODE_SETUP_FAILED = "CodeSetupFailed"
    PROGRAM_NOT_FOUND = "ProgramNotFound"
    PROGRAM_NOT_EXECUTABLE = "ProgramNotExecutable"
    PEERS_UNREACHABLE = "PeersUnreachable"
    STARTUP_FAILED = "StartupFailed"
    INTERNAL_ERROR = "InternalError"
    PROGRAM_ERROR = "ProgramError"  # non-zero status without a Python traceback
    PROGRAM_KILLED = "ProgramKilled"
    OUT_OF_MEMORY = "OutOfMemory"
    HOST_LOST = "HostLost"
    MASTER_LOST = "MasterLost"
    STALLED = "Stalled"


class ToolkitError(Exception):
    """An error of the toolkit's inputs or environment, reported without a traceback."""

    exit_code: ExitCode = ExitCode.INTERNAL_ERROR
    kind: FailureKind = FailureKind.INTERNAL_ERROR


class ConfigError(ToolkitError):
    """A config file, field or value is wrong; the message names which and what was expected."""

    exit_code, kind = ExitCode.CONFIG_ERROR, FailureKind.CONFIG_ERROR


class ProgramNotFound(ToolkitError):
    exit_code, kind = ExitCode.PROGRAM_NOT_FOUND, FailureKind.PROGRAM_NOT_FOUND


class ProgramNotExecutable(ToolkitError):
    exit_code, kind = ExitCode.PROGRAM_NOT_EXECUTABLE, FailureKind.PROGRAM_NOT_EXECUTABLE


class PeersUnreachable(ToolkitError):
    exit_code, kind = ExitCode.PEERS_UNREACHABLE, FailureKind.PEERS_UNREACHABLE


class StartupFailed(ToolkitError):
    """A part of the toolkit could not start on this host: the control port is taken, sshd is
    missing or does not listen. Nothing the toolkit started is left running."""

    exit_code, kind = ExitCode.STARTUP_FAILED, FailureKind.STARTUP_FAILED


class CodeSetupFailed(ToolkitError):
    """The program's code could not be fetched or unpacked, or its requirements.txt not installed."""

    exit_code, kind = ExitCode.CODE_SETUP_FAILED, FailureKind.CODE_SETUP_FAILED
