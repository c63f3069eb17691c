"""A worker's side of the control channel: one thread sends heartbeats and does nothing else, another
reads the master's messages; whatever it learns wakes the role's main loop (`SignalWaker.post`).

Why two threads: the reader logs what it hears, and a log line blocks for as long as the container's
log stream is backed up (docker's reader falling behind). A heartbeat that waited on it would make a
healthy worker look lost to the master. For the same reason the reader judges the master silent
only after a look at the socket found nothing: time spent blocked in a log line is not silence. A
silent master whose host still acknowledges this host's heartbeats gets longer (smtrain.wire.liveness).

The master answers the hello with `welcome` and what the job's rank starter gives a worker (the job's
ssh key, for mpirun), which the worker's starter takes before it says `joined`. The master can stop this host's program at any time: `signal`
(a shutdown signal it received:
raised here as if this `train` had received it, so it is forwarded with the grace period), `abort`
(the job fails: stop now) and `end` (the job is over, with its status). After a failed attempt it
may say `restart`: this host ends its part of the attempt, says `ready`, and waits for the next `start`
(`next_attempt` is the one asked for). A master that goes silent
for the heartbeat timeout, or whose connection closes, is lost.
"""
from __future__ import annotations

import os
import threading
import time
from typing import Any, Callable, Mapping, Optional

from ..common.console import log
from ..common.signals import SignalWaker
from ..config.defaults import HEARTBEAT_S
from ..errors import FailureCause, PeersUnreachable
from ..wire.control_protocol import ControlClient, Message, MessageType
from ..wire.heartbeat import Heartbeat
from ..proc.rank_progress import newest_progress_age
from ..wire.liveness import PeerSilence
from .outcome import JobOutcome

__all__ = ["MasterLink", "connect_to_master"]


def connect_to_master(host: str, master: str, port: int, deadline: float, wait_s: float) -> ControlClient:
    """The control connection, hello said; PeersUnreachable when the master is not there by `deadline`."""
    client = ControlClient.open(master, port, deadline, MessageType.HELLO, host=host)
    if client is None:
        raise PeersUnreachable(f"master {master} was not reachable at {master}:{port} within {wait_s:g} s")
    return client


class MasterLink:
    """A worker's link to the master: heartbeats both ways, and the master's start, signals, abort and end."""

    def __init__(self, client: ControlClient, master: str, silence_s: float, waker: SignalWaker,
                 progress: Callable[[], Optional[float]] = newest_progress_age) -> None:
        self._client, self._master, self._silence_s, self._waker = client, master, silence_s, waker
        self._progress = progress  # seconds since this host's ranks last trained (smtrain.wire.liveness)
        self._changed = threading.Condition()
        self.token: Optional[str] = None
        self.attempt = -1  # the attempt the master last started
        self.next_attempt = 0  # the attempt the master last asked every host to be ready for (restart; 0: none)
        self.admission: Optional[str] = None  # what the master's welcome gave this host
        self._aborted: dict[int, str] = {}  # the master's `abort`, by the attempt it came in
        self.end: Optional[JobOutcome] = None  # the job's outcome, as the master said
        self.lost: Optional[str] = None  # how the master was lost
        # the master's messages, each to its handler (the fields were checked when decoded)
        self._handlers: dict[MessageType, Callable[[Mapping[str, Any]], None]] = {
            MessageType.START: self._started, MessageType.WELCOME: self._welcomed, MessageType.RESTART: self._restart,
            MessageType.SIGNAL: self._signal, MessageType.ABORT: self._abort,
            MessageType.END: lambda fields: self._learn(end=JobOutcome(fields["status"], told=fields["reason"]))}

    def start(self) -> "MasterLink":
        """Starts the heartbeat and reader threads; returns self."""
        Heartbeat(lambda: self.send(MessageType.HEARTBEAT), lambda: not self.over(), log, HEARTBEAT_S).start()
        threading.Thread(target=self._run, name="master-link", daemon=True).start()
        return self

    def send(self, message_type: MessageType, **fields: object) -> None:
        """Sends a message to the master; a broken connection shows on the next read."""
        self._client.send(message_type, **fields)  # a broken connection shows on the next read

    def wait_start(self, deadline: float, attempt: int = 0) -> Optional[str]:
        """The job's token once the master starts `attempt` of the job; None when it ended or was lost first."""
        with self._changed:
            while self.attempt < attempt:
                if self.over() or time.monotonic() >= deadline:
                    return None
                self._changed.wait(timeout=max(0.0, min(0.5, deadline - time.monotonic())))
        return self.token

    def wait_welcome(self, deadline: float) -> Optional[str]:
        """What the master's welcome gave this host, once it came; None when none came by `deadline` or the
        job ended first."""
        with self._changed:
            while self.admission is None and not self.over() and time.monotonic() < deadline:
                self._changed.wait(timeout=max(0.0, min(0.5, deadline - time.monotonic())))
            return self.admission

    def over(self) -> bool:
        """Whether the job ended for this host: the master said so, or was lost."""
        return self.end is not None or self.lost is not None

    def why_end(self) -> Optional[str]:
        """Why this host's program must stop now, if it must."""
        if self.lost is not None:
            return f"lost the master ({self.lost})"
        if self.attempt in self._aborted:
            return f"the master ends the job ({self._aborted[self.attempt]})"
        if self.end is not None:
            return f"the job is over (status {self.end.status})"
        return None

    def outcome(self) -> JobOutcome:
        """The job's outcome once `over()`: the master's word, else MasterLost (status 69)."""
        if self.end is not None:
            log(f"the master reports that the job ended with status {self.end.status}")
            return self.end
        what = f"lost the master {self._master} before the job ended ({self.lost}); stopping this host's ranks"
        return JobOutcome.of_cause(FailureCause.MASTER_LOST, what, host=self._master)

    def _run(self) -> None:
        silence = PeerSilence(self._silence_s, f"the master {self._master}", log, self._progress)
        while not self.over():
            if not self._client.readable(silence.wait_s()):
                lost = silence.check(self._client.sock)
                if lost is not None:
                    self._learn(lost=lost)
                    return
                continue
            try:
                message = self._client.receive(timeout=0.5)
            except TimeoutError:  # part of a message: the rest is on its way, or the silence tells
                continue
            except ValueError:
                self._learn(lost="it sent an over-long message")
                return
            if message is None:
                self._learn(lost="its connection closed")
                return
            silence.heard()
            self._handle(message)

    def _handle(self, message: Message) -> None:
        """One message from the master, to its handler."""
        handler = self._handlers.get(message.type)
        if handler is not None:
            handler(message.fields)

    def _started(self, fields: Mapping[str, Any]) -> None:
        with self._changed:
            self.token, self.attempt = fields["token"], fields["attempt"]
            self._changed.notify_all()
        log("the job started" if not self.attempt else f"the job started again (restart {self.attempt})")

    def _welcomed(self, fields: Mapping[str, Any]) -> None:
        with self._changed:
            self.admission = fields["admission"]
            self._changed.notify_all()

    def _restart(self, fields: Mapping[str, Any]) -> None:
        log(f"the master restarts the job in place (restart {fields['attempt']}): {fields['cause']}")
        with self._changed:
            self.next_attempt = fields["attempt"]
            self._changed.notify_all()
        self._waker.post()

    def _abort(self, fields: Mapping[str, Any]) -> None:
        self._aborted.setdefault(self.attempt, fields["reason"])
        self._learn()

    def _signal(self, fields: Mapping[str, Any]) -> None:
        log(f"the master forwards signal {fields['signum']}")
        os.kill(os.getpid(), fields["signum"])  # handled as our own: forwarded, grace period

    def _learn(self, lost: Optional[str] = None, end: Optional[JobOutcome] = None) -> None:
        self.lost, self.end = lost or self.lost, end or self.end
        with self._changed:
            self._changed.notify_all()
        self._waker.post()
