"""Toolkit errors and the failures' causes, each with the exit status `train` uses for it.

A program's own exit status always passes through unchanged; these codes are used only when the
toolkit itself cannot run the program or the job. They follow sysexits(3) and the shell's 126/127,
so they read naturally in logs, and the reference's (docs/reference.md) table of them is `markdown_table()`.
"""
from __future__ import annotations

import enum
from typing import Iterable, Optional

__all__ = [
    "CauseKind", "CodeSetupFailed", "ConfigError", "FailureCause", "markdown_table", "PeersUnreachable", "ProgramNotExecutable", "ProgramNotFound",
    "StartupFailed", "ToolkitError",
]


class CauseKind(enum.Enum):
    """What declaring a failure cause gives (FailureCause's members; a test's own enum may add one): its
    label, the first word of `output/failure`; the exit status `train` ends with for it (None: the
    program's own status, shown as `status_text`); one line of meaning; and, for a cause no restart in
    place can help, why not (run's restart rule reads it). The reference's exit-status table is
    `markdown_table(FailureCause)`."""

    def __init__(self, label: str, status: Optional[int], meaning: str, not_restarted: Optional[str] = None,
                 status_text: str = "") -> None:
        self.label, self.status, self.meaning = label, status, meaning
        self.not_restarted, self.status_text = not_restarted, status_text or str(status)

    @property
    def exit_code(self) -> int:
        """The status `train` ends with for this cause (causes whose status is the program's have none)."""
        if self.status is None:
            raise ValueError(f"{self.label}: the program's own status is the job's")
        return self.status


class FailureCause(CauseKind):
    """Why a job failed, where the toolkit names it (a program's own failure is named by the Python
    exception of its last traceback, if any). The statuses follow sysexits(3), the shell and timeout(1)."""

    PROGRAM_ERROR = ("ProgramError", None, "the program (the failing rank or task) ended by itself with that status, "
                     "named by the exception's class from its last traceback (`RuntimeError`, ...), else ProgramError; "
                     "1 also where the interpreter died of a signal after an uncaught exception (TensorFlow's gRPC "
                     "teardown)", None, "the program's")
    PROGRAM_KILLED = ("ProgramKilled", None, "the program died of signal N (143 SIGTERM, 137 SIGKILL)", None, "128+N")
    OUT_OF_MEMORY = ("OutOfMemory", None, "the program died of SIGKILL while the kernel's OOM killer ran in its "
                     "container", "out of memory: a restart would run out again", "137")
    CODE_SETUP_FAILED = ("CodeSetupFailed", 65, "the code could not be fetched or unpacked, or its requirements not "
                         "installed", "the code could not be set up")  # EX_DATAERR
    PEERS_UNREACHABLE = ("PeersUnreachable", 69, "hosts of the job could not reach each other in the peer wait",
                         "hosts of the job could not be reached")  # EX_UNAVAILABLE
    HOST_LOST = ("HostLost", 69, "the master lost a worker mid-job (silent for the heartbeat timeout, or its "
                 "connection closed)", "a host was lost")
    MASTER_LOST = ("MasterLost", 69, "a worker lost its master mid-job", "the master was lost")
    INTERNAL_ERROR = ("InternalError", 70, "a bug in `train`", "an internal error")  # EX_SOFTWARE
    STARTUP_FAILED = ("StartupFailed", 71, "a part of `train` could not start (the control port in use, sshd missing, "
                      "a worker that got no valid ssh key for the job)", "a start-up failure")  # EX_OSERR
    CONFIG_ERROR = ("ConfigError", 78, "a config file, field or value is wrong (the message names it), or a "
                    "distribution this image does not serve", "a configuration error")  # EX_CONFIG
    STALLED = ("Stalled", 124, "the stall watchdog ended a job whose ranks stopped making progress")
    PROGRAM_NOT_EXECUTABLE = ("ProgramNotExecutable", 126, "the program was found but cannot be executed",
                              "the program cannot be executed")
    PROGRAM_NOT_FOUND = ("ProgramNotFound", 127, "no such program in the code folder", "the program was not found")


def markdown_table(causes: Iterable[CauseKind] = FailureCause) -> str:
    """The reference's exit-status table (docs/reference.md): one row a cause."""
    rows = ["| status | output/failure starts with | restarted in place | meaning |", "| --- | --- | --- | --- |"]
    rows += [f"| {c.status_text} | `{c.label}` | {'no: ' + c.not_restarted if c.not_restarted else 'after progress, where asked for'} "
             f"| {c.meaning} |" for c in causes]
    return "\n".join(rows) + "\n"


class ToolkitError(Exception):
    """An error of the toolkit's inputs or environment, reported without a traceback."""

    cause: CauseKind = FailureCause.INTERNAL_ERROR

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
