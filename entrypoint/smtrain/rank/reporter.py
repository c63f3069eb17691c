"""What a rank launcher tells the master's `train`: its program's failure (`Reporter`, one short
connection per report) and its progress and Horovod's stall warnings (`ProgressReporter`, one lasting
connection that also carries the master's `stall`)."""
from __future__ import annotations

import threading
import time
from typing import Callable, Mapping, Optional

from ..common import console
from ..config.settings import CURRENT_HOST
from ..proc.rank_progress import ProgressFile, dump_stacks
from ..wire.contract import RankContract
from ..wire.control_protocol import ControlClient, MessageType
from ..wire.progress_file import Counts
from ..wire.rank_failure import RankFailure
from .collectives import CollectiveWaits, StallInspectorLines

__all__ = ["ProgressReporter", "Reporter", "task_host", "task_rank"]


def task_host(env: Mapping[str, str]) -> str:
    """The rank's own host, as its environment names it ("?" where none does)."""
    return env.get(CURRENT_HOST.variable, "?")


def task_rank(env: Mapping[str, str], contract: Optional[RankContract]) -> int:
    """The rank mpirun gave, else the contract's task number (TF strategy jobs), else -1."""
    return int(env.get("SM_RANK", contract.rank if contract else -1))


class Reporter:
    """Sends this rank's failure reports to the master's control server (best effort, 3 s each)."""

    def __init__(self, contract: Optional[RankContract], env: Mapping[str, str], program: str) -> None:
        self._contract = contract
        self._host = task_host(env)
        self._rank = task_rank(env, contract)
        self._local_rank = int(env.get("SM_LOCAL_RANK", "-1"))
        self.program = program

    def failure(self, final: bool, error_at: float, stderr_tail: str, **ending: object) -> RankFailure:
        """A failure report of this rank."""
        return RankFailure(host=self._host, rank=self._rank, local_rank=self._local_rank, final=final,
                           program=self.program, error_at=error_at, stderr_tail=stderr_tail, **ending)  # type: ignore[arg-type]

    def send(self, report: RankFailure) -> None:
        """Sends `report` to the master's control server on a connection of its own (nothing without a
        contract; trying for up to 3 s to connect)."""
        if self._contract is None:
            return
        client = ControlClient.open(self._contract.control_host, self._contract.control_port, time.monotonic() + 3.0,
                                    MessageType.RANK_EXIT, token=self._contract.token, **report.to_fields())
        if client is not None:
            client.close()


class ProgressReporter:
    """Tells the master this rank's progress whenever it grew (checked every second), and what
    Horovod's stall inspector says on this rank's stderr (rank 0's), over one lasting connection;
    when the master says the job stalled, SIGABRT to the program, whose faulthandler
    (PYTHONFAULTHANDLER) writes every thread's Python stack to the log."""

    def __init__(self, contract: RankContract, env: Mapping[str, str], progress: ProgressFile,
                 dump: Callable[[], None] = dump_stacks) -> None:
        self._contract, self._progress, self._dump = contract, progress, dump
        self._host, self._rank = task_host(env), task_rank(env, contract)
        self._stopped = threading.Event()
        self.stall_dumped = threading.Event()  # the master said the job stalled; SIGABRT sent
        self._waits = CollectiveWaits()
        self._waited: dict[int, float] = {}  # rank -> how long the others have waited for it, not yet sent
        self._check_s = 0.0  # the stall inspector's interval
        self._lock = threading.Lock()
        self._reported = Counts()
        self.inspector_lines = StallInspectorLines(self._named)
        # the master's messages on this connection, each to its handler
        self.handlers: dict[MessageType, Callable[[], None]] = {MessageType.STALL: self._stalled}

    def start(self) -> "ProgressReporter":
        """Starts reporting progress in a daemon thread; returns self."""
        threading.Thread(target=self._run, name="progress", daemon=True).start()
        return self

    def stop(self) -> None:
        """Stops reporting: the thread ends within a second."""
        self._stopped.set()

    def _named(self, rank: int, check_s: float) -> None:
        """Horovod's stall inspector named `rank` (called from the stderr relay's thread)."""
        with self._lock:
            self._waited[rank] = self._waits.named(rank, check_s, time.monotonic())
            self._check_s = check_s

    def _messages(self) -> list[tuple[MessageType, dict[str, object]]]:
        counts = self._progress.read()
        messages = []
        if counts != self._reported:
            self._reported = counts
            messages.append(self._progress_message(counts))
        with self._lock:
            waited, self._waited = self._waited, {}
        if waited:
            messages.append((MessageType.WAITING, {"waits": sorted(waited.items()), "check_s": self._check_s}))
        return messages

    def _progress_message(self, counts: Counts) -> tuple[MessageType, dict[str, object]]:
        return MessageType.PROGRESS, {"token": self._contract.token, "host": self._host, "rank": self._rank,
                                      "steps": counts.steps, "beats": counts.beats, "init": int(counts.init)}

    def _run(self) -> None:
        message_type, fields = self._progress_message(self._reported)
        client = ControlClient.open(self._contract.control_host, self._contract.control_port, time.monotonic() + 30,
                                    message_type, **fields)
        if client is None:
            return
        try:
            while not self._stopped.is_set():
                if client.readable(1.0) and not self._handle(client):
                    return
                for message_type, fields in self._messages():
                    if not client.send(message_type, **fields):
                        return
        finally:
            client.close()

    def _handle(self, client: ControlClient) -> bool:
        try:
            message = client.receive(timeout=1.0)
        except (TimeoutError, ValueError):
            return True
        if message is None:
            return False
        handler = self.handlers.get(message.type)
        if handler is not None:
            handler()
        return True

    def _stalled(self) -> None:
        console.log("the job stalled: SIGABRT to the program, whose faulthandler logs its stack")
        self.stall_dumped.set()
        self._dump()
