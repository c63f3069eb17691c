"""Toolkit errors and the exit codes `train` uses for them.

A program's own exit status always passes through unchanged; these codes are used only when the
toolkit itself cannot run the program. They follow sysexits(3) and the shell's 126/127, so they
read naturally in logs, and they are listed in the README.
"""
from __future__ import annotations

import enum


class ExitCode(enum.IntEnum):
    SUCCESS = 0
    CONFIG_ERROR = 78  # EX_CONFIG: a config file, field or value is wrong
    PEERS_UNREACHABLE = 69  # EX_UNAVAILABLE: other hosts of the job could not be reached
    INTERNAL_ERROR = 70  # EX_SOFTWARE: a bug in the toolkit
    CODE_SETUP_FAILED = 65  # EX_DATAERR: the code could not be fetched or its requirements installed
    PROGRAM_NOT_EXECUTABLE = 126  # as the shell: found but cannot be executed
    PROGRAM_NOT_FOUND = 127  # as the shell: no such program


class ToolkitError(Exception):
    """An error of the toolkit's inputs or environment, reported without a traceback."""

    exit_code: ExitCode = ExitCode.INTERNAL_ERROR

    @property
    def kind(self) -> str:
        return type(self).__name__


class ConfigError(ToolkitError):
    """A config file, field or value is wrong; the message names which and what was expected."""

    exit_code = ExitCode.CONFIG_ERROR


class ProgramNotFound(ToolkitError):
    exit_code = ExitCode.PROGRAM_NOT_FOUND


class ProgramNotExecutable(ToolkitError):
    exit_code = ExitCode.PROGRAM_NOT_EXECUTABLE


class PeersUnreachable(ToolkitError):
    exit_code = ExitCode.PEERS_UNREACHABLE


class CodeSetupFailed(ToolkitError):
    """The program's code could not be fetched or unpacked, or its requirements.txt not installed."""

    exit_code = ExitCode.CODE_SETUP_FAILED
