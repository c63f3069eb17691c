"""What the master's control server knows: one record per worker host, in an explicit state
(run.attempt.HostState), and the attempt the job is in (run.attempt.Attempt: its ranks' progress and failure
reports). The server's threads move a host from state to state as its messages come (and as its connection
ends); the master role asks the queries below. Everything is under one condition, which every change
notifies."""
from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass
from typing import IO, Optional

from ..wire.rank_failure import RankFailure, root_cause, settled
from .attempt import Attempt, HostState

__all__ = ["ControlState", "HostRecord"]

_IN_THE_JOB = (HostState.JOINED, HostState.RUNNING, HostState.DONE, HostState.READY, HostState.REFUSED)


@dataclass
class HostRecord:
    """One worker host, as the control channel has seen it."""

    host: str
    state: HostState = HostState.CONNECTED
    connection: Optional[socket.socket] = None  # its `train`'s connection, while it lasts
    lost_at: Optional[float] = None  # when it was LOST (monotonic)
    status: Optional[int] = None  # DONE: its own program's status
    refused: Optional[str] = None  # REFUSED: why it cannot take part in the next attempt
    archive: Optional[IO[bytes]] = None  # its profiler archive so far (only its connection's thread touches it)
    shipped: bool = False  # its whole archive came and was taken
    shipped_note: Optional[str] = None  # what taking it said is missing
    overflowed: bool = False  # its archive passed the cap: not taken


class ControlState:
    """The records, the current attempt, and the queries the master role makes of them."""

    def __init__(self) -> None:
        self.lock = threading.Condition()
        self.records: dict[str, HostRecord] = {}
        self.attempt = Attempt(0)  # the attempt the job is in (begin_attempt starts each)
        self.ended = False  # the job's end was told: a worker that hangs up now is GONE, not LOST

    # -- the server's threads: a host's state as its messages come -------------------------------------
    def connected(self, host: str, sock: socket.socket) -> None:
        """`host` said hello on `sock`."""
        with self.lock:
            record = self.records.setdefault(host, HostRecord(host))
            record.state, record.connection = HostState.CONNECTED, sock
            self.lock.notify_all()

    def move(self, host: str, state: HostState, status: Optional[int] = None, refused: Optional[str] = None) -> None:
        """`host` is in `state` now (DONE with its program's `status`; REFUSED saying why)."""
        with self.lock:
            record = self.records.setdefault(host, HostRecord(host))
            record.state, record.status, record.refused = state, status, refused
            self.lock.notify_all()

    def hung_up(self, host: str, sock: socket.socket, closed: bool) -> bool:
        """`host`'s connection `sock` ended; whether the host is LOST (the job was not over, nor the server
        `closed`) rather than GONE."""
        with self.lock:
            record = self.records.setdefault(host, HostRecord(host))
            if record.archive is not None:  # it hung up in the middle of its profiler archive
                record.archive.close()
                record.archive = None
            if record.connection is not sock:
                return False
            record.connection = None
            lost = not self.ended and not closed
            record.state = HostState.LOST if lost else HostState.GONE
            if lost:
                record.lost_at = time.monotonic()
            self.lock.notify_all()
            return lost

    def add_report(self, report: RankFailure) -> None:
        """A failed rank's report, for the current attempt."""
        with self.lock:
            self.attempt.reports.append(report)
            self.lock.notify_all()

    # -- the master's loop -----------------------------------------------------------------------------
    def begin_attempt(self, number: int) -> Attempt:
        """Attempt `number` starts: a new Attempt, and every host in the job RUNNING."""
        with self.lock:
            self.attempt = Attempt(number)
            for record in self.records.values():
                if record.state in (HostState.JOINED, HostState.READY, HostState.DONE):
                    record.state, record.status = HostState.RUNNING, None
            self.lock.notify_all()
            return self.attempt

    def _in(self, *states: HostState) -> list[HostRecord]:
        return [r for r in self.records.values() if r.state in states]

    def wait_for_workers(self, hosts: list[str], deadline: float) -> list[str]:
        """Wait until every host in `hosts` has joined (said hello and then `joined`); return those that did
        not by `deadline` - at once when one of them hung up."""
        with self.lock:
            while True:
                missing = [h for h in hosts if h not in self.records or self.records[h].state not in _IN_THE_JOB]
                hung_up = [h for h in missing if h in self.records and self.records[h].state is HostState.LOST]
                remaining = deadline - time.monotonic()
                if not missing or remaining <= 0 or hung_up:
                    return missing
                self.lock.wait(remaining)

    def said_hello(self, host: str) -> bool:
        """Whether `host`'s `train` reached the server (it may have hung up since)."""
        with self.lock:
            return host in self.records

    def lost_hosts(self) -> list[str]:
        """Workers LOST, the first lost first."""
        with self.lock:
            return [r.host for r in sorted(self._in(HostState.LOST), key=lambda r: r.lost_at or 0.0)]

    def done_hosts(self) -> dict[str, int]:
        """Workers whose own program ended this attempt (TF strategy jobs), with its status."""
        with self.lock:
            return {r.host: r.status for r in self._in(HostState.DONE) if r.status is not None}

    def failed_done(self) -> Optional[tuple[str, int]]:
        """The first worker whose program ended non-zero (TF strategy jobs), and its status."""
        return next(((host, status) for host, status in self.done_hosts().items() if status != 0), None)

    def refused(self, hosts: list[str]) -> Optional[tuple[str, str]]:
        """The first of `hosts` that said it cannot take part in the next attempt, and why."""
        with self.lock:
            return next(((h, self.records[h].refused or "") for h in hosts
                         if h in self.records and self.records[h].state is HostState.REFUSED), None)

    def not_ready(self, hosts: list[str]) -> list[str]:
        """Those of `hosts` not READY for the next attempt."""
        with self.lock:
            return [h for h in hosts if h not in self.records or self.records[h].state is not HostState.READY]

    def await_hang_ups(self, linger_s: float = 2.0) -> None:
        """Until every worker has hung up (after the end: each has read it and sent what it had), at most
        `linger_s`."""
        deadline = time.monotonic() + linger_s
        with self.lock:
            while any(r.connection is not None for r in self.records.values()) and time.monotonic() < deadline:
                self.lock.wait(deadline - time.monotonic())

    # -- the attempt's rank reports --------------------------------------------------------------------
    def has_reports(self, final: bool = False) -> bool:
        """Whether a rank report came this attempt (`final`: one saying its program ended)."""
        with self.lock:
            return any(r.final or not final for r in self.attempt.reports)

    def first_report(self, quiet_s: float = 0.3, max_wait_s: float = 2.0, ranks: int = 0,
                     settled_s: float = 0.05, senders_gone: bool = False) -> Optional[RankFailure]:
        """The root cause among the failed ranks' reports (`root_cause`). Waits until no report came
        for `quiet_s` (at most `max_wait_s`): the program may end while reports are in flight; once the
        root cause is `settled`, `settled_s` of quiet is enough. Once each of the job's `ranks` (if
        given) has sent its final report, none can come; nor once every rank's launcher has ended
        (`senders_gone`) and no connection waits to be accepted or read - a launcher sends its report
        before it exits, on a connection of its own."""
        deadline = time.monotonic() + max_wait_s
        with self.lock:
            reports = self.attempt.reports
            while not self._all_final(reports, ranks):
                count = len(reports)
                quiet = settled_s if settled(root_cause(reports)) else quiet_s
                self.lock.wait_for(lambda: len(reports) != count or (senders_gone and not self.in_flight()),
                                   max(0.0, min(quiet, deadline - time.monotonic())))
                if len(reports) == count or time.monotonic() >= deadline:
                    break
            return root_cause(list(reports))

    def in_flight(self) -> int:
        """Connections whose first message is not taken yet (caller holds the lock); the server says."""
        return 0

    @staticmethod
    def _all_final(reports: list[RankFailure], ranks: int) -> bool:
        return ranks > 0 and len({(r.host, r.rank) for r in reports if r.final}) >= ranks

    # -- profiler archives -------------------------------------------------------------------------
    def wait_for_profiles(self, hosts: list[str], deadline: float) -> dict[str, Optional[str]]:
        """Of `hosts` whose archives came and were taken by `deadline`: what taking each said; a host
        no longer connected (lost, or hung up without sending one) is not waited for."""
        with self.lock:
            while True:
                pending = [h for h in hosts if h in self.records and not self.records[h].shipped
                           and self.records[h].connection is not None]
                remaining = deadline - time.monotonic()
                if not pending or remaining <= 0:
                    return {h: self.records[h].shipped_note for h in hosts if h in self.records and self.records[h].shipped}
                self.lock.wait(remaining)
