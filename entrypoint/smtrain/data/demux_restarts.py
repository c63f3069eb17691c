"""A demultiplexer's part in a restart in place where it deals SageMaker's own FIFOs (`--restartable`).

SageMaker feeds epoch e of a channel through the FIFO `<channel>_<e>`, the next once this one was read
to its end; what its agent does with a FIFO closed before its end is not documented, so the
demultiplexer never does that: a restart finds it dealing an epoch whose ranks are gone, and it reads
that epoch to its end, dealing nothing, and deals SageMaker's next epoch to the new attempt's ranks as
their FIFO 0 - which is what a new job (a spot restart) gives them, so the program resumes as it would
there. `train` asks with SIGUSR1 once the failed attempt's ranks have ended on this host, and waits
until the demultiplexer says (the acknowledgement file) that their FIFOs, end marks and hand-overs are
gone, so that the new ranks can find nothing of the old attempt's.
"""
from __future__ import annotations

import itertools
import select
import signal
import threading
import time
from pathlib import Path
from typing import Callable, Iterable, Optional

from ..common.console import log
from ..wire.pipe_assignment import consumed_handoff, demux_prefix, rank_ended_marker, restart_ack
from .fingerprints import Fingerprints, from_bytes

__all__ = ["Restarts", "consumed_before_restart", "wait_readable"]

POLL_S = 0.2  # how often a wait looks whether a restart was asked for


def wait_readable(fd: int, stop: Callable[[], bool]) -> bool:
    """Until `fd` has data (or its end) - True - or `stop()` says to stop waiting - False."""
    while not stop():
        if select.select([fd], [], [], POLL_S)[0]:
            return True
    return False


class Restarts:
    """The restarts asked of a demultiplexer: `asked` is set by SIGUSR1 (`install`); `released` says
    the current attempt's rank FIFOs are gone; `check` acknowledges a restart once both hold."""

    def __init__(self, data_dir: Path, channel: str, ranks: int) -> None:
        self.asked = threading.Event()
        self._data_dir, self._channel, self._ranks = data_dir, channel, ranks
        self._released = False
        self._acknowledged = False

    def install(self) -> None:
        """SIGUSR1 asks for a restart (before anything else, so that the signal never kills us)."""
        signal.signal(signal.SIGUSR1, lambda signum, frame: self.asked.set())

    def made(self) -> None:
        """Rank FIFOs of the current attempt exist (again)."""
        self._released = False

    def released(self, fifos: Iterable[Path] = ()) -> None:
        """The current attempt's rank FIFOs `fifos` are unlinked (those already are need not be named)."""
        for fifo in fifos:
            fifo.unlink(missing_ok=True)
        self._released = True
        self.check()

    def check(self) -> bool:
        """Whether a restart was asked for; acknowledges it once the old rank FIFOs are gone: their end
        marks and hand-overs removed first (the new ranks write theirs after the acknowledgement)."""
        if not self.asked.is_set():
            return False
        if self._released and not self._acknowledged:
            folder = self._data_dir
            for rank in range(self._ranks):
                rank_ended_marker(demux_prefix(folder, self._channel, rank).parent, rank).unlink(missing_ok=True)
                consumed_handoff(demux_prefix(folder, self._channel, rank)).unlink(missing_ok=True)
            ack = restart_ack(folder, self._channel)
            ack.parent.mkdir(parents=True, exist_ok=True)
            ack.touch()
            self._acknowledged = True
        return True

    def wait(self) -> None:
        """Until a restart is asked for (the job's end stops this process meanwhile)."""
        while not self.check():
            time.sleep(POLL_S)

    def begin(self, next_source: int) -> None:
        """The restart acknowledged: the next attempt's FIFO 0 is SageMaker's epoch `next_source`."""
        log(f"{self._channel}: restart in place: the next attempt's FIFO 0 is SageMaker's {self._channel}_{next_source}")
        self.asked.clear()
        self._acknowledged = False


def consumed_before_restart(prefixes: dict[int, Path], channel: str) -> Optional[Fingerprints]:
    """The records of `channel`'s interrupted epoch that this host's ranks (those that opened their
    FIFO 0 at `prefixes`) consumed before a restart, as each left them before opening it
    (smtrain.pipes, from the checkpoint it restored); None where none did."""
    found = {}
    for rank, prefix in prefixes.items():
        try:
            found[rank] = from_bytes(consumed_handoff(prefix).read_bytes())
        except FileNotFoundError:
            continue
    if not found:
        return None
    drop = Fingerprints(itertools.chain.from_iterable(found.values()))
    log(f"{channel}: resuming: the {drop.total} records local rank{'s' if len(found) > 1 else ''} "
        f"{', '.join(map(str, found))} consumed of the interrupted epoch are left out of FIFO 0")
    return drop
