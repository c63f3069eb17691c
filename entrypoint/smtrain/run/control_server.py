"""The master's side of the job's control channel (the protocol: smtrain.wire.control_protocol): its
sockets and threads, and one dispatch of each message by type - a worker's onto that host's state, a rank's
onto the current attempt (smtrain.run.control_state, whose queries the master role makes of the server)."""
from __future__ import annotations

import base64
import binascii
import itertools
import select
import socket
import struct
import tempfile
import threading
from pathlib import Path
from typing import IO, Any, Callable, Mapping, Optional

from ..config.defaults import HEARTBEAT_S
from ..config.settings import HEARTBEAT_TIMEOUT, STRAGGLER_WINDOW
from ..wire.control_protocol import LineReader, Message, MessageType, encode
from ..wire.heartbeat import Heartbeat
from ..wire.liveness import PeerSilence
from ..wire.progress_file import Counts, InitPhase
from ..wire.rank_failure import RankFailure
from .attempt import HostState
from .control_state import ControlState
from .pipe_dealing import PipeDealings
from .rank_output import RankOutput
from .stragglers import Stragglers

__all__ = ["FIRST", "ControlServer", "accept_queue"]

SPOOL_BYTES = 1 << 20  # a worker's profiler archive is held in memory up to this size, then in a file
# what may open a connection: a worker's hello, a rank's report (alone on its connection), a rank's first progress,
# a rank's output stream, a demultiplexer's readers of a channel dealt across the hosts, a monitor's ranks' steps
FIRST = (MessageType.HELLO, MessageType.RANK_EXIT, MessageType.PROGRESS, MessageType.OUTPUT, MessageType.READERS,
         MessageType.RANK_STEPS)


class ControlServer(ControlState):
    """The master's side. Threads: one accepting, one reading per connection, one heartbeat."""

    def __init__(self, bind: str, port: int, token: str, log: Callable[[str], None],
                 heartbeat_timeout_s: float = HEARTBEAT_TIMEOUT.default, on_lost: Callable[[], None] = lambda: None,
                 on_news: Callable[[], None] = lambda: None, admission: str = "",
                 joined: str = "it has joined the job", straggler_window_s: float = STRAGGLER_WINDOW.default,
                 progress: Callable[[], Optional[float]] = lambda: None) -> None:
        super().__init__()
        self.token = token
        self._admission = admission  # what the rank starter gives each worker on its hello (`welcome`)
        self._joined_note = joined  # how the log says a worker took it
        self._on_news = on_news  # called (from a reader thread) after a rank report or a worker's `done` or `ready`
        self._log = log
        self._heartbeat_timeout_s = heartbeat_timeout_s
        self._on_lost = on_lost  # called (from a reader thread) when a worker is lost mid-job
        self._ranks_progress = progress  # seconds since this host's ranks last trained (smtrain.wire.liveness)
        self._ranks: list[socket.socket] = []  # rank launchers' lasting connections
        self.rank_output = RankOutput()  # the ranks' stdout and stderr, each on a connection of its own
        self.pipe_dealings = PipeDealings(log)  # Pipe channels dealt across the hosts: their demultiplexers' rounds
        self.stragglers = Stragglers(log, straggler_window_s)  # the ranks' recent steps, from every host's monitor
        self._listener = socket.create_server((bind, port), reuse_port=False, backlog=256)
        self.port = self._listener.getsockname()[1]
        self._incoming: Optional[Path] = None  # where workers' large profiler archives spill (accept_profiles)
        self._profile_cap = 0
        self._on_archive: Optional[Callable[[str, IO[bytes]], Optional[str]]] = None
        self._unread = 0  # connections accepted whose first message is not taken yet (a rank report, maybe)
        self._closed = False
        # each message the master handles, to its handler (the fields were checked when decoded): a worker's
        # once it said hello, a rank's on its lasting connection (a connection's first message: `_serve`)
        self._handlers: dict[MessageType, Callable[[str, Mapping[str, Any]], None]] = {
            MessageType.JOINED: self._joined, MessageType.DONE: self._done, MessageType.READY: self._ready,
            MessageType.PROFILE: self._take_profile,
        }
        self.rank_handlers: dict[MessageType, Callable[[str, int, Mapping[str, Any]], None]] = {
            MessageType.PROGRESS: self._progress, MessageType.WAITING: self._waiting,
        }
        threading.Thread(target=self._accept, name="control-accept", daemon=True).start()

    def accept_profiles(self, folder: Path, cap_bytes: int, on_archive: Callable[[str, IO[bytes]], Optional[str]]
                        ) -> None:
        """Take the workers' profiler archives (`profile` messages), at most `cap_bytes` each: in memory up
        to SPOOL_BYTES (no file made and removed per worker at the job's end), past that in an unnamed file
        in `folder`. Each complete one is handed to `on_archive(host, archive)` at once, in its worker's
        connection thread (unpacked while the other workers still send), which says what is missing from
        it, if anything."""
        folder.mkdir(parents=True, exist_ok=True)
        self._incoming, self._profile_cap, self._on_archive = folder, cap_bytes, on_archive

    def in_flight(self) -> int:
        """Connections not yet taken (caller holds the lock): accepted and unread, or queued to be accepted."""
        return self._unread + accept_queue(self._listener)

    # -- messages to workers -------------------------------------------------------------------
    def broadcast(self, message_type: MessageType, **fields: Any) -> None:
        """Sends a message to every worker connected now; a broken connection shows in its reader."""
        data = encode(message_type, **fields)
        for sock in self._worker_connections():
            try:
                sock.sendall(data)
            except OSError:
                pass  # its reader thread notices the loss

    def tell_ranks(self, message_type: MessageType) -> int:
        """Send `message_type` to every rank launcher connected now; how many."""
        data = encode(message_type)
        with self.lock:
            ranks = list(self._ranks)
        sent = 0
        for sock in ranks:
            try:
                sock.sendall(data)
                sent += 1
            except OSError:
                pass
        return sent

    def beat(self) -> None:
        """A heartbeat to every worker whose connection takes it now. One that has not read what it was sent is
        skipped - a beat queued behind its backlog tells it nothing - so that its backlog never holds back
        another worker's beats (a send to it would wait up to its reader's timeout)."""
        data = encode(MessageType.HEARTBEAT)
        for sock in self._worker_connections():
            try:
                writable = select.poll()  # poll, not select: a large job's descriptors pass FD_SETSIZE (1024)
                writable.register(sock, select.POLLOUT)
                if writable.poll(0):
                    sock.sendall(data)
            except (OSError, ValueError):
                pass  # closed meanwhile: its reader thread notices the loss

    def _worker_connections(self) -> list[socket.socket]:
        """The workers' connections open now."""
        with self.lock:
            return [r.connection for r in self.records.values() if r.connection is not None]

    def start_heartbeat(self) -> Heartbeat:
        """Sends every worker a heartbeat each HEARTBEAT_S (`beat`), until closed; late ones are said
        (wire.heartbeat)."""
        return Heartbeat(self.beat, lambda: not self._closed, self._log, HEARTBEAT_S).start()

    def end(self, status: int, reason: str, linger_s: float = 2.0) -> None:
        """Tell every worker the job is over (`announce_end`); wait (bounded) until they have hung up."""
        self.announce_end(status, reason)
        self.await_hang_ups(linger_s)

    def announce_end(self, status: int, reason: str) -> None:
        """Tell every worker the job is over; `await_hang_ups` before closing, so that none misses it."""
        with self.lock:
            self.ended = True
        self.broadcast(MessageType.END, status=status, reason=reason)

    def close(self) -> None:
        """Stops listening and closes every connection."""
        self._closed = True
        self._listener.close()
        with self.lock:
            for sock in [*(r.connection for r in self.records.values() if r.connection is not None), *self._ranks]:
                sock.close()

    # -- threads -------------------------------------------------------------------------------
    def _accept(self) -> None:
        while not self._closed:
            try:
                sock, _ = self._listener.accept()
            except OSError:
                return
            with self.lock:
                self._unread += 1
            threading.Thread(target=self._serve, args=(sock,), name="control-peer", daemon=True).start()

    def _serve(self, sock: socket.socket) -> None:
        """A connection, by its first message: a rank's report (taken before the connection stops counting
        as in flight, and closed), a rank launcher's progress, a rank's output stream, a worker's hello, a demultiplexer's
        readers (smtrain.run.pipe_dealing) or a monitor's ranks' steps (smtrain.run.stragglers)."""
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        reader = LineReader(sock)
        first: Optional[Message] = None
        try:
            first = reader.read(timeout=30)
            if first is not None and first.type not in FIRST:
                first = None
            if first is not None and first.type is MessageType.RANK_EXIT and first.fields["token"] == self.token:
                self._take_report(first.fields)
                first = None
        except (TimeoutError, ValueError):
            first = None
        finally:
            with self.lock:
                self._unread -= 1
                self.lock.notify_all()
        if first is not None and first.type is MessageType.PROGRESS and first.fields["token"] == self.token:
            self._follow_rank(sock, reader, first)
        elif first is not None and first.type is MessageType.OUTPUT and first.fields["token"] == self.token \
                and first.fields["stream"] in (1, 2):
            self.rank_output.follow(sock, reader.take_buffered(), first.fields["stream"])
        elif first is not None and first.type is MessageType.HELLO:
            self._serve_worker(sock, reader, first.fields["host"])
        elif first is not None and first.type is MessageType.READERS:
            self.pipe_dealings.follow(sock, reader, first.fields)
        elif first is not None and first.type is MessageType.RANK_STEPS:
            self.stragglers.follow(sock, reader, first)
        else:
            sock.close()

    def _take_report(self, fields: Mapping[str, Any]) -> None:
        try:
            report = RankFailure.from_fields(fields)
        except ValueError as e:
            self._log(f"ignoring a malformed rank report: {e}")
            return
        self.add_report(report)
        self._on_news()

    def _serve_worker(self, sock: socket.socket, reader: LineReader, host: str) -> None:
        """A worker's connection: welcome, then its messages until it goes away."""
        try:
            sock.sendall(encode(MessageType.WELCOME, admission=self._admission))
        except OSError:
            pass  # its reader below sees the connection end
        self.connected(host, sock)
        self._log(f"worker {host} is here")
        how = self._until_lost(reader, host)
        lost = self.hung_up(host, sock, self._closed)
        sock.close()
        if lost:
            self._log(f"lost worker {host}: {how}")
            self._on_lost()

    def _until_lost(self, reader: LineReader, host: str) -> str:
        """Read a worker's messages, each to its handler, until it goes away; how it went."""
        silence = PeerSilence(self._heartbeat_timeout_s, f"worker {host}", self._log, self._ranks_progress)
        while True:
            try:
                message = reader.read(timeout=silence.wait_s())
            except TimeoutError:
                lost = silence.check(reader.sock)
                if lost is not None:
                    return lost
                continue
            except ValueError:
                return "it sent an over-long message"
            if message is None:
                return "its connection closed"
            silence.heard()
            handler = self._handlers.get(message.type)
            if handler is not None:
                handler(host, message.fields)

    def _joined(self, host: str, fields: Mapping[str, Any]) -> None:
        self.move(host, HostState.JOINED)
        self._log(f"worker {host} joined the job: {self._joined_note}")

    def _done(self, host: str, fields: Mapping[str, Any]) -> None:
        self.move(host, HostState.DONE, status=fields["status"])
        self._on_news()

    def _ready(self, host: str, fields: Mapping[str, Any]) -> None:
        refused = fields.get("refused")
        self.move(host, HostState.REFUSED if refused else HostState.READY, refused=refused)
        self._on_news()

    def _follow_rank(self, sock: socket.socket, reader: LineReader, first: Message) -> None:
        """A rank launcher's progress reports, until it hangs up."""
        host, rank = first.fields["host"], first.fields["rank"]
        with self.lock:
            self._ranks.append(sock)
        for message in itertools.chain([first], reader.messages()):
            handler = self.rank_handlers.get(message.type)
            if handler is not None:
                handler(host, rank, message.fields)
        with self.lock:
            self._ranks.remove(sock)
        sock.close()

    def _progress(self, host: str, rank: int, fields: Mapping[str, Any]) -> None:
        counts = _counts(fields)
        if counts is not None:
            self.attempt.observe(host, rank, counts)

    def _waiting(self, host: str, rank: int, fields: Mapping[str, Any]) -> None:
        waits = _waits(fields)
        if waits:
            self.attempt.waited_for(waits, float(fields["check_s"]))

    def _take_profile(self, host: str, fields: Mapping[str, Any]) -> None:
        """One piece of a worker's profiler archive, appended to its file; complete at `last`. Only this
        host's connection thread touches its archive."""
        record = self.records.get(host)
        if self._incoming is None or record is None or record.shipped or record.overflowed:
            return
        try:
            piece = base64.b64decode(fields["data"], validate=True)
        except (binascii.Error, ValueError):
            self._log(f"worker {host} sent a malformed piece of its profiler data: ignored")
            return
        if record.archive is None:
            record.archive = tempfile.SpooledTemporaryFile(SPOOL_BYTES, dir=self._incoming)
        archive = record.archive
        size = archive.tell()
        if size + len(piece) > self._profile_cap:
            record.overflowed, record.archive = True, None  # what came is dropped and not unpacked
            archive.close()
            self._log(f"worker {host} sent more profiler data than {self._profile_cap} bytes: left out")
            return
        archive.write(piece)
        if fields["last"] and size + len(piece) > 0:
            assert self._on_archive is not None
            archive.seek(0)
            try:
                said = self._on_archive(host, archive)
            finally:
                record.archive = None
                archive.close()

            with self.lock:
                record.shipped, record.shipped_note = True, said
                self.lock.notify_all()


def _counts(fields: Mapping[str, Any]) -> Optional[Counts]:
    init = InitPhase.parse(fields.get("init", 0))
    return None if init is None else Counts(fields["steps"], fields.get("beats", 0), init)


def _waits(fields: Mapping[str, Any]) -> dict[int, float]:
    try:
        return {int(rank): float(seconds) for rank, seconds in fields.get("waits", [])}
    except (TypeError, ValueError):
        return {}


def accept_queue(listener: socket.socket) -> int:
    """How many connections wait in `listener`'s accept queue (Linux gives it as a listener's
    `tcpi_unacked`, the fifth u32 of struct tcp_info, after 8 bytes of u8 fields)."""
    return struct.unpack_from("I", listener.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 32), 24)[0]
