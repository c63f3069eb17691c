"""The intermediate output's syncer beside the job (plan.intermediate; the syncer: smtrain.sync.intermediate_output):
started before the program on every host, left alone by the program's signals and by the end of everything
else the job started, and given its last pass once the job's outcome is written - bounded, so that `train`
never waits on S3 for long, and shorter after a stop (a spot interruption leaves seconds)."""
from __future__ import annotations

import signal
import subprocess
from typing import Optional

from ..common.console import log
from ..plan.intermediate import IntermediateSync
from ..proc.helpers import spawn_helper
from ..proc.supervise import parent_death_signal

__all__ = ["FINISH_WAIT_S", "STOPPING_WAIT_S", "finish_syncer", "start_syncer"]

FINISH_WAIT_S = 120.0  # for the last uploads after the job's end
STOPPING_WAIT_S = 5.0  # the same after a shutdown signal


def start_syncer(sync: Optional[IntermediateSync], python: str) -> Optional[subprocess.Popen]:
    """The syncer, where the plan has one (None where it could not start: the job goes on without it)."""
    if sync is None:
        return None
    sync.folder.mkdir(parents=True, exist_ok=True)  # before the program starts; the syncer sweeps what it finds there
    try:
        return spawn_helper(sync.argv(python), preexec_fn=parent_death_signal(signal.SIGTERM))
    except OSError as e:
        log(f"the intermediate output's sync could not start: {e}")
        return None


def finish_syncer(syncer: Optional[subprocess.Popen], wait_s: float, tell: bool = False) -> None:
    """Until the syncer has made its last pass (it makes it once the job's success or failure file is there,
    or at once where `tell`: SIGTERM), at most `wait_s`; then it is stopped."""
    if syncer is None:
        return
    if tell and syncer.poll() is None:
        syncer.send_signal(signal.SIGTERM)
    try:
        syncer.wait(timeout=wait_s)
    except subprocess.TimeoutExpired:
        log(f"the intermediate output's last uploads took more than {wait_s:g} s: stopping them")
        syncer.kill()
        syncer.wait()
