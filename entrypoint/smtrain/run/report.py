"""The profiler report over what this job measured (smtrain.profiler.job_report), written once the job's
processes have ended: by the warm report process started with the helpers (plan.helper_specs: its interpreter,
matplotlib and fonts loaded while the job ran; told what to report as one JSON line on its stdin), else by one
started now. Bounded; whatever it does, the job's outcome stays as it was."""
from __future__ import annotations

import json
import subprocess
from typing import Optional, Sequence

from ..common.console import log
from ..config.defaults import REPORT_TIMEOUT_S
from ..proc.helpers import Helper, spawn_helper

__all__ = ["write_report"]


def write_report(argv: tuple[str, ...], since: float, stopping: bool, notes: Sequence[str] = (),
                 timeout_s: float = REPORT_TIMEOUT_S, warm: Optional[Helper] = None) -> None:
    """The report of the job since `since` (wall clock) by `warm` where it is still there, else by `argv` started
    now. `stopping` (a shutdown signal came: a spot interruption, `docker stop`): its tables only, in a fraction
    of a second, without the plots. `notes`: for its top (hosts whose profiler data is missing)."""
    given = ["--since", f"{since:.3f}", *(("--no-plots",) if stopping else ()),
             *(a for note in notes for a in ("--note", note))]
    process = warm.process if warm is not None and warm.process.poll() is None and _tell(warm.process, given) else None
    if process is None:
        try:
            process = spawn_helper([*argv, *given])
        except OSError as e:
            log(f"the profiler report could not start: {e}")
            return
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        log(f"the profiler report took more than {timeout_s:g} s and was stopped")


def _tell(warm: subprocess.Popen, given: Sequence[str]) -> bool:
    """Hand the warm report its arguments (one JSON line); whether it took them."""
    try:
        assert warm.stdin is not None
        warm.stdin.write(json.dumps(list(given)).encode() + b"\n")
        warm.stdin.close()
        return True
    except (OSError, ValueError):
        warm.kill()
        warm.wait()
        return False
