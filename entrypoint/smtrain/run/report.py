"""The profiler report over what this job measured (smtrain.profiler.job_report), written once the job's
processes have ended: by the warm report process started with the helpers (plan.helper_plan: its interpreter,
matplotlib and fonts loaded while the job ran; told what to report as one JSON line on its stdin), else by one
started now. Bounded; whatever it does, the job's outcome stays as it was."""
from __future__ import annotations

import json
import subprocess
from typing import Sequence

from ..common.console import log
from ..config.defaults import REPORT_TIMEOUT_S
from ..plan.helper_plan import cold_report
from ..proc.helpers import HelperGroup, HelperSpec

__all__ = ["write_report"]


def write_report(report: HelperSpec, helpers: HelperGroup, since: float, stopping: bool, notes: Sequence[str] = (),
                 timeout_s: float = REPORT_TIMEOUT_S) -> None:
    """The report of the job since `since` (wall clock), by the warm report among `helpers` where it is still there
    (`report`: its spec), else by one started now. `stopping` (a shutdown signal came: a spot interruption, `docker stop`): its tables
    only, in a fraction of a second, without the plots. `notes`: for its top (hosts whose profiler data is
    missing)."""
    given = ["--since", f"{since:.3f}", *(("--no-plots",) if stopping else ()),
             *(a for note in notes for a in ("--note", note))]
    warm = helpers.get(report.name)
    if warm is not None and warm.process.poll() is None and _tell(warm.process, given):
        process = warm.process
    else:
        cold = helpers.start(cold_report(report, given))
        if cold is None:
            return
        process = cold.process
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
