"""A job's outcome (`JobOutcome`: status, failure cause, reason, the rank and host to blame), how each
ending becomes one (`describe_program_failure`, `decide`: pure), and rendering it SageMaker's way,
once (`render`: exit status, `output/failure`, the last log line).

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

from ..common.atomic_file import write_atomically
from ..common.console import log
from ..errors import CauseKind, FailureCause, ToolkitError
from ..proc.supervise import ProcessResult
from ..wire.rank_failure import RankFailure, is_consequence

__all__ = [
    "FileState", "JobOutcome", "JobView", "decide", "describe_program_failure", "failure_text", "python_exception",
    "render", "report_failure", "report_success", "uncaught_exception_then_crash", "warn_if_no_model",
]

FAILURE_FILE_LIMIT = 1024
# The last line of a Python traceback: "pkg.module.SomeError: message" or "SomeError".
_EXCEPTION_LINE = re.compile(rb"^([A-Za-z_][\w.]*)(?::|$)")
# What a crashing interpreter may print after the traceback (faulthandler's dump, glibc, the kernel's
# words, oneDNN's last words before its SIGILL in TensorFlow's teardown).
_CRASH_DUMP_LINE = re.compile(
    rb"^(\s|$|Fatal Python error|Python runtime state|Current thread|Thread 0x|Extension modules|<no Python frame>"
    rb"|Segmentation fault|Illegal instruction|Aborted|Bus error|Floating point exception|could not execute a primitive)")


class FileState(NamedTuple):
    """Identity of a file at start, to tell later whether the program wrote it."""

    exists: bool
    inode: int = 0
    mtime_ns: int = 0
    size: int = 0

    @classmethod
    def of(cls, path: Path) -> "FileState":
        """What `path` is now (its inode, time and size), to tell later whether the program wrote it."""
        try:
            st = path.stat()
        except OSError:
            return cls(False)
        return cls(True, st.st_ino, st.st_mtime_ns, st.st_size)


def _last_exception(stderr_tail: bytes) -> Optional[tuple[str, list[bytes], bytes]]:
    """The exception class of the last Python traceback in the tail, the lines after its exception
    line, and the tail up to that line."""
    lines = stderr_tail.splitlines()
    try:
        start = max(i for i, line in enumerate(lines) if line.startswith(b"Traceback (most recent call last):"))
    except ValueError:
        return None
    for at in range(start + 1, len(lines)):
        line = lines[at]
        if not line.startswith((b" ", b"\t")):
            match = _EXCEPTION_LINE.match(line)
            if match:
                return match.group(1).decode("ascii", "replace"), lines[at + 1:], b"\n".join(lines[:at + 1]) + b"\n"
    return None


def python_exception(stderr_tail: bytes) -> Optional[str]:
    """The exception class of the last Python traceback in the tail, if the tail ends with one."""
    found = _last_exception(stderr_tail)
    return found[0] if found else None


def uncaught_exception_then_crash(stderr_tail: bytes) -> Optional[tuple[str, bytes]]:
    """(exception class, the tail up to its line) when the tail ends with a traceback followed by
    nothing but a crash dump: the program raised, and the interpreter then crashed while it shut down."""
    found = _last_exception(stderr_tail)
    if found is None or not all(_CRASH_DUMP_LINE.match(line) for line in found[1]):
        return None
    return found[0], found[2]


def signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


class JobOutcome(NamedTuple):
    """How a job (or this host's part of it) ended. Every role returns one; `render` reports it."""

    status: int  # what `train` exits with
    cause: Union[CauseKind, str, None] = None  # the toolkit's FailureCause, or the program's Python exception
    what: str = ""  # one line
    stderr_tail: bytes = b""  # the lines worth showing: a crash dump after the traceback is left out
    rank: Optional[int] = None  # the rank (or TF task number) to blame, when one is
    host: Optional[str] = None  # the host to blame, when one is
    told: Optional[str] = None  # the reason as the master wrote it (a worker's outcome)

    @classmethod
    def failed(cls, status: int, cause: Union[CauseKind, str], what: str, stderr_tail: bytes = b"",
               rank: Optional[int] = None, host: Optional[str] = None) -> "JobOutcome":
        """A failure with the status, cause and what the caller gives."""
        return cls(status, cause, what, stderr_tail, rank, host)

    @classmethod
    def of_cause(cls, cause: CauseKind, what: str, stderr_tail: bytes = b"", rank: Optional[int] = None,
                host: Optional[str] = None) -> "JobOutcome":
        """A failure the toolkit names, with the status its cause carries."""
        return cls(cause.exit_code, cause, what, stderr_tail, rank, host)

    @classmethod
    def of_error(cls, error: ToolkitError) -> "JobOutcome":
        """The outcome of a toolkit error: its cause, its status, its message."""
        return cls.of_cause(error.cause, str(error))

    @property
    def reason(self) -> str:
        """The failure text (`output/failure`), empty on success."""
        if self.status == 0:
            return ""
        if self.told is not None:
            return self.told
        return failure_text(self.cause or FailureCause.INTERNAL_ERROR, self.what, self.stderr_tail)


SUCCESS = JobOutcome(0)


# Python's own exit status for an uncaught exception.
UNCAUGHT_EXCEPTION_STATUS = 1


def describe_program_failure(result: ProcessResult, program: str) -> JobOutcome:
    """Status, error class and one-line description for a program that did not end with status 0.

    A program that raised an uncaught exception and then crashed while the interpreter shut down
    (TensorFlow's gRPC server segfaults or hits an illegal instruction there, by chance) ends with
    status 1, the uncaught exception's, whatever signal the teardown died of: the same failure always
    gets the same status. Only a traceback followed by nothing but a crash dump counts."""
    if result.term_signal is not None:
        what = f"program {program} was killed by {signal_name(result.term_signal)} (exit status {result.exit_code})"
        if result.killed_after_grace:
            return JobOutcome(result.exit_code, FailureCause.PROGRAM_KILLED,
                                  f"{what} after {signal_name(result.shutdown_signal or signal.SIGTERM)} and the grace period")
        if result.oom_killed:
            return JobOutcome(result.exit_code, FailureCause.OUT_OF_MEMORY,
                              f"{what}; the kernel's OOM killer ran in its container: out of memory",
                              result.stderr_tail)
        crash = uncaught_exception_then_crash(result.stderr_tail) if result.shutdown_signal is None else None
        if crash is not None:
            exception, traceback = crash
            return JobOutcome(
                UNCAUGHT_EXCEPTION_STATUS, exception,
                f"program {program} raised an uncaught {exception} (status {UNCAUGHT_EXCEPTION_STATUS}); the interpreter "
                f"then died of {signal_name(result.term_signal)} while it shut down (exit status {result.exit_code})",
                traceback)
        return JobOutcome(result.exit_code, FailureCause.PROGRAM_KILLED, what, result.stderr_tail)
    what = f"program {program} exited with status {result.exit_code}"
    if result.shutdown_signal is not None:
        what += f" after {signal_name(result.shutdown_signal)}"
    return JobOutcome(result.exit_code, python_exception(result.stderr_tail) or FailureCause.PROGRAM_ERROR, what,
                          result.stderr_tail)


def failure_text(cause: Union[CauseKind, str], what: str, stderr_tail: bytes = b"", limit: int = FAILURE_FILE_LIMIT) -> str:
    """`cause: what`, then as many whole last lines of stderr as fit in `limit` bytes of UTF-8.
    `cause` is the toolkit's FailureCause, or the name of the program's Python exception."""
    head = f"{cause.label if isinstance(cause, CauseKind) else cause}: {what}\n"
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


class JobView(NamedTuple):
    """What the master knows once its program (mpirun, or its own task's program) has ended."""

    program: ProcessResult
    program_name: str  # how the outcome names it: "mpirun (train.py)", "train.py (worker 0 on algo-1)"
    script: str  # the user's program, as a worker's failure names it
    stall: Optional[str] = None  # the stall watchdog's description, when it ended the job
    report: Optional[RankFailure] = None  # the root cause among the failed ranks' reports
    final_reports: bool = False  # a rank (task) reported that its program ended non-zero
    lost: tuple[str, ...] = ()  # workers lost during the job, the first first
    failed_done: Optional[tuple[str, int]] = None  # the first worker whose own program ended non-zero


def decide(view: JobView, where: Callable[[RankFailure], str]) -> JobOutcome:
    """The job's outcome (pure): a stall; else, when anything failed, the rank to blame (the root
    cause of the reports; `where(report)` names it), unless it failed only because a lost host ended
    the job; else the lost host; else a worker's program's status; else the program's own failure."""
    if view.stall is not None:
        return JobOutcome.of_cause(FailureCause.STALLED, view.stall)
    if view.program.exit_code == 0 and not (view.final_reports or view.lost or view.failed_done):
        return SUCCESS
    report = view.report
    if report is not None and not (view.lost and is_consequence(report)):
        # The rank to blame failed first; a shutdown signal its launcher got afterwards came from the
        # job's own end (mpirun's abort, the master's `abort` for this very failure), not from outside:
        # it does not make a traceback then a teardown crash (status 1) a kill. Only a signal `train`
        # itself received counts, as for a program on its own.
        ranks = ProcessResult(  # an early report only (its launcher killed by an abort): an uncaught exception
            exit_code=report.exit_code or UNCAUGHT_EXCEPTION_STATUS, term_signal=report.term_signal,
            shutdown_signal=report.shutdown_signal if view.program.shutdown_signal is not None else None,
            killed_after_grace=report.killed_after_grace, stderr_tail=report.stderr_tail.encode(),
            oom_killed=report.oom_killed)
        return describe_program_failure(ranks, where(report))._replace(rank=report.rank, host=report.host)
    if view.lost:
        what = f"lost worker host {view.lost[0]} during the job"
        if view.program.exit_code != 0:
            what += f"; {view.program_name} then exited with status {view.program.exit_code}"
        return JobOutcome.of_cause(FailureCause.HOST_LOST, what,
                                 view.program.stderr_tail, host=view.lost[0])
    if view.failed_done is not None:
        host, status = view.failed_done
        return JobOutcome.failed(status, FailureCause.PROGRAM_ERROR,
                                 f"{view.script} on host {host} ended with status {status}", host=host)
    return describe_program_failure(view.program, view.program_name)


def render(outcome: JobOutcome, failure_file: Path, at_start: FileState, success_file: Optional[Path] = None,
           success: str = "the job succeeded", redact: Callable[[str], str] = str) -> int:
    """Report `outcome` SageMaker's way (the success or failure file, the last log line) and return
    the exit status: the one place every ending is reported."""
    if outcome.status == 0:
        log(success)
        if success_file is not None:
            report_success(success_file)
        return 0
    reason = outcome.reason
    log(reason.splitlines()[0] if reason else f"the job failed with status {outcome.status}")
    if not report_failure(failure_file, reason, at_start, redact):
        log(f"kept the failure file the program wrote, or could not write one: {failure_file}")
    return outcome.status


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
    """Leave output/success, as SageMaker's toolkits do (a failure to write it is ignored: the exit status tells)."""
    try:
        write_atomically(path, "")
    except OSError:
        pass


def warn_if_no_model(model_dir: Path) -> None:
    """After a job that succeeded, sagemaker-tensorflow-training's warning where the model folder holds no
    file (its words: SageMaker uploads that folder as model.tar.gz)."""
    if any(files for _, _, files in os.walk(model_dir)):
        return
    log(f"No model artifact is saved under path {model_dir}. Your training job will not save any model files to S3.")
    log("For details of how to construct your training script see:")
    log("https://sagemaker.readthedocs.io/en/stable/using_tf.html#adapting-your-local-tensorflow-script")
