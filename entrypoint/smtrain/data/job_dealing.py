"""A demultiplexer's link to the master for a Pipe channel dealt across the job's hosts (the master's side and
the protocol: smtrain.run.pipe_dealing): which of the job's ranks read the channel, agreed by every host
before the first epoch of each attempt, and each epoch's first record and count, for the master to compare."""
from __future__ import annotations

import time
from typing import Callable, NamedTuple, Optional, Sequence

from ..common.console import log
from ..wire.control_protocol import ControlClient, MessageType
from ..wire.pipe_assignment import JobAddress
from .fingerprints import Fingerprints, from_bytes

__all__ = ["AGREE_CONNECT_S", "Agreement", "JobDealt", "JobLink", "NoAgreement", "agree"]

AGREE_CONNECT_S = 60.0  # how long the master's control server may take to answer a connection
RAW_WAIT_S = 60.0
POLL_S = 0.2  # how often a wait for the other hosts looks whether a restart was asked for
HANDLED = {MessageType.DEALING}  # what the master sends a demultiplexer (DEMUX: a test holds it to the protocol)


class NoAgreement(Exception):
    """The hosts could not agree: the master's control server unreachable, or gone before every host said."""


class Agreement(NamedTuple):
    """What every host's demultiplexer of a channel was told."""
    readers: tuple[int, ...]  # the job's ranks that read it, in the order records are dealt to them
    consumed: Optional[Fingerprints]  # every host's records consumed before a restart; None where none were


class JobDealt(NamedTuple):
    """A channel dealt across the job's hosts: the job's readers (global ranks, in dealing order) and the
    global rank of this host's local rank 0."""
    readers: tuple[int, ...]
    first_rank: int


class JobLink:
    """One attempt's connection to the master for one channel."""

    def __init__(self, address: JobAddress, channel: str) -> None:
        self.address, self.channel = address, channel
        self._client: Optional[ControlClient] = None

    def agree(self, local_readers: Sequence[int], consumed: bytes, stop: Callable[[], bool]) -> Optional[Agreement]:
        """Say which of this host's ranks (local numbers) read the channel, and what they consumed before a
        restart; wait until every host has: the job's readers. None where `stop()` came first (a restart
        in place); NoAgreement where the master cannot be reached or goes."""
        a = self.address
        client = ControlClient.open(a.control_host, a.control_port, time.monotonic() + AGREE_CONNECT_S,
                                    MessageType.READERS, channel=self.channel, host=a.host, hosts=a.hosts,
                                    readers=[a.first_rank + r for r in local_readers], consumed=len(consumed))
        if client is None:
            raise NoAgreement(f"the master's control server at {a.control_host}:{a.control_port} did not answer "
                              f"within {AGREE_CONNECT_S:g} s")
        self._client = client
        if consumed and not client.send_raw(consumed):
            raise NoAgreement("the master's control server hung up")
        while not client.readable(POLL_S):
            if stop():
                self.close()
                return None
        try:
            told = client.receive(timeout=RAW_WAIT_S)
            if told is None or told.type is not MessageType.DEALING:
                raise NoAgreement("the master's control server hung up before every host said")
            raw = client.receive_raw(told.fields["consumed"], RAW_WAIT_S)
        except (TimeoutError, ValueError) as e:
            raise NoAgreement(f"the master's answer did not come whole ({e or type(e).__name__})") from None
        if raw is None:
            raise NoAgreement("the master's control server hung up before every host said")
        readers = tuple(r for r in told.fields["readers"] if isinstance(r, int))
        return Agreement(readers, Fingerprints(from_bytes(raw)) if raw else None)

    def epoch_dealt(self, epoch: int, first: Optional[int], records: int) -> None:
        """What this host dealt of an epoch, for the master to compare with the other hosts'."""
        if self._client is not None:
            self._client.send(MessageType.EPOCH_DEALT, epoch=epoch, first="" if first is None else f"{first:016x}",
                              records=records)

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
            self._client = None


def agree(link: JobLink, readers: list[int], drop: Optional[Fingerprints], stop: Callable[[], bool]
           ) -> tuple[Optional[JobDealt], Optional[Fingerprints]]:
    """The job's readers and consumed records, agreed with every host (None where a restart came first);
    where the hosts cannot agree, this host's readers alone are dealt to, and the log says so."""
    mine = drop.to_bytes() if drop is not None else b""
    try:
        agreed = link.agree(readers, mine, stop)
    except NoAgreement as e:
        log(f"{link.channel}: cannot deal it across the job's hosts ({e}): this host's ranks read the whole channel")
        link.close()
        return None, drop
    if agreed is None:
        return None, drop
    log(f"{link.channel}: dealt across the job's {link.address.hosts} hosts to the job's rank"
        f"{'s' if len(agreed.readers) != 1 else ''} {', '.join(map(str, agreed.readers)) or '(none)'}"
        + (f"; the {agreed.consumed.total} records they consumed before the restart are left out of FIFO 0"
           if agreed.consumed is not None else ""))
    return JobDealt(agreed.readers, link.address.first_rank), agreed.consumed
