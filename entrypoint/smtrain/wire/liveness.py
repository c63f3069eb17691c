"""When a silent peer on the control channel counts as lost.

A peer's `train` can say nothing for a while and still be there: where hosts share one machine (SDK
local mode, one container per host), the kernel has let one container's processes go without CPU
for over 10 s while the ranks imported TensorFlow (seen in this project's Docker tests: the master
container's heartbeat thread, readers and system monitor all paused at once, 10.3-10.7 s and once
21.6 s, while the worker's container ran on). The peer's kernel still acknowledges what we send
meanwhile - it does not need the starved process - while a host that lost power or was cut off
acknowledges nothing.

So: a peer that said nothing for the heartbeat timeout is lost when its host has not acknowledged
our own heartbeats (sent every HEARTBEAT_S) for HOST_ANSWER_S either; a peer whose host still
answers gets up to SILENT_LIMIT_FACTOR times the timeout (a stopped or hung `train` is lost then) -
and, for a worker judging its master, longer while this host's ranks still train: their collectives
complete, so the master's ranks, and the mpirun of the master's `train`, are alive; a silent `train`
then costs the job nothing until the job needs it (a `train` starved for 70 s while its ranks trained
ended a healthy job at the limit). Once the ranks stop for the timeout, the limit applies again.
"""
from __future__ import annotations

import socket
import struct
import time
from dataclasses import dataclass
from typing import Callable, Optional

__all__ = ["HOST_ANSWER_S", "PeerSilence", "SILENT_LIMIT_FACTOR", "Silence", "last_ack_age_s"]

HOST_ANSWER_S = 3.0  # a live host acknowledges each of our heartbeats (one a second) within milliseconds
SILENT_LIMIT_FACTOR = 6
RECHECK_S = 0.5  # past the timeout, how often a silent peer's host is looked at again

# struct tcp_info (linux/tcp.h), a stable kernel ABI: tcpi_last_ack_recv, in milliseconds, at byte 56
_TCP_INFO_SIZE = 104
_LAST_ACK_RECV = struct.Struct("=I")
_LAST_ACK_RECV_OFFSET = 56


def last_ack_age_s(sock: socket.socket) -> Optional[float]:
    """Seconds since the peer's kernel last acknowledged anything on `sock`; None where unknown
    (no TCP_INFO, a closed socket)."""
    try:
        info = sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, _TCP_INFO_SIZE)
    except (OSError, AttributeError):
        return None
    if len(info) < _LAST_ACK_RECV_OFFSET + _LAST_ACK_RECV.size:
        return None
    return _LAST_ACK_RECV.unpack_from(info, _LAST_ACK_RECV_OFFSET)[0] / 1000.0


@dataclass(frozen=True)
class Silence:
    """The verdict on a peer that has said nothing for `silent_s` (pure: the caller measures)."""

    timeout_s: float

    @property
    def limit_s(self) -> float:
        """Silence after which the peer counts as lost, whatever it was doing."""
        return self.timeout_s * SILENT_LIMIT_FACTOR

    def next_wait(self, silent_s: float) -> float:
        """How long to wait for the peer before the next verdict."""
        return self.timeout_s - silent_s if silent_s < self.timeout_s else RECHECK_S

    def verdict(self, silent_s: float, ack_age_s: Optional[float], progress_age_s: Optional[float] = None
                ) -> Optional[str]:
        """How the peer was lost (for the failure reason), or None while it is not; `progress_age_s`: since this
        host's ranks last trained, where the job's progress vouches for the peer (None: it does not)."""
        if silent_s < self.timeout_s:
            return None
        if ack_age_s is None or ack_age_s >= HOST_ANSWER_S:
            return f"nothing heard for {self.timeout_s:g} s"
        if progress_age_s is not None and progress_age_s < self.timeout_s:
            return None
        if silent_s >= self.limit_s:
            return f"nothing heard for {self.limit_s:g} s, though its host still acknowledged this host's heartbeats"
        return None


class PeerSilence:
    """One peer's silence as its reader thread lives it: `heard()` on every message, `check()` when a
    wait of `wait_s()` for one ran out. Says in the log when it waits on a peer whose host answers."""

    def __init__(self, timeout_s: float, peer: str, log: Callable[[str], None],
                 progress: Callable[[], Optional[float]] = lambda: None) -> None:
        self._silence, self._peer, self._log = Silence(timeout_s), peer, log
        self._progress = progress  # seconds since this host's ranks last trained (None: not asked, or never)
        self._vouched = False  # whether the log said that the ranks' progress keeps the peer in the job
        self._last_heard = time.monotonic()
        self._waiting = False  # whether this silence was logged as one the peer's host answers through

    def wait_s(self) -> float:
        """How long to wait for the peer before judging its silence again."""
        return self._silence.next_wait(time.monotonic() - self._last_heard)

    def heard(self) -> None:
        """The peer spoke now (logged when it was silent long enough to be waited for)."""
        now = time.monotonic()
        if self._waiting:
            self._log(f"{self._peer} speaks again after {now - self._last_heard:.1f} s of silence")
            self._waiting = self._vouched = False
        self._last_heard = now

    def check(self, sock: socket.socket) -> Optional[str]:
        """How the peer on `sock` was lost, or None while it is not."""
        silent_s = time.monotonic() - self._last_heard
        progress_age = self._progress() if silent_s >= self._silence.limit_s else None
        lost = self._silence.verdict(silent_s, last_ack_age_s(sock), progress_age)
        if lost is None and progress_age is not None and not self._vouched:
            self._vouched = True
            self._log(f"{self._peer} has said nothing for {silent_s:.0f} s, but this host's ranks still train (their "
                      f"collectives with its ranks complete): waiting while they do")
        if lost is None and silent_s >= self._silence.timeout_s and not self._waiting:
            self._waiting = True
            self._log(f"{self._peer} has said nothing for {self._silence.timeout_s:g} s, but its host acknowledges "
                      f"this host's heartbeats (its train is short of CPU, or stopped): waiting up to "
                      f"{self._silence.limit_s:g} s")
        return lost
