"""What the master's control server knows, one record per host: whether its `train` is connected, when
it was lost, whether it joined, the restart it is ready for (or why it cannot take part), its program's
status this attempt, its ranks' failure reports, its profiler archive. The server's threads write it as
messages come; the master role asks it. Everything is under one condition, which every change notifies."""
from __future__ import annotations

import socket
import threading
import time
from dataclasses import dataclass, field
from typing import IO, Callable, Optional

from ..wire.rank_failure import RankFailure, root_cause, settled

__all__ = ["ControlState", "HostRecord"]


@dataclass
class HostRecord:
    """One host, as the control channel has seen it."""

    host: str
    connection: Optional[socket.socket] = None  # its `train`'s connection, while it lasts (workers only)
    lost_at: Optional[float] = None  # when its connection ended before the job did (monotonic)
    joined: bool = False  # it took its admission (`joined`)
    ready_for: int = -1  # the restart it last said it is ready for
    refused: Optional[str] = None  # why it cannot take part in a restart, if it said so
    done: Optional[int] = None  # its own program's status, this attempt (TF strategy jobs)
    reports: list[RankFailure] = field(default_factory=list)  # its ranks' failure reports, this attempt
    archive: Optional[IO[bytes]] = None  # its profiler archive so far (only its connection's thread touches it)
    shipped: bool = False  # its whole archive came and was taken
    shipped_note: Optional[str] = None  # what taking it said is missing
    overflowed: bool = False  # its archive passed the cap: not taken


class ControlState:
    """The records, and the queries the master role makes of them (see the module's docstring)."""

    def __init__(self) -> None:
        self.lock = threading.Condition()
        self.records: dict[str, HostRecord] = {}
        self.ended = False  # the job's end was told: a worker that hangs up now is not lost

    def record(self, host: str) -> HostRecord:
        """`host`'s record, made when first needed (caller holds the lock)."""
        if host not in self.records:
            self.records[host] = HostRecord(host)
        return self.records[host]

    def update(self, host: str, change: Callable[[HostRecord], None]) -> None:
        """Apply `change` to `host`'s record under the lock, and wake whoever waits on it."""
        with self.lock:
            change(self.record(host))
            self.lock.notify_all()

    def _connected(self) -> list[HostRecord]:
        return [r for r in self.records.values() if r.connection is not None]

    def _reports(self) -> list[RankFailure]:
        return [report for r in self.records.values() for report in r.reports]

    # -- the roster -------------------------------------------------------------------------------
    def wait_for_workers(self, hosts: list[str], deadline: float) -> list[str]:
        """Wait until every host in `hosts` has joined (said hello and then `joined`); return those that did
        not by `deadline` - at once when one of them hung up."""
        with self.lock:
            while True:
                missing = [h for h in hosts if not (h in self.records and self.records[h].connection and self.records[h].joined)]
                hung_up = [h for h in missing if h in self.records and self.records[h].lost_at is not None]
                remaining = deadline - time.monotonic()
                if not missing or remaining <= 0 or hung_up:
                    return missing
                self.lock.wait(remaining)

    def said_hello(self, host: str) -> bool:
        """Whether `host`'s `train` reached the server (it may have hung up since)."""
        with self.lock:
            record = self.records.get(host)
            return record is not None and (record.connection is not None or record.lost_at is not None)

    def lost_hosts(self) -> list[str]:
        """Workers lost (and not back), the first lost first."""
        with self.lock:
            lost = [r for r in self.records.values() if r.lost_at is not None and r.connection is None]
            return [r.host for r in sorted(lost, key=lambda r: r.lost_at or 0.0)]

    def await_hang_ups(self, linger_s: float = 2.0) -> None:
        """Until every worker has hung up (after the end: each has read it and sent what it had), at most
        `linger_s`."""
        deadline = time.monotonic() + linger_s
        with self.lock:
            while self._connected() and time.monotonic() < deadline:
                self.lock.wait(deadline - time.monotonic())

    # -- this attempt -------------------------------------------------------------------------------
    def has_reports(self, final: bool = False) -> bool:
        """Whether a rank report came (`final`: one saying its program ended)."""
        with self.lock:
            return any(r.final or not final for r in self._reports())

    def done_hosts(self) -> dict[str, int]:
        """Workers whose program ended (TF strategy jobs), with its status."""
        with self.lock:
            return {r.host: r.done for r in self.records.values() if r.done is not None}

    def failed_done(self) -> Optional[tuple[str, int]]:
        """The first worker whose program ended non-zero (TF strategy jobs), and its status."""
        return next(((host, status) for host, status in self.done_hosts().items() if status != 0), None)

    def new_attempt(self) -> None:
        """Forget the failed attempt's rank reports and programs' ends: an in-job restart begins."""
        with self.lock:
            for record in self.records.values():
                record.reports.clear()
                record.done = None

    def refused_restart(self, hosts: list[str]) -> Optional[tuple[str, str]]:
        """The first of `hosts` that said it cannot take part in a restart, and why."""
        with self.lock:
            return next(((h, self.records[h].refused or "") for h in hosts
                         if h in self.records and self.records[h].refused is not None), None)

    def not_ready(self, hosts: list[str], attempt: int) -> list[str]:
        """Those of `hosts` that have not said they are ready for restart `attempt`."""
        with self.lock:
            return [h for h in hosts if (self.records[h].ready_for if h in self.records else -1) < attempt]

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
            while not self._all_final(ranks):
                count = len(self._reports())
                quiet = settled_s if settled(root_cause(self._reports())) else quiet_s
                self.lock.wait_for(lambda: len(self._reports()) != count or (senders_gone and not self.in_flight()),
                                   max(0.0, min(quiet, deadline - time.monotonic())))
                if len(self._reports()) == count or time.monotonic() >= deadline:
                    break
            reports = self._reports()
        return root_cause(reports)

    def in_flight(self) -> int:
        """Connections whose first message is not taken yet (caller holds the lock); the server says."""
        return 0

    def _all_final(self, ranks: int) -> bool:
        return ranks > 0 and len({(r.host, r.rank) for r in self._reports() if r.final}) >= ranks

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
