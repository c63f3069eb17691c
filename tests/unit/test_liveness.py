"""When a silent peer counts as lost (smtrain.wire.liveness): the verdict, and the kernel's word on
whether the peer's host acknowledges what we send, read from a real TCP connection on loopback."""
from __future__ import annotations

import socket
import time

import pytest

from smtrain.wire.liveness import HOST_ANSWER_S, Silence, last_ack_age_s


@pytest.mark.parametrize("silent_s,ack_age_s,lost", [
    (9.9, None, None),  # within the timeout, whatever the host does
    (9.9, 30.0, None),
    (10.0, None, "nothing heard for 10 s"),  # nothing known of the host: the timeout decides
    (10.0, HOST_ANSWER_S, "nothing heard for 10 s"),  # its host stopped answering: a power loss, a cut
    (10.0, 0.2, None),  # its host answers: its train is short of CPU, or stopped
    (59.9, 0.2, None),
    (60.0, 0.2, "nothing heard for 60 s, though its host still acknowledged this host's heartbeats"),
])
def test_a_silent_peer_is_lost_at_the_timeout_unless_its_host_answers_then_at_six_times_it(
        silent_s: float, ack_age_s: float, lost: str) -> None:
    assert Silence(10.0).verdict(silent_s, ack_age_s) == lost


@pytest.mark.parametrize("silent_s,ack_age_s,progress_age_s,lost", [
    (600.0, 0.2, 1.0, None),  # this host's ranks trained a second ago: their collectives vouch for the master's
    (60.0, 0.2, 10.0, "nothing heard for 60 s, though its host still acknowledged this host's heartbeats"),  # they stopped
    (60.0, 0.2, None, "nothing heard for 60 s, though its host still acknowledged this host's heartbeats"),  # none trains
    (10.0, HOST_ANSWER_S, 1.0, "nothing heard for 10 s"),  # its host stopped answering: its ranks' word is not enough
])
def test_past_the_limit_a_silent_master_is_waited_for_while_this_hosts_ranks_train(
        silent_s: float, ack_age_s: float, progress_age_s: float, lost: str) -> None:
    assert Silence(10.0).verdict(silent_s, ack_age_s, progress_age_s) == lost


def test_the_next_look_is_at_the_timeout_then_every_half_second() -> None:
    silence = Silence(10.0)
    assert silence.next_wait(0.0) == 10.0 and silence.next_wait(7.5) == 2.5
    assert silence.next_wait(10.0) == silence.next_wait(30.0) == 0.5


def test_a_hosts_acknowledgements_are_read_from_the_kernel_though_its_process_reads_nothing() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    sender = socket.create_connection(listener.getsockname(), timeout=5)
    peer, _ = listener.accept()  # never reads: like a `train` that gets no CPU
    try:
        time.sleep(1.2)
        assert last_ack_age_s(sender) >= 1.0  # nothing sent, nothing acknowledged since the handshake
        sender.sendall(b"heartbeat\n")
        deadline = time.monotonic() + 5
        while last_ack_age_s(sender) >= 1.0 and time.monotonic() < deadline:
            time.sleep(0.01)
        assert last_ack_age_s(sender) < 1.0
    finally:
        for sock in (sender, peer, listener):
            sock.close()


def test_where_the_kernel_cannot_say_the_age_is_unknown() -> None:
    a, b = socket.socketpair()  # not TCP
    try:
        assert last_ack_age_s(a) is None
    finally:
        a.close()
        b.close()
    closed = socket.socket()
    closed.close()
    assert last_ack_age_s(closed) is None
