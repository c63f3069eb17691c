"""The control channel's line reader and messages (smtrain.wire.control_protocol), over a real socket pair."""
from __future__ import annotations

import ast
import socket
import threading
from pathlib import Path

import pytest

from smtrain.wire.control_protocol import FIELDS, MAX_MESSAGE, ControlClient, LineReader, MessageType, decode, encode


@pytest.fixture
def pair():
    a, b = socket.socketpair()
    yield a, b
    a.close()
    b.close()


def test_messages_split_anywhere_arrive_whole_and_in_order(pair) -> None:
    writer, reader_sock = pair
    data = (encode(MessageType.START, token="t", attempt=0) + encode(MessageType.SIGNAL, signum=15)
            + encode(MessageType.END, status=3, reason="RuntimeError: boom\nline two ü"))
    for i in range(len(data)):  # one byte per send: the reader must reassemble lines
        writer.sendall(data[i:i + 1])
    writer.close()
    reader = LineReader(reader_sock)
    got = [reader.read(timeout=5) for _ in range(3)]
    assert [m.type for m in got] == [MessageType.START, MessageType.SIGNAL, MessageType.END]
    assert got[1].fields == {"signum": 15}
    assert got[2].fields == {"status": 3, "reason": "RuntimeError: boom\nline two ü"}
    assert reader.read(timeout=5) is None  # end of stream


def test_several_messages_in_one_chunk_are_buffered(pair) -> None:
    writer, reader_sock = pair
    writer.sendall(encode(MessageType.HEARTBEAT) * 3)
    reader = LineReader(reader_sock)
    assert reader.read(timeout=5).type is MessageType.HEARTBEAT
    assert reader.has_buffered()
    assert [reader.read(timeout=5).type for _ in range(2)] == [MessageType.HEARTBEAT] * 2
    assert not reader.has_buffered()


def test_garbage_and_unknown_types_are_invalid_not_errors(pair) -> None:
    writer, reader_sock = pair
    writer.sendall(b"not json\n[1, 2]\n{\"type\": \"reboot\"}\n{\"no\": \"type\"}\n")
    reader = LineReader(reader_sock)
    assert [reader.read(timeout=5).type for _ in range(4)] == [MessageType.INVALID] * 4


@pytest.mark.parametrize("line,why", [
    (b'{"type": "done"}', "done: no field 'status'"),
    (b'{"type": "done", "status": "0"}', "done: field 'status' is str"),
    (b'{"type": "signal", "signum": true}', "signal: field 'signum' is bool"),
    (b'{"type": "ready", "attempt": 1, "refused": 3}', "ready: field 'refused' is int"),
    (b'{"type": "welcome", "admission": ["ssh-ed25519", "AAAA"]}', "welcome: field 'admission' is list"),
])
def test_a_message_whose_fields_do_not_fit_its_type_is_invalid_and_says_why(line: bytes, why: str) -> None:
    """Fields are checked once, where a message is decoded (FIELDS): a receiver takes them as they are."""
    assert decode(line) == (MessageType.INVALID, {"why": why})


def test_every_message_type_has_its_fields_and_what_fits_them_decodes_as_sent() -> None:
    json_types = {int, float, str, bool, list, dict}  # what a field can be once a line is decoded
    assert all(set(types) <= json_types for fields in FIELDS.values() for types in fields.values()), FIELDS
    sent = encode(MessageType.READY, attempt=2) + encode(MessageType.PROGRESS, token="t", host="algo-1", rank=3, steps=9,
                                                        extra="kept")
    ready, progress = (decode(line) for line in sent.splitlines())
    assert ready == (MessageType.READY, {"attempt": 2})  # an optional field may be absent
    assert progress.type is MessageType.PROGRESS and progress.fields["extra"] == "kept"  # others pass through


def test_silence_times_out_and_an_endless_line_is_refused(pair) -> None:
    writer, reader_sock = pair
    reader = LineReader(reader_sock)
    with pytest.raises(TimeoutError):
        reader.read(timeout=0.1)
    sender = threading.Thread(target=lambda: writer.sendall(b"x" * (MAX_MESSAGE + 70000)), daemon=True)
    sender.start()
    with pytest.raises(ValueError, match="too long"):
        reader.read(timeout=5)


def test_a_connection_closed_on_this_side_reads_as_its_end(pair) -> None:
    """A host's link thread may be reading when another thread closes the connection (the job's end)."""
    _, reader_sock = pair
    client = ControlClient(reader_sock)
    client.close()
    assert client.readable(5) and client.receive(timeout=5) is None


def test_a_connection_closed_between_the_look_and_the_wait_reads_as_its_end(pair) -> None:
    """The same when the close comes after `readable` looked at the socket and before it waits on it (seen once
    in a whole run: the link thread died of EBADF, its traceback in the log): the wait finds no descriptor."""
    import os

    _, reader_sock = pair
    client = ControlClient(reader_sock)
    os.close(reader_sock.fileno())  # closed underneath: the socket object still holds the number
    try:
        assert client.readable(5) and client.receive(timeout=5) is None
    finally:
        reader_sock.detach()


SOURCE = Path(__file__).resolve().parent.parent.parent / "entrypoint" / "smtrain"


def _sent_fields() -> dict[MessageType, set[str]]:
    """For each message type, the fields the product's code sends with it, read from the source: every call
    that names a MessageType and gives keywords (encode, send, broadcast, tell_workers, ControlClient.open),
    a literal dict beside it (a rank's WAITING), or a dict spread into it (`**{...}`)."""
    sent: dict[MessageType, set[str]] = {t: set() for t in MessageType}
    for path in SOURCE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            types = [n.attr for n in ast.walk(node) if isinstance(n, ast.Attribute)
                     and isinstance(n.value, ast.Name) and n.value.id == "MessageType"]
            if isinstance(node, ast.Call) and any(isinstance(a, ast.Attribute) and a.attr in types for a in node.args):
                kind = next(MessageType[a.attr] for a in node.args if isinstance(a, ast.Attribute) and a.attr in types)
                for keyword in node.keywords:
                    if keyword.arg is not None:
                        sent[kind].add(keyword.arg)
                    elif isinstance(keyword.value, ast.IfExp) and isinstance(keyword.value.body, ast.Dict):
                        sent[kind] |= {k.value for k in keyword.value.body.keys if isinstance(k, ast.Constant)}
            elif isinstance(node, ast.Tuple) and len(node.elts) == 2 and isinstance(node.elts[1], ast.Dict) and \
                    isinstance(node.elts[0], ast.Attribute) and node.elts[0].attr in MessageType.__members__:
                sent[MessageType[node.elts[0].attr]] |= {k.value for k in node.elts[1].keys if isinstance(k, ast.Constant)}
    return sent


def test_every_field_the_product_sends_is_the_one_its_type_declares() -> None:
    """FIELDS against the senders: a declared field no one sends, or a sent one not declared (removing HELLO's
    `host` from FIELDS, say), fails here. A rank's report (RANK_EXIT) passes its failure's own fields through."""
    sent = _sent_fields()
    for kind, declared in FIELDS.items():
        names = {name.rstrip("?") for name in declared}
        extra = sent[kind] - names if kind is not MessageType.RANK_EXIT else set()
        assert (kind, names - sent[kind], extra) == (kind, set(), set())


def test_every_declared_message_has_its_handler_on_the_side_that_receives_it_and_no_other() -> None:
    """A message is one declaration (its type's fields, sender, receiver, meaning) plus its handler on the
    receiving side: the master's control server (a connection's first message, a worker's, a rank's, a
    demultiplexer's), a worker's link to the master, a rank's reporter, a demultiplexer's link. Heartbeats are
    every reader's; nothing handles INVALID."""
    from smtrain.data.job_dealing import HANDLED
    from smtrain.run.control_server import FIRST, ControlServer
    from smtrain.run.link import MasterLink
    from smtrain.wire.control_protocol import DEMUX, MASTER, RANK, WORKER

    server = ControlServer("127.0.0.1", 0, "token", lambda line: None)
    try:
        handled = {MASTER: {*FIRST, *server._handlers, *server.rank_handlers, *server.pipe_dealings.handlers},
                   WORKER: set(MasterLink(None, "algo-1", 10.0, None)._handlers)}  # type: ignore[arg-type]
    finally:
        server.close()
    handled[RANK] = set(_reporter(lambda: None).handlers)
    handled[DEMUX] = set(HANDLED)
    for side, types in handled.items():
        declared = {t for t in MessageType if t.receiver == side}
        assert (side, types) == (side, declared), "a handler without its declaration, or a declaration without one"


def _reporter(dump):
    from smtrain.rank.reporter import ProgressReporter
    from smtrain.wire.contract import RankContract

    return ProgressReporter(RankContract("127.0.0.1", 1, "token", 1.0, ()), {}, None, dump=dump)  # type: ignore[arg-type]


def test_a_ranks_reporter_told_the_job_stalled_dumps_the_programs_stacks(pair) -> None:
    """The rank's side of STALL, through its handler: the program's stacks dumped (SIGABRT, here recorded),
    and the launcher holds its exit for the others' dumps (`stall_dumped`)."""
    master, rank = pair
    dumped = []
    reporter = _reporter(lambda: dumped.append(True))
    master.sendall(encode(MessageType.STALL) + encode(MessageType.HEARTBEAT))
    client = ControlClient(rank)
    assert reporter._handle(client) and reporter._handle(client)  # STALL, then one it has no handler for
    assert dumped == [True] and reporter.stall_dumped.is_set()


def test_a_ranks_progress_on_its_connection_reaches_the_attempt_of_a_server_that_also_watches_this_hosts_ranks() -> None:
    """PROGRESS through the master's real server, its handler the one the table names (a server given how long ago
    this host's ranks trained once shadowed that handler with the function it was given: no rank's progress
    counted, no stall was ever found)."""
    import time

    from smtrain.run.control_server import ControlServer
    from smtrain.wire.control_protocol import ControlClient

    server = ControlServer("127.0.0.1", 0, "token", lambda line: None, progress=lambda: 1.0)
    try:
        client = ControlClient.open("127.0.0.1", server.port, time.monotonic() + 5, MessageType.PROGRESS, token="token",
                                    host="algo-1", rank=0, steps=7)
        assert client is not None
        deadline = time.monotonic() + 5
        while server.attempt.progress.steps != 7 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert server.attempt.progress.steps == 7
        client.close()
    finally:
        server.close()
