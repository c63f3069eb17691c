"""The master's side of the job's control channel (the protocol: smtrain.wire.control_protocol)."""
from __future__ import annotations

import base64
import binascii
import socket
import struct
import tempfile
import threading
import time
from pathlib import Path
from typing import IO, Any, Callable, Mapping, Optional

from ..config.defaults import HEARTBEAT_S, HEARTBEAT_TIMEOUT_S
from ..wire.control_protocol import LineReader, Message, MessageType, encode
from ..wire.liveness import PeerSilence
from ..wire.progress_file import Counts, InitPhase
from ..wire.rank_failure import RankFailure, root_cause, settled

__all__ = ["ControlServer", "accept_queue"]

SPOOL_BYTES = 1 << 20  # a worker's profiler archive is held in memory up to this size, then in a file


class ControlServer:
    """The master's side. Threads: one accepting, one reading per connection, one heartbeat."""

    def __init__(self, bind: str, port: int, token: str, log: Callable[[str], None],
                 heartbeat_timeout_s: float = HEARTBEAT_TIMEOUT_S, on_lost: Callable[[], None] = lambda: None,
                 on_progress: Callable[[str, int, Counts], None] = lambda host, rank, counts: None,
                 on_waiting: Callable[[dict[int, float], float], None] = lambda waits, check_s: None,
                 on_news: Callable[[], None] = lambda: None, ssh_key: str = "") -> None:
        self.token = token
        self._ssh_key = ssh_key  # the job's ssh public key, given to each worker on its hello (MPI jobs)
        self._on_news = on_news  # called (from a reader thread) after a rank report or a worker's `done`
        self._log = log
        self._heartbeat_timeout_s = heartbeat_timeout_s
        self._on_lost = on_lost  # called (from a reader thread) when a worker is lost mid-job
        self._on_progress = on_progress  # called (from a reader thread) with a rank's steps and signs of life
        self._on_waiting = on_waiting  # called (from a reader thread) with {rank: seconds waited for it}, interval
        self._ranks: list[socket.socket] = []  # rank launchers' lasting connections
        self._listener = socket.create_server((bind, port), reuse_port=False, backlog=256)
        self.port = self._listener.getsockname()[1]
        self._lock = threading.Condition()
        self._workers: dict[str, socket.socket] = {}
        self._lost: list[tuple[float, str]] = []
        self._reports: list[RankFailure] = []
        self._done: dict[str, int] = {}  # TF strategy jobs: host -> its program's status
        self._ready: dict[str, int] = {}  # host -> the restart it is ready for (its last `ready`)
        self._refused: dict[str, str] = {}  # host -> why it cannot take part in a restart (its `ready` said)
        self._incoming: Optional[Path] = None  # where workers' large profiler archives spill (accept_profiles)
        self._profile_cap = 0
        self._on_archive: Optional[Callable[[str, IO[bytes]], Optional[str]]] = None
        self._archives: dict[str, IO[bytes]] = {}  # host -> its archive so far (only its reader thread touches it)
        self._shipped: dict[str, Optional[str]] = {}  # host -> what taking its complete archive said
        self._overflowed: set[str] = set()  # workers whose archive passed the cap: not taken
        self._unread = 0  # connections accepted whose first message is not taken yet (a rank report, maybe)
        self._ended = False
        self._closed = False
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

    def wait_for_profiles(self, hosts: list[str], deadline: float) -> dict[str, Optional[str]]:
        """Of `hosts` whose archives came and were taken by `deadline`: what `on_archive` said of each; a
        host no longer connected (lost, or hung up without sending one) is not waited for."""
        with self._lock:
            while True:
                pending = [h for h in hosts if h not in self._shipped and h in self._workers]
                remaining = deadline - time.monotonic()
                if not pending or remaining <= 0:
                    return {h: self._shipped[h] for h in hosts if h in self._shipped}
                self._lock.wait(remaining)

    # -- queries -------------------------------------------------------------------------------
    def wait_for_workers(self, hosts: list[str], deadline: float) -> list[str]:
        """Wait until every host in `hosts` said hello and, where the job has an ssh key, trusts it (its
        `ready` for attempt 0); return those that did not by `deadline` - at once when one of them hung up."""
        with self._lock:
            while True:
                missing = [h for h in hosts if h not in self._workers or (self._ssh_key and h not in self._ready)]
                hung_up = {host for _, host in self._lost} & set(missing)
                remaining = deadline - time.monotonic()
                if not missing or remaining <= 0 or (self._ssh_key and hung_up):
                    return missing
                self._lock.wait(remaining)

    def said_hello(self, host: str) -> bool:
        """Whether `host`'s `train` reached this server (it may have hung up since)."""
        with self._lock:
            return host in self._workers or any(h == host for _, h in self._lost)

    def first_report(self, quiet_s: float = 0.3, max_wait_s: float = 2.0, ranks: int = 0,
                     settled_s: float = 0.05, senders_gone: bool = False) -> Optional[RankFailure]:
        """The root cause among the failed ranks' reports (`root_cause`). Waits until no report came
        for `quiet_s` (at most `max_wait_s`): mpirun may end while reports are in flight; once the root
        cause is `settled`, `settled_s` of quiet is enough. Once each of the job's `ranks` (if given)
        has sent its final report, none can come; nor once every rank's launcher has ended
        (`senders_gone`: mpirun has) and no connection waits to be accepted or read - a launcher sends
        its report before it exits, on a connection of its own."""
        deadline = time.monotonic() + max_wait_s
        with self._lock:
            while not self._all_final(ranks):
                count = len(self._reports)
                quiet = settled_s if settled(root_cause(self._reports)) else quiet_s
                self._lock.wait_for(lambda: len(self._reports) != count or (senders_gone and not self._in_flight()),
                                    max(0.0, min(quiet, deadline - time.monotonic())))
                if len(self._reports) == count or time.monotonic() >= deadline:
                    break
            reports = list(self._reports)
        return root_cause(reports)

    def _in_flight(self) -> int:
        """Connections not yet taken (caller holds the lock): accepted and unread, or queued to be accepted."""
        return self._unread + accept_queue(self._listener)

    def _all_final(self, ranks: int) -> bool:
        return ranks > 0 and len({(r.host, r.rank) for r in self._reports if r.final}) >= ranks

    def has_reports(self, final: bool = False) -> bool:
        """Whether a rank report came (`final`: one saying its program ended)."""
        with self._lock:
            return any(r.final or not final for r in self._reports)

    def done_hosts(self) -> dict[str, int]:
        """Workers whose program ended (TF strategy jobs), with its status."""
        with self._lock:
            return dict(self._done)

    def failed_done(self) -> Optional[tuple[str, int]]:
        """The first worker whose program ended non-zero (TF strategy jobs), and its status."""
        with self._lock:
            return next(((host, status) for host, status in self._done.items() if status != 0), None)

    def new_attempt(self) -> None:
        """Forget the failed attempt's rank reports and programs' ends: an in-job restart begins."""
        with self._lock:
            self._reports.clear()
            self._done.clear()

    def refused_restart(self, hosts: list[str]) -> Optional[tuple[str, str]]:
        """The first of `hosts` that said it cannot take part in a restart, and why."""
        with self._lock:
            return next(((h, self._refused[h]) for h in hosts if h in self._refused), None)

    def not_ready(self, hosts: list[str], attempt: int) -> list[str]:
        """Those of `hosts` that have not said they are ready for restart `attempt`."""
        with self._lock:
            return [h for h in hosts if self._ready.get(h, -1) < attempt]

    def lost_hosts(self) -> list[str]:
        """Workers lost (and not back), the first lost first."""
        with self._lock:
            return [host for _, host in sorted(self._lost) if host not in self._workers]

    # -- messages to workers -------------------------------------------------------------------
    def broadcast(self, message_type: MessageType, **fields: Any) -> None:
        """Sends a message to every worker connected now; a broken connection shows in its reader."""
        data = encode(message_type, **fields)
        with self._lock:
            workers = list(self._workers.items())
        for host, sock in workers:
            try:
                sock.sendall(data)
            except OSError:
                pass  # its reader thread notices the loss

    def start_heartbeat(self) -> None:
        """Sends every worker a heartbeat each HEARTBEAT_S, until closed."""
        def beat() -> None:
            while not self._closed:
                self.broadcast(MessageType.HEARTBEAT)
                time.sleep(HEARTBEAT_S)

        threading.Thread(target=beat, name="control-heartbeat", daemon=True).start()

    def end(self, status: int, reason: str, linger_s: float = 2.0) -> None:
        """Tell every worker the job is over (`announce_end`); wait (bounded) until they have hung up."""
        self.announce_end(status, reason)
        self.await_hang_ups(linger_s)

    def announce_end(self, status: int, reason: str) -> None:
        """Tell every worker the job is over; `await_hang_ups` before closing, so that none misses it."""
        with self._lock:
            self._ended = True
        self.broadcast(MessageType.END, status=status, reason=reason)

    def await_hang_ups(self, linger_s: float = 2.0) -> None:
        """Until every worker has hung up (after the end: each has read it and sent what it had), at most
        `linger_s`."""
        deadline = time.monotonic() + linger_s
        with self._lock:
            while self._workers and time.monotonic() < deadline:
                self._lock.wait(deadline - time.monotonic())

    def close(self) -> None:
        """Stops listening and closes every connection."""
        self._closed = True
        self._listener.close()
        with self._lock:
            for sock in [*self._workers.values(), *self._ranks]:
                sock.close()

    # -- threads -------------------------------------------------------------------------------
    def _accept(self) -> None:
        while not self._closed:
            try:
                sock, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                self._unread += 1
            threading.Thread(target=self._serve, args=(sock,), name="control-peer", daemon=True).start()

    def _serve(self, sock: socket.socket) -> None:
        try:
            taken = self._take_first(sock)
        finally:
            with self._lock:
                self._unread -= 1
                self._lock.notify_all()
        if taken is not None:
            self._serve_peer(sock, *taken)

    def _take_first(self, sock: socket.socket) -> Optional[tuple[LineReader, Optional[Message]]]:
        """A connection's first message; a rank's report is taken here (and the connection closed): None."""
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        reader = LineReader(sock)
        try:
            first = reader.read(timeout=30)
        except (TimeoutError, ValueError):
            sock.close()
            return None
        if first and first.type is MessageType.RANK_EXIT and first.fields.get("token") == self.token:
            try:
                report = RankFailure.from_fields(first.fields)
            except ValueError as e:
                self._log(f"ignoring a malformed rank report: {e}")
            else:
                with self._lock:
                    self._reports.append(report)
                    self._lock.notify_all()
                self._on_news()
            sock.close()
            return None
        return reader, first

    def _serve_peer(self, sock: socket.socket, reader: LineReader, first: Optional[Message]) -> None:
        """A rank launcher's lasting connection, or a worker's."""
        if first and first.type is MessageType.PROGRESS and first.fields.get("token") == self.token:
            self._follow_rank(sock, reader, first)
            return
        if not first or first.type is not MessageType.HELLO or not isinstance(first.fields.get("host"), str):
            sock.close()
            return
        host = first.fields["host"]
        if self._ssh_key:
            try:
                sock.sendall(encode(MessageType.TRUST, key=self._ssh_key))
            except OSError:
                pass  # its reader below sees the connection end
        with self._lock:
            self._workers[host] = sock
            self._lock.notify_all()
        self._log(f"worker {host} is ready" if not self._ssh_key else f"worker {host} is here; it gets the job's ssh key")
        how = self._until_lost(reader, host)
        partial = self._archives.pop(host, None)  # it hung up in the middle of its profiler archive
        if partial is not None:
            partial.close()
        with self._lock:
            if self._workers.get(host) is sock:
                del self._workers[host]
            lost = not self._ended and not self._closed
            if lost:
                self._lost.append((time.monotonic(), host))
            self._lock.notify_all()
        sock.close()
        if lost:
            self._log(f"lost worker {host}: {how}")
            self._on_lost()

    def _follow_rank(self, sock: socket.socket, reader: LineReader, first: Message) -> None:
        """A rank launcher's progress reports, until it hangs up."""
        try:
            host, rank = str(first.fields["host"]), int(first.fields["rank"])
        except (KeyError, TypeError, ValueError):
            sock.close()
            return
        with self._lock:
            self._ranks.append(sock)
        message: Optional[Message] = first
        while message is not None:
            if message.type is MessageType.PROGRESS:
                counts = _counts(message.fields)
                if counts is not None:
                    self._on_progress(host, rank, counts)
            elif message.type is MessageType.WAITING:
                waits, check_s = _waits(message.fields), message.fields.get("check_s")
                if waits and isinstance(check_s, (int, float)):
                    self._on_waiting(waits, float(check_s))
            try:
                message = reader.read(timeout=None)
            except (TimeoutError, ValueError):
                break
        with self._lock:
            self._ranks.remove(sock)
        sock.close()

    def tell_ranks(self, message_type: MessageType) -> int:
        """Send `message_type` to every rank launcher connected now; how many."""
        data = encode(message_type)
        with self._lock:
            ranks = list(self._ranks)
        sent = 0
        for sock in ranks:
            try:
                sock.sendall(data)
                sent += 1
            except OSError:
                pass
        return sent

    def _until_lost(self, reader: LineReader, host: str) -> str:
        """Read a worker's heartbeats (and `done`) until it goes away; how it went."""
        silence = PeerSilence(self._heartbeat_timeout_s, f"worker {host}", self._log)
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
            if message.type is MessageType.PROFILE:
                self._take_profile(host, message.fields)
            elif message.type is MessageType.DONE and isinstance(message.fields.get("status"), int):
                with self._lock:
                    self._done[host] = message.fields["status"]
                    self._lock.notify_all()
                self._on_news()
            elif message.type is MessageType.READY and isinstance(message.fields.get("attempt"), int):
                with self._lock:
                    self._ready[host] = message.fields["attempt"]
                    if isinstance(message.fields.get("refused"), str):
                        self._refused[host] = message.fields["refused"]
                    self._lock.notify_all()
                if message.fields["attempt"] == 0:
                    self._log(f"worker {host} is ready: it trusts the job's ssh key")
                self._on_news()


    def _take_profile(self, host: str, fields: Mapping[str, Any]) -> None:
        """One piece of a worker's profiler archive, appended to its file; complete at `last`."""
        if self._incoming is None or host in self._shipped or host in self._overflowed:
            return
        try:
            piece = base64.b64decode(str(fields.get("data", "")), validate=True)
        except (binascii.Error, ValueError):
            self._log(f"worker {host} sent a malformed piece of its profiler data: ignored")
            return
        archive = self._archives.get(host)
        if archive is None:
            archive = self._archives[host] = tempfile.SpooledTemporaryFile(SPOOL_BYTES, dir=self._incoming)
        size = archive.tell()
        if size + len(piece) > self._profile_cap:
            self._overflowed.add(host)  # what came is dropped and not unpacked
            self._archives.pop(host).close()
            self._log(f"worker {host} sent more profiler data than {self._profile_cap} bytes: left out")
            return
        archive.write(piece)
        if fields.get("last") is True and size + len(piece) > 0:
            assert self._on_archive is not None
            archive.seek(0)
            try:
                said = self._on_archive(host, archive)
            finally:
                self._archives.pop(host).close()
            with self._lock:
                self._shipped[host] = said
                self._lock.notify_all()


def _counts(fields: Mapping[str, Any]) -> Optional[Counts]:
    steps, beats, init = fields.get("steps"), fields.get("beats", 0), InitPhase.parse(fields.get("init", 0))
    if not isinstance(steps, int) or not isinstance(beats, int) or init is None:
        return None
    return Counts(steps, beats, init)


def _waits(fields: Mapping[str, Any]) -> dict[int, float]:
    try:
        return {int(rank): float(seconds) for rank, seconds in fields.get("waits", [])}
    except (TypeError, ValueError):
        return {}


def accept_queue(listener: socket.socket) -> int:
    """How many connections wait in `listener`'s accept queue (Linux gives it as a listener's
    `tcpi_unacked`, the fifth u32 of struct tcp_info, after 8 bytes of u8 fields)."""
    return struct.unpack_from("I", listener.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 32), 24)[0]
