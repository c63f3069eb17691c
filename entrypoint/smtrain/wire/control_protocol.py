"""The job's control channel: the master's `train` tells the workers' `train` how the job goes.

Why not watch for an `orted` process, as sagemaker-training does: a job shorter than the polling
interval is never seen, and a worker cannot tell a finished job from a lost master. Here the master
says so explicitly, over one TCP connection per worker, as newline-delimited JSON objects whose
`type` is a `MessageType`. Each type is declared once, below: its name on the wire, its fields and their
JSON types (checked where a message is decoded), who sends it, who handles it and what it means; the
receiving side's handlers are keyed by it (a test holds every declared message to a handler on its
receiver's side, and every sent field to the declaration). `markdown_table()` prints them for docs/architecture.md.

A side whose connection breaks, or that reads nothing from the other for the heartbeat timeout while
the other's host acknowledges nothing either (smtrain.wire.liveness: a `train` short of CPU is not
lost), has lost the other: a worker exits with MasterLost, the master ends the job with HostLost
naming the host (a power loss or a network partition closes no connection: only the silence tells).
"""
from __future__ import annotations

import enum
import json
import select
import socket
import threading
import time
from typing import Any, Iterator, Mapping, NamedTuple, Optional

MAX_MESSAGE = 64 * 1024
PROFILE_CHUNK = 32 * 1024  # bytes of archive a `profile` message carries (base64: 43,692 characters)

__all__ = ["ANY", "ControlClient", "DEMUX", "FIELDS", "LineReader", "MASTER", "MONITOR", "MAX_MESSAGE", "Message", "MessageType", "PROFILE_CHUNK",
           "RANK", "WORKER", "connect", "decode", "markdown_table", "encode", "misfit"]


_INT, _STR, _BOOL, _NUMBER = (int,), (str,), (bool,), (int, float)
# who sends / handles a message
WORKER = "worker"
MASTER = "master"
RANK = "rank"
DEMUX = "demux"  # a host's demultiplexer of a Pipe channel dealt across the job's hosts
MONITOR = "monitor"  # a host's system monitor (smtrain.profiler.live)
ANY = "any"


class MessageType(enum.Enum):
    """The control channel's message types: (wire name, fields, sender, receiver, meaning). A field name
    ending in "?" may be absent; fields not named pass through (a rank report's: smtrain.wire.rank_failure
    reads them)."""

    HELLO = ("hello", {"host": _STR}, WORKER, MASTER,
             "once it serves what the job's rank starter needs (sshd, for mpirun)")
    WELCOME = ("welcome", {"admission": _STR}, MASTER, WORKER,
               "answering hello: what the rank starter gives a worker (for mpirun the job's ssh public key, the one "
               "key its sshd may accept: smtrain.wire.ssh_trust; else empty)")
    JOINED = ("joined", {}, WORKER, MASTER, "after welcome: this host took its admission (trusts the key)")
    HEARTBEAT = ("heartbeat", {}, ANY, ANY, "every HEARTBEAT_S, both ways")
    START = ("start", {"token": _STR, "attempt": _INT}, MASTER, WORKER,
             "attempt N of the job starts (0, then one more for each in-job restart): mpirun starts; where workers "
             "run programs of their own (TF strategies), start yours")
    DONE = ("done", {"status": _INT}, WORKER, MASTER, "this host's own program ended with status (TF strategies)")
    RESTART = ("restart", {"attempt": _INT, "cause": _STR}, MASTER, WORKER,
               "the attempt failed and attempt N follows: end your part of it (ranks, program), then say ready")
    READY = ("ready", {"attempt": _INT, "refused?": _STR}, WORKER, MASTER,
             "after restart: this host's part of the failed attempt is gone (or, refused, why it cannot take part in "
             "the next)")
    SIGNAL = ("signal", {"signum": _INT}, MASTER, WORKER, "forward signum to your ranks")
    ABORT = ("abort", {"reason": _STR}, MASTER, WORKER, "the job fails: stop your program now (TF strategies)")
    END = ("end", {"status": _INT, "reason": _STR}, MASTER, WORKER, "the job is over: exit with status")
    PROFILE = ("profile", {"data": _STR, "last": _BOOL}, WORKER, MASTER,
               "after end: this host's profiler files, a gzip'd tar in base64 pieces of PROFILE_CHUNK bytes "
               "(smtrain.profiler.shipping)")
    RANK_EXIT = ("rank-exit", {"token": _STR}, RANK, MASTER,
                 "a rank failed, on a connection of its own, with RankFailure's fields (smtrain.wire.rank_failure)")
    PROGRESS = ("progress", {"token": _STR, "host": _STR, "rank": _INT, "steps": _INT, "beats?": _INT, "init?": _INT},
                RANK, MASTER, "on one lasting connection per rank, when its progress grows (smtrain.progress)")
    WAITING = ("waiting", {"waits": (list,), "check_s": _NUMBER}, RANK, MASTER,
               "on the same connection: Horovod's stall inspector (on rank 0's stderr) says the other ranks have "
               "waited this long for these ranks ([[rank, seconds], ...])")
    OUTPUT = ("output", {"token": _STR, "host": _STR, "rank": _INT, "stream": _INT}, RANK, MASTER,
              "opens a connection of its own that carries the rank's stdout (stream 1) or stderr (2) as raw bytes "
              "after this line; the master writes them to its own stream in whole lines (smtrain.run.rank_output)")
    STALL = ("stall", {}, MASTER, RANK, "the job stalled: dump your stack (SIGABRT)")
    RANK_STEPS = ("rank-steps", {"host": _STR, "ranks": (dict,)}, MONITOR, MASTER,
                  "every few seconds, on a connection of its own: the training steps this host's ranks took since the "
                  "last ({node: [steps, last step, step bins, gap bins]}: smtrain.profiler.live_steps); the master "
                  "names a rank the others wait for (smtrain.run.stragglers)")
    READERS = ("readers", {"channel": _STR, "host": _STR, "hosts": _INT, "readers": (list,), "consumed": _INT}, DEMUX,
               MASTER, "on a connection of its own, once this host's ranks opened their FIFOs of a channel dealt across "
               "the job's `hosts` hosts: the global ranks among them that read it, then `consumed` bytes of the records "
               "they consumed before a restart (fingerprints: smtrain.data.fingerprints)")
    DEALING = ("dealing", {"readers": (list,), "consumed": _INT}, MASTER, DEMUX,
               "once every host's demultiplexer of the channel said `readers`: the job's ranks that read it, in the "
               "order records are dealt to them, then `consumed` bytes: every host's consumed records "
               "(smtrain.run.pipe_dealing)")
    EPOCH_DEALT = ("epoch-dealt", {"epoch": _INT, "first": _STR, "records": _INT}, DEMUX, MASTER,
                   "on the same connection, after each epoch: its first record's fingerprint and its records; the "
                   "master says where hosts' streams differ (then their records were not dealt exactly once)")
    INVALID = ("invalid", {}, ANY, ANY, "what a reader makes of a line that is not a message (never sent)")

    def __new__(cls, wire: str, fields: dict, sender: str, receiver: str, meaning: str) -> "MessageType":
        member = object.__new__(cls)
        member._value_ = wire
        member.fields, member.sender, member.receiver, member.meaning = fields, sender, receiver, meaning
        return member


class Message(NamedTuple):
    """One control-channel message: its type and fields, as its type declares (checked by `decode`)."""
    type: MessageType
    fields: Mapping[str, Any]


# Each message type's fields and their JSON types, as declared.
FIELDS: dict[MessageType, dict[str, tuple[type, ...]]] = {t: t.fields for t in MessageType}


def markdown_table() -> str:
    """The declarations as docs/architecture.md's table: type, sender -> receiver, fields (`?`: optional), meaning."""
    rows = ["| message | from -> to | fields | meaning |", "| --- | --- | --- | --- |"]
    rows += [f"| `{t.value}` | {t.sender} -> {t.receiver} | {', '.join(f'`{f}`' for f in t.fields) or '-'} | "
             f"{t.meaning.replace('|', '/')} |" for t in MessageType]
    return "\n".join(rows) + "\n"


def misfit(message_type: MessageType, fields: Mapping[str, Any]) -> Optional[str]:
    """What is wrong with `fields` for `message_type` (FIELDS), if anything."""
    for spec, types in FIELDS[message_type].items():
        name = spec.rstrip("?")
        if name not in fields:
            if spec.endswith("?"):
                continue
            return f"{message_type.value}: no field '{name}'"
        value = fields[name]
        if not isinstance(value, types) or (isinstance(value, bool) and bool not in types):
            return f"{message_type.value}: field '{name}' is {type(value).__name__}"
    return None


def encode(message_type: MessageType, **fields: Any) -> bytes:
    """A message as one JSON line."""
    return json.dumps({"type": message_type.value, **fields}, separators=(",", ":")).encode() + b"\n"


def decode(line: bytes) -> Message:
    """A JSON line as a message, its fields checked (FIELDS); an INVALID message, saying why, when it is
    not one."""
    try:
        raw = json.loads(line)
        message_type = MessageType(raw.pop("type"))
    except (ValueError, TypeError, KeyError, AttributeError):
        return Message(MessageType.INVALID, {"why": "not a control message"})
    why = misfit(message_type, raw)
    return Message(MessageType.INVALID, {"why": why}) if why else Message(message_type, raw)


class LineReader:
    """Reads newline-delimited JSON messages from a socket with a per-read timeout."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._buffer = bytearray()

    def take_buffered(self) -> bytes:
        """What was read past the last message, handed over (a connection that carries raw bytes next)."""
        data, self._buffer = bytes(self._buffer), bytearray()
        return data

    def read_bytes(self, size: int, timeout: float) -> Optional[bytes]:
        """The `size` raw bytes that follow the last message (within `timeout` of each other); None where the
        connection ends first. TimeoutError when they stop coming."""
        while len(self._buffer) < size:
            if not self._receive(timeout, min(1 << 20, size - len(self._buffer))):
                return None
        data = bytes(self._buffer[:size])
        del self._buffer[:size]
        return data

    def _receive(self, timeout: Optional[float], most: int) -> bool:
        """Up to `most` more bytes into the buffer; False at the connection's end. TimeoutError when none came."""
        try:
            self.sock.settimeout(timeout)  # raises once the socket is closed: the end, as EOF
            chunk = self.sock.recv(most)
        except socket.timeout:
            raise TimeoutError from None
        except OSError:
            return False
        self._buffer += chunk
        return bool(chunk)

    def has_buffered(self) -> bool:
        """Whether a whole line is buffered (readable without blocking)."""
        return b"\n" in self._buffer

    def messages(self) -> Iterator[Message]:
        """Every message that comes, until the connection ends (or sends a line too long)."""
        while True:
            try:
                message = self.read(timeout=None)
            except (TimeoutError, ValueError):
                return
            if message is None:
                return
            yield message

    def read(self, timeout: Optional[float]) -> Optional[Message]:
        """The next message; None at EOF. Raises TimeoutError when none comes within `timeout`."""
        while b"\n" not in self._buffer:
            if len(self._buffer) > MAX_MESSAGE:
                raise ValueError("control message too long")
            if not self._receive(timeout, 65536):
                return None
        line, _, rest = bytes(self._buffer).partition(b"\n")
        self._buffer = bytearray(rest)
        return decode(line)


def connect(host: str, port: int, deadline: float, message: bytes) -> Optional[socket.socket]:
    """Connect to host:port, retrying until `deadline`; send `message` (from `encode`). None if never reachable."""
    delay = 0.05
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        try:
            sock = socket.create_connection((host, port), timeout=min(2.0, remaining))
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.sendall(message)
            return sock
        except OSError:
            time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
            delay = min(delay * 2, 1.0)


class ControlClient:
    """One connection to the master's control server (a worker's `train`, a rank launcher): the first
    message is sent on connecting; then messages go both ways. `send` may be called from any thread."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._reader = LineReader(sock)
        self._lock = threading.Lock()

    @classmethod
    def open(cls, host: str, port: int, deadline: float, message_type: MessageType, /, **fields: Any) -> Optional["ControlClient"]:
        """Connect (retrying until `deadline`) and say `message_type`; None when the server was never reachable."""
        sock = connect(host, port, deadline, encode(message_type, **fields))
        return None if sock is None else cls(sock)

    def send(self, message_type: MessageType, /, **fields: Any) -> bool:
        """Send one message; False when the connection is broken (the next `receive` tells how)."""
        return self.send_raw(encode(message_type, **fields))

    def send_raw(self, data: bytes) -> bool:
        """Send bytes as they are (a message's line, or the raw bytes a message announced: its `consumed`, say);
        False when the connection is broken."""
        with self._lock:
            try:
                self.sock.sendall(data)
            except OSError:
                return False
        return True

    def receive_raw(self, size: int, timeout: float) -> Optional[bytes]:
        """The `size` raw bytes a message announced (LineReader.read_bytes)."""
        return self._reader.read_bytes(size, timeout)

    def readable(self, timeout: float) -> bool:
        """Whether a message (or the end of the connection) can be read now, waiting up to `timeout`."""
        if self._reader.has_buffered() or self.sock.fileno() < 0:  # closed here: `receive` tells the end
            return True
        try:
            return bool(select.select([self.sock], [], [], max(0.0, timeout))[0])
        except (OSError, ValueError):  # closed by another thread since the look above: the same
            return True

    def receive(self, timeout: Optional[float]) -> Optional[Message]:
        """The next message; None when the connection ended. TimeoutError when none came within
        `timeout`, ValueError for an over-long line."""
        return self._reader.read(timeout)

    def close(self) -> None:
        """Closes the connection (not under a send in flight)."""
        with self._lock:  # not under a `send` in flight on another thread (the worker's heartbeats)
            self.sock.close()
