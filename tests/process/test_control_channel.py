"""The master's side of the control channel on loopback: a worker that goes silent without closing
its connection, its host still acknowledging, is lost after six times the heartbeat timeout; one that
keeps beating is not. (A host that stops answering: tests/cluster, a cut cable.) Rank reports: when
the master stops waiting for them."""
from __future__ import annotations

import os
import socket
import subprocess
import sys
import threading
import time

import pytest

from smtrain.run.control_server import ControlServer
from smtrain.wire.control_protocol import MessageType, encode
from smtrain.wire.rank_failure import RankFailure


def _worker(port: int, host: str) -> socket.socket:
    """A worker's `train` as the protocol has it: hello, and once welcomed, joined."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock.sendall(encode(MessageType.HELLO, host=host) + encode(MessageType.JOINED))
    return sock


def test_a_silent_worker_is_lost_at_six_times_the_timeout_while_its_host_answers_and_a_beating_one_never() -> None:
    """The master heartbeats; both workers' kernels acknowledge them (loopback), but algo-2's side
    never says a word, like a `train` that gets no CPU: it is waited for, said so, then lost."""
    lost, logged = threading.Event(), []
    server = ControlServer("127.0.0.1", 0, "token", logged.append, heartbeat_timeout_s=1.0, on_lost=lost.set)
    silent, beating = _worker(server.port, "algo-2"), _worker(server.port, "algo-3")
    try:
        assert server.wait_for_workers(["algo-2", "algo-3"], time.monotonic() + 5) == []
        started = time.monotonic()
        server.start_heartbeat()
        while not lost.is_set() and time.monotonic() - started < 15:  # algo-3 beats; algo-2 keeps its socket open
            beating.sendall(encode(MessageType.HEARTBEAT))
            time.sleep(0.3)
            if time.monotonic() - started < 5:
                assert not lost.is_set()  # 6 s at the earliest
        took = time.monotonic() - started
        assert lost.is_set() and 5.5 < took < 15, took
        assert server.lost_hosts() == ["algo-2"]
        assert "worker algo-2 has said nothing for 1 s, but its host acknowledges this host's heartbeats" in "\n".join(logged)
        assert "lost worker algo-2: nothing heard for 6 s, though its host still acknowledged" in "\n".join(logged)
        assert not any("algo-3" in line for line in logged if "is here" not in line and "joined" not in line), logged
    finally:
        server.close()
        silent.close()
        beating.close()


def test_workers_leaving_after_the_end_are_not_lost() -> None:
    lost = threading.Event()
    server = ControlServer("127.0.0.1", 0, "token", lambda m: None, heartbeat_timeout_s=5, on_lost=lost.set)
    worker = _worker(server.port, "algo-2")
    try:
        assert server.wait_for_workers(["algo-2"], time.monotonic() + 5) == []
        threading.Timer(0.2, worker.close).start()  # the worker hangs up once it got the end
        server.end(0, "")
        time.sleep(0.3)
        assert server.lost_hosts() == [] and not lost.is_set()
    finally:
        server.close()


def _report(port: int, rank: int, final: bool, tail: str, uncaught: bool = False) -> None:
    failure = RankFailure(host="algo-1", rank=rank, local_rank=rank, final=final, program="train.py",
                          error_at=time.time(), stderr_tail=tail, exit_code=1 if final else None, uncaught=uncaught)
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(encode(MessageType.RANK_EXIT, token="token", **failure.to_fields()))


def test_the_master_waits_for_rank_reports_in_flight_only_while_they_could_change_the_root_cause() -> None:
    """mpirun may end while reports are in flight: the master waits for a quiet spell - a short one
    once a rank that failed of itself has reported its end (or its uncaught exception), none once each of the job's ranks has
    sent its final report (a restart in place starts that much sooner)."""
    server = ControlServer("127.0.0.1", 0, "token", lambda m: None, heartbeat_timeout_s=5)
    try:
        _report(server.port, 0, False, "Horovod has been shut down")  # a consequence, early
        began = time.monotonic()
        assert server.first_report(quiet_s=1.5, max_wait_s=10, ranks=3) is not None
        assert time.monotonic() - began >= 1.4  # the whole quiet spell
        _report(server.port, 1, False, "RuntimeError: boom")  # a traceback: maybe one the program handled
        time.sleep(0.2)
        began = time.monotonic()
        assert server.first_report(quiet_s=1.5, max_wait_s=10, ranks=3).rank == 1
        assert time.monotonic() - began >= 1.4
        _report(server.port, 1, False, "RuntimeError: boom", uncaught=True)  # the start-up hook: it is ending
        time.sleep(0.2)
        began = time.monotonic()
        cause = server.first_report(quiet_s=5, max_wait_s=10, ranks=3)
        assert time.monotonic() - began < 2.5 and cause is not None and cause.rank == 1  # settled
        for rank, tail in ((0, "Horovod has been shut down"), (1, "RuntimeError: boom"), (2, "Horovod has been shut down")):
            _report(server.port, rank, True, tail)
        time.sleep(0.2)
        began = time.monotonic()
        cause = server.first_report(quiet_s=5, max_wait_s=10, ranks=3, settled_s=5)
        assert time.monotonic() - began < 2.5 and cause is not None and cause.rank == 1  # every rank ended
    finally:
        server.close()


def test_once_every_launcher_has_ended_the_master_waits_only_for_reports_already_sent() -> None:
    """After mpirun's own end (`senders_gone`) no quiet spell: a report on a connection accepted but not yet
    read is waited for (within the spell), and then nothing more."""
    server = ControlServer("127.0.0.1", 0, "token", lambda m: None, heartbeat_timeout_s=5)
    try:
        _report(server.port, 1, False, "RuntimeError: boom", uncaught=True)
        time.sleep(0.2)
        began = time.monotonic()
        cause = server.first_report(quiet_s=5, max_wait_s=10, ranks=3, settled_s=5, senders_gone=True)
        assert time.monotonic() - began < 1.0 and cause is not None and cause.rank == 1
        late = socket.create_connection(("127.0.0.1", server.port), timeout=5)  # accepted, its report not yet sent
        time.sleep(0.2)
        failure = RankFailure(host="algo-2", rank=2, local_rank=0, final=False, program="train.py",
                              error_at=time.time() - 60, stderr_tail="ValueError: first", uncaught=True)
        threading.Timer(0.5, lambda: late.sendall(encode(MessageType.RANK_EXIT, token="token", **failure.to_fields()))).start()
        began = time.monotonic()
        cause = server.first_report(quiet_s=5, max_wait_s=10, ranks=3, settled_s=5, senders_gone=True)
        assert 0.4 < time.monotonic() - began < 3 and cause is not None and cause.rank == 2  # the earlier failure
        late.close()
    finally:
        server.close()


def test_a_listeners_accept_queue_is_read_from_the_kernel() -> None:
    from smtrain.run.control_server import accept_queue

    with socket.create_server(("127.0.0.1", 0), backlog=8) as listener:
        assert accept_queue(listener) == 0
        clients = [socket.create_connection(listener.getsockname(), timeout=5) for _ in range(2)]
        time.sleep(0.1)
        assert accept_queue(listener) == 2
        listener.accept()[0].close()
        assert accept_queue(listener) == 1
        for client in clients:
            client.close()


def test_profiler_archives_are_taken_whole_in_memory_or_spilled_and_one_past_the_cap_is_dropped(tmp_path) -> None:
    """Three workers ship archives in PROFILE_CHUNK pieces: one small (held in memory), one past
    SPOOL_BYTES (spilled to an unnamed file in the folder), one past the cap (left out, said so);
    each complete one reaches `on_archive` byte for byte, and nothing is left in the folder."""
    import base64
    import os

    from smtrain.run.control_server import SPOOL_BYTES
    from smtrain.wire.control_protocol import PROFILE_CHUNK

    got, logged, incoming = {}, [], tmp_path / "incoming"
    cap = 2 * SPOOL_BYTES
    server = ControlServer("127.0.0.1", 0, "token", logged.append, heartbeat_timeout_s=5)
    server.accept_profiles(incoming, cap, lambda host, archive: got.setdefault(host, archive.read()) and None)
    payloads = {"algo-2": os.urandom(1000), "algo-3": os.urandom(SPOOL_BYTES + 3 * PROFILE_CHUNK + 7),
                "algo-4": os.urandom(cap + 1)}
    workers = {host: _worker(server.port, host) for host in payloads}
    try:
        assert server.wait_for_workers(list(payloads), time.monotonic() + 5) == []
        for host, data in payloads.items():
            for at in range(0, len(data), PROFILE_CHUNK):
                workers[host].sendall(encode(MessageType.PROFILE, data=base64.b64encode(data[at:at + PROFILE_CHUNK]).decode(),
                                             last=at + PROFILE_CHUNK >= len(data)))
        shipped = server.wait_for_profiles(["algo-2", "algo-3"], time.monotonic() + 10)
        assert shipped == {"algo-2": None, "algo-3": None}
        assert got == {"algo-2": payloads["algo-2"], "algo-3": payloads["algo-3"]}
        deadline = time.monotonic() + 5
        while not any("algo-4 sent more profiler data" in line for line in logged) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert f"worker algo-4 sent more profiler data than {cap} bytes: left out" in logged
        assert server.wait_for_profiles(["algo-4"], time.monotonic() + 0.2) == {}
        assert list(incoming.iterdir()) == []

        def spilled() -> list[str]:  # this process's open files in the folder (unnamed: "... (deleted)")
            return [t for t in (os.readlink(f"/proc/self/fd/{fd}") for fd in os.listdir("/proc/self/fd")
                                if os.path.exists(f"/proc/self/fd/{fd}")) if t.startswith(str(incoming))]

        quitter = _worker(server.port, "algo-5")  # hangs up in the middle of an archive past SPOOL_BYTES
        assert server.wait_for_workers(["algo-5"], time.monotonic() + 5) == []
        for at in range(0, SPOOL_BYTES + PROFILE_CHUNK, PROFILE_CHUNK):
            quitter.sendall(encode(MessageType.PROFILE, data=base64.b64encode(os.urandom(PROFILE_CHUNK)).decode(),
                                   last=False))
        deadline = time.monotonic() + 5
        while not spilled() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert spilled(), "the unfinished archive was not spilled to a file"
        quitter.close()
        while spilled() and time.monotonic() < deadline + 5:
            time.sleep(0.05)
        assert spilled() == []  # its file closed once it hung up, not kept until the server ends
    finally:
        server.close()
        for sock in workers.values():
            sock.close()


def test_a_ranks_output_connection_reaches_our_stream_in_whole_lines_and_a_stranger_s_does_not(capfd) -> None:
    """A rank's output: the `output` line and its first bytes in one segment (what the first line's reader
    read past it is not lost), a line in pieces, a last line without its newline; a connection without the
    job's token is dropped unread. `drain` waits until each connection has ended."""
    server = ControlServer("127.0.0.1", 0, "token", lambda m: None)
    try:
        rank = socket.create_connection(("127.0.0.1", server.port), timeout=5)
        stranger = socket.create_connection(("127.0.0.1", server.port), timeout=5)
        stranger.sendall(encode(MessageType.OUTPUT, token="wrong", host="algo-9", rank=9, stream=1) + b"intruder\n")
        rank.sendall(encode(MessageType.OUTPUT, token="token", host="algo-2", rank=3, stream=1) + b"first line\nsec")
        time.sleep(0.2)
        rank.sendall(b"ond line\nno newline")
        rank.close()
        time.sleep(0.2)  # both connections' first lines taken
        assert server.rank_output.drain(5)
        stranger.close()
    finally:
        server.close()
    assert capfd.readouterr().out == "first line\nsecond line\nno newline\n"


def hog_the_interpreter(at_least_s: float) -> float:
    """C calls that each keep the GIL (a regex that backtracks exponentially: `re` never lets go of the
    interpreter), twice as long each time, until one took `at_least_s`; how long that one took."""
    import re

    pattern = re.compile(r"(a+)+$")
    for n in range(16, 40):
        began = time.monotonic()
        pattern.match("a" * n + "b")
        took = time.monotonic() - began
        if took >= at_least_s:
            return took
    raise AssertionError("no regex held the interpreter long enough")


def test_a_heartbeat_sender_held_back_says_so_with_the_stack_that_held_it(capfd) -> None:
    """A thread that holds the interpreter in one long C call stops every other thread of `train`, its heartbeat
    sender among them, while the host's kernel still acknowledges what the peers send: the sender's watchdog
    (the interpreter's own, which needs no GIL) writes every thread's stack while it is held, naming the call,
    and the sender then says how late its beat went out, once an episode. The master's and a worker's senders are this
    one (ControlServer.start_heartbeat, MasterLink.start); here with a 0.2-s beat and 0.6 s for late."""
    from smtrain.wire.heartbeat import Heartbeat

    logged: list[str] = []
    beats: list[float] = []
    stop = threading.Event()
    sender = Heartbeat(lambda: beats.append(time.monotonic()), lambda: not stop.is_set(), logged.append,
                       interval_s=0.2, late_s=0.6).start()
    try:
        time.sleep(0.6)
        assert sender.worst_s < 0.5 and not logged  # on time while nothing holds it
        held = hog_the_interpreter(1.2)
        time.sleep(0.6)
    finally:
        stop.set()
        time.sleep(0.3)
    err = capfd.readouterr().err
    assert "Timeout (0:00:00.800000)!" in err and "in hog_the_interpreter" in err, err[-3000:]
    # said once an episode: the hog's last call, and maybe the one before it (half as long, a beat on time between)
    assert 1 <= len(logged) <= 2 and all("heartbeats went out" in line and "thread heartbeat:" in line
                                         for line in logged), logged
    assert held >= 1.2 and sender.worst_s >= 0.6 and len(beats) >= 5
    server = ControlServer("127.0.0.1", 0, "token", lambda line: None)
    try:
        assert isinstance(server.start_heartbeat(), Heartbeat)
    finally:
        server.close()


HELD_BEAT = """
import os, sys, time
from smtrain.common.console import log
from smtrain.wire.heartbeat import Heartbeat

count = 0

def beat():
    global count
    count += 1
    os.write(1, b"beat\\n")
    if count == 3:
        time.sleep(1.2)  # past the interval and `late`: the watchdog dumps every stack, and the sender says so

Heartbeat(beat, lambda: True, log, interval_s=0.2, late_s=0.6).start()
time.sleep(float(sys.argv[1]))
"""


@pytest.mark.parametrize("stderr", ["pipe", "terminal"])
def test_a_heartbeat_sender_whose_stderr_is_full_beats_on(stderr: str) -> None:
    """`train`'s stderr is a pipe (docker run, SageMaker) or a terminal (SDK local mode runs every container with
    `tty: true`) that nobody reads for a while (a log reader short of CPU, under load) when a beat goes out late:
    neither the watchdog's dump nor the sender's word of it may hold the next beats back. A real process whose
    stderr is full; a 0.2-s beat, 0.6 s for late. (On the code that logged from the sender's own thread, and dumped
    through fd 2 itself, no beat went out once it was late.)"""
    read_fd, write_fd = os.pipe() if stderr == "pipe" else os.openpty()[::-1]
    os.set_blocking(write_fd, False)
    refused, deadline = 0, time.monotonic() + 10
    while refused < 4:  # a terminal takes more a moment later (and drops a line over 4 KB): whole lines until none
        assert time.monotonic() < deadline, "the log could not be filled"
        try:
            os.write(write_fd, b"x" * 1023 + b"\n")
            refused = 0
        except BlockingIOError:
            refused += 1
            time.sleep(0.05)
    os.set_blocking(write_fd, True)  # full: a blocking write waits until someone reads
    child = subprocess.Popen([sys.executable, "-c", HELD_BEAT, "4"], stdout=subprocess.PIPE, stderr=write_fd)
    os.close(write_fd)
    bound = threading.Timer(30, child.kill)  # whatever happens, the child's stdout ends within 30 s
    bound.start()
    try:
        assert child.stdout is not None
        seen = [time.monotonic() for _ in iter(child.stdout.readline, b"")]
        child.wait(timeout=30)
    finally:
        bound.cancel()
        child.kill()
        os.close(read_fd)
    late = max(range(1, len(seen)), key=lambda i: seen[i] - seen[i - 1])
    assert seen[late] - seen[late - 1] >= 1.0 and len(seen) - late >= 8, (len(seen), late)  # beats on after it


def test_a_worker_whose_connection_is_backed_up_holds_back_no_other_workers_heartbeats() -> None:
    """algo-2 reads nothing and the master's connection to it is full: the master's beats to algo-3 keep their
    pace (a send to algo-2 would wait up to its reader's timeout, 10 s here, every beat)."""
    server = ControlServer("127.0.0.1", 0, "token", lambda line: None)
    stuck, beating = _worker(server.port, "algo-2"), _worker(server.port, "algo-3")
    try:
        assert server.wait_for_workers(["algo-2", "algo-3"], time.monotonic() + 5) == []
        full = server.records["algo-2"].connection
        assert full is not None
        try:
            while True:  # its reader left it non-blocking (a timeout): filled until the kernel takes no more
                os.write(full.fileno(), b"x" * 65536)
        except BlockingIOError:
            pass
        beating.settimeout(0.5)
        beating.recv(65536)  # the welcome
        server.start_heartbeat()
        assert _heartbeats_heard(beating, 3.5) >= 3
    finally:
        server.close()
        stuck.close()
        beating.close()


def test_a_worker_whose_connection_has_a_descriptor_past_1024_still_gets_heartbeats() -> None:
    """A large job's master holds three connections a rank (progress, stdout, stderr): a worker that joins after
    them gets a descriptor past select()'s FD_SETSIZE (1024), which select() refuses."""
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 4096)), hard))
    fillers = [os.open(os.devnull, os.O_RDONLY) for _ in range(1100)]
    server = ControlServer("127.0.0.1", 0, "token", lambda line: None)
    worker = _worker(server.port, "algo-2")
    try:
        assert server.wait_for_workers(["algo-2"], time.monotonic() + 5) == []
        connection = server.records["algo-2"].connection
        assert connection is not None and connection.fileno() >= 1024, connection
        server.start_heartbeat()
        assert _heartbeats_heard(worker, 2.5) >= 2
    finally:
        server.close()
        worker.close()
        for fd in fillers:
            os.close(fd)
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def _heartbeats_heard(sock: socket.socket, seconds: float) -> int:
    """How many heartbeats come on a worker's end of the control connection within `seconds`."""
    heard, deadline = b"", time.monotonic() + seconds
    sock.settimeout(0.5)
    while time.monotonic() < deadline:
        try:
            heard += sock.recv(65536)
        except socket.timeout:
            pass
    return heard.count(b'"heartbeat"')
