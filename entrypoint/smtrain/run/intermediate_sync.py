"""The intermediate output's syncer beside the job (plan.intermediate; the syncer: smtrain.sync.intermediate_output;
its spec: plan.helper_specs.before_program): started before the program on every host, left alone by the program's
signals and by the end of everything else the job started, and given its last pass once the job's outcome is
written - bounded, so that `train` never waits on S3 for long, and shorter after a stop (a spot interruption
leaves seconds)."""
from __future__ import annotations

import signal
import subprocess
from typing import Optional

from ..common.console import log
from ..proc.helpers import Helper

__all__ = ["FINISH_WAIT_S", "STOPPING_WAIT_S", "finish_syncer"]

FINISH_WAIT_S = 120.0  # for the last uploads after the job's end
STOPPING_WAIT_S = 5.0  # the same after a shutdown signal


def finish_syncer(syncer: Optional[Helper], wait_s: float) -> None:
    """Tells the syncer to make its last pass (SIGTERM), and waits until it has, at most `wait_s`; then it is
    stopped."""
    if syncer is None:
        return
    process = syncer.process
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=wait_s)
    except subprocess.TimeoutExpired:
        log(f"the intermediate output's last uploads took more than {wait_s:g} s: stopping them")
        process.kill()
        process.wait()
