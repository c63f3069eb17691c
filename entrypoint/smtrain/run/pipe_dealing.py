"""The master's part in dealing a Pipe channel across the job's hosts (smtrain.data.demux with `--job`).

Every host's demultiplexer of the channel opens a connection of its own once its ranks have opened their
FIFOs and says which of the job's ranks on its host read it (`readers`), with the records they consumed of an
interrupted epoch (a shuffled channel's resume). Once every host's has come - a round - each is told the
job's readers and every host's consumed records (`dealing`): every host then deals the same stream to the
same ranks in the same rounds, its own ranks' blocks to them and the others' to nowhere, so each record
reaches one rank of the job. A demultiplexer that says `readers` again (the next attempt of a restart in
place) or hangs up before its round is complete leaves it. After each epoch each says what it dealt
(`epoch-dealt`): where two hosts' streams differ, the log says so - their records were then not dealt exactly
once, and nothing else could tell."""
from __future__ import annotations

import socket
import threading
from typing import Any, Callable, Mapping, Optional

from ..config.settings import PIPE_DEALING
from ..wire.control_protocol import LineReader, MessageType, encode

__all__ = ["MAX_CONSUMED", "PipeDealings"]

MAX_CONSUMED = 1 << 30  # bytes of consumed records' fingerprints one host may send (8 a record)
RAW_WAIT_S = 60.0  # the longest pause inside those bytes


class _Member:
    """One host's demultiplexer in a round."""

    def __init__(self, sock: socket.socket, host: str, hosts: int, readers: list[int], consumed: bytes) -> None:
        self.sock, self.host, self.hosts, self.readers, self.consumed = sock, host, hosts, readers, consumed
        self.round = 0  # the round it took part in, once complete


class PipeDealings:
    """The rounds of every channel dealt across hosts, and the epochs' checks."""

    def __init__(self, log: Callable[[str], None]) -> None:
        self._log = log
        self._lock = threading.Lock()
        self._open: dict[str, dict[str, _Member]] = {}  # channel -> host -> its member, until every host came
        self._rounds: dict[str, int] = {}  # channel -> rounds completed
        self._epochs: dict[tuple[str, int, int], dict[str, tuple[str, int]]] = {}  # what hosts dealt, until all said
        self._told: set[tuple[str, int, int]] = set()  # epochs whose streams differed (said once)
        self.handlers: dict[MessageType, Callable[[str, _Member, Mapping[str, Any]], None]] = {
            MessageType.EPOCH_DEALT: self._epoch_dealt,
        }

    def follow(self, sock: socket.socket, reader: LineReader, fields: Mapping[str, Any]) -> None:
        """A demultiplexer's connection, from its `readers`: the round, then its epochs until it hangs up."""
        channel, host = fields["channel"], fields["host"]
        size = fields["consumed"]
        try:
            consumed = reader.read_bytes(size, RAW_WAIT_S) if 0 <= size <= MAX_CONSUMED else None
        except TimeoutError:
            consumed = None
        if consumed is None:
            self._log(f"Pipe channel {channel}: host {host}'s demultiplexer sent no whole list of consumed records")
            sock.close()
            return
        readers = [r for r in fields["readers"] if isinstance(r, int) and not isinstance(r, bool)]
        member = _Member(sock, host, fields["hosts"], readers, consumed)
        self._join(channel, member)
        for message in reader.messages():
            handler = self.handlers.get(message.type)
            if handler is not None:
                handler(channel, member, message.fields)
        with self._lock:
            members = self._open.get(channel, {})
            if members.get(host) is member:  # gone before its round was complete
                del members[host]
        sock.close()

    def _join(self, channel: str, member: _Member) -> None:
        with self._lock:
            members = self._open.setdefault(channel, {})
            members[member.host] = member  # an earlier attempt's member of this host, if any, is replaced
            if len(members) < member.hosts:
                return
            del self._open[channel]
            number = self._rounds[channel] = self._rounds.get(channel, 0) + 1
            for m in members.values():
                m.round = number
        readers = sorted(r for m in members.values() for r in m.readers)
        consumed = b"".join(m.consumed for _, m in sorted(members.items()))
        told = encode(MessageType.DEALING, readers=readers, consumed=len(consumed)) + consumed
        for m in members.values():
            try:
                m.sock.sendall(told)
            except OSError:
                pass  # that host's demultiplexer is gone: its job is ending
        self._log(f"Pipe channel {channel}: dealt across {len(members)} hosts to the job's rank"
                  f"{'s' if len(readers) != 1 else ''} {', '.join(map(str, readers)) or '(none)'}")

    def _epoch_dealt(self, channel: str, member: _Member, fields: Mapping[str, Any]) -> None:
        key = (channel, member.round, fields["epoch"])
        with self._lock:
            said = self._epochs.setdefault(key, {})
            said[member.host] = (fields["first"], fields["records"])
            differ = len(set(said.values())) > 1 and key not in self._told
            if differ:
                self._told.add(key)
            dealt = sorted(said.items())
            if len(said) >= member.hosts:
                del self._epochs[key]
        if differ:
            hosts = "; ".join(f"{host}: {records} records, the first {first}" for host, (first, records) in dealt)
            self._log(f"Pipe channel {channel} epoch {fields['epoch']}: the hosts received different streams ({hosts}): "
                      "its records were not dealt exactly once over the job's ranks. Does every host receive the same "
                      "records in the same order (S3DistributionType FullyReplicated, one ShuffleConfig)? "
                      f"{PIPE_DEALING.variable}=host deals each host's stream to its own ranks alone")
