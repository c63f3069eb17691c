"""Before a restart in place, the Pipe channels this host serves start again from FIFO 0, as after a spot
restart: SageMaker's own from its next epoch FIFO (their demultiplexers keep running and serve the restart:
smtrain.data.demux_restarts), those emulated from files from their first epoch (the feeder and those
demultiplexers started again from their own specs); the rest of the helpers keeps running."""
from __future__ import annotations

import os
import signal
import time
from typing import Optional, Sequence

from ..config.defaults import DEMUX_RESTART_WAIT_S
from ..plan.fifo_plan import DemuxSpec
from ..plan.helper_plan import FEEDER
from ..plan.launch import LaunchPlan
from ..proc.helpers import HelperGroup, stop_all
from ..wire.pipe_assignment import restart_ack

__all__ = ["restart_kept_demultiplexers", "rewind_pipes"]


def rewind_pipes(plan: LaunchPlan, helpers: HelperGroup) -> Optional[str]:
    """The plan's Pipe channels rewound among `helpers` (see the module's docstring); why not, where a channel
    could not be."""
    kept = [spec for spec in plan.demux if spec.restartable]
    again = (*(spec.name for spec in plan.demux if not spec.restartable),
             *(helper.spec.name for helper in plan.helpers if helper.program == FEEDER))
    why_not = restart_kept_demultiplexers(helpers, kept, DEMUX_RESTART_WAIT_S) if kept else None
    if again:
        stopped = helpers.take(again, exact=True)
        stop_all(stopped)
        for helper in stopped:
            helpers.start(helper.spec)
    import shutil  # a restart's alone

    shutil.rmtree(plan.pipe_state, ignore_errors=True)  # PipeModeDataset's epoch counts: from FIFO 0 again
    return why_not


def restart_kept_demultiplexers(helpers: HelperGroup, demux: Sequence[DemuxSpec], wait_s: float) -> Optional[str]:
    """Ask the demultiplexers of SageMaker's own FIFOs (`demux`) to serve a restart in place (SIGUSR1)
    and wait, up to `wait_s`, until each says the old attempt's FIFOs are gone
    (smtrain.data.demux_restarts); why not, where one did not."""
    asked = []
    for spec in demux:
        channel = spec.channel
        ack = restart_ack(spec.data_dir, channel)
        ack.unlink(missing_ok=True)
        helper = helpers.get(spec.name)
        if helper is None or helper.process.poll() is not None:
            return f"the demultiplexer of Pipe channel {channel} has ended"
        os.kill(helper.process.pid, signal.SIGUSR1)
        asked.append((channel, ack, helper))
    deadline = time.monotonic() + wait_s
    for channel, ack, helper in asked:
        while not ack.exists():
            if helper.process.poll() is not None:
                return f"the demultiplexer of Pipe channel {channel} has ended"
            if time.monotonic() >= deadline:
                return f"the demultiplexer of Pipe channel {channel} was not ready for a restart within {wait_s:g} s"
            time.sleep(0.02)
    return None
