"""The master's side of the control channel on loopback: a worker that goes silent without closing
its connection is lost after the heartbeat timeout; one that keeps beating is not."""
from __future__ import annotations

import socket
import threading
import time

from smtrain.run.control import ControlServer
from smtrain.wire.control import MessageType, encode


def _worker(port: int, host: str) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock.sendall(encode(MessageType.HELLO, host=host))
    return sock


def test_a_silent_worker_is_lost_after_the_timeout_and_a_beating_one_is_not() -> None:
    lost = threading.Event()
    server = ControlServer("127.0.0.1", 0, "token", lambda m: None, heartbeat_timeout_s=1.5, on_lost=lost.set)
    silent, beating = _worker(server.port, "algo-2"), _worker(server.port, "algo-3")
    try:
        assert server.wait_for_workers(["algo-2", "algo-3"], time.monotonic() + 5) == []
        started = time.monotonic()
        while time.monotonic() - started < 3.5:  # algo-3 beats; algo-2 says nothing, keeps its socket open
            beating.sendall(encode(MessageType.HEARTBEAT))
            time.sleep(0.3)
        assert lost.is_set()
        assert server.lost_hosts() == ["algo-2"]
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
