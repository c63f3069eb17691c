"""The job's control channel: the master's `train` tells the workers' `train` how the job goes.

Why not watch for an `orted` process, as sagemaker-training does: a job shorter than the polling
interval is never seen, and a worker cannot tell a finished job from a lost master. Here the master
says so explicitly, over one TCP connection per worker, as newline-delimited JSON:

    worker -> master   {"type": "hello", "host": H}              once sshd is up
    master -> worker   {"type": "start"}                         mpirun starts
                       {"type": "heartbeat"}                     every HEARTBEAT_S
                       {"type": "signal", "signum": N}           forward N to your ranks
                       {"type": "end", "status": S, "reason": R} the job is over: exit with S
    rank   -> master   {"type": "rank-exit", "token": T, ...}    a rank ended non-zero (its report)

A worker that reads nothing for HEARTBEAT_TIMEOUT_S, or whose connection breaks, has lost its master.
"""
from __future__ import annotations

import json
import socket
import threading
import time
from typing import Any, Callable, Mapping, Optional

HEARTBEAT_S = 1.0
HEARTBEAT_TIMEOUT_S = 10.0
DEFAULT_PORT = 7077
MAX_MESSAGE = 64 * 1024


def encode(message: dict[str, Any]) -> bytes:
    return json.dumps(message, separators=(",", ":")).encode() + b"\n"


class LineReader:
    """Reads newline-delimited JSON messages from a socket with a per-read timeout."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._buffer = bytearray()

    def has_buffered(self) -> bool:
        return b"\n" in self._buffer

    def read(self, timeout: Optional[float]) -> Optional[dict[str, Any]]:
        """The next message; None at EOF. Raises TimeoutError when none comes within `timeout`."""
        while b"\n" not in self._buffer:
            if len(self._buffer) > MAX_MESSAGE:
                raise ValueError("control message too long")
            self.sock.settimeout(timeout)
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout:
                raise TimeoutError from None
            except OSError:
                return None
            if not chunk:
                return None
            self._buffer += chunk
        line, _, rest = bytes(self._buffer).partition(b"\n")
        self._buffer = bytearray(rest)
        try:
            message = json.loads(line)
        except json.JSONDecodeError:
            return {"type": "garbage"}
        return message if isinstance(message, dict) else {"type": "garbage"}


HOROVOD_CONSEQUENCE = "Horovod has been shut down"


def _error_time(report: Mapping[str, Any]) -> float:
    return float(report.get("error_at") or float("inf"))


def is_consequence(report: Mapping[str, Any]) -> bool:
    """A rank that failed because another did: Horovod says so on its stderr, or the rank showed no
    error of its own and ended after its launcher was told to shut down (mpirun's abort)."""
    if HOROVOD_CONSEQUENCE in str(report.get("stderr_tail", "")):
        return True
    return bool(report.get("final") and report.get("shutdown_signal") and report.get("traceback_seen") is False)


def root_cause(reports: list[Mapping[str, Any]]) -> Optional["RankReport"]:
    """The failed rank to blame, by the rules in ControlServer.first_report (pure)."""
    by_rank: dict[tuple[Any, Any], RankReport] = {}
    for report in reports:  # a rank's final report replaces its early one
        key = (report.get("host"), report.get("rank"))
        if key not in by_rank or report.get("final"):
            by_rank[key] = RankReport({**by_rank.get(key, {}), **report})
    ranked = list(by_rank.values())
    if not ranked:
        return None
    causes = [r for r in ranked if not is_consequence(r)]
    finals = [r for r in causes if r.get("final")]
    if finals:
        return min(finals, key=_error_time)
    if causes:
        return max(causes, key=_error_time)
    return min(ranked, key=_error_time)


class RankReport(dict):
    """A rank-exit message: host, rank, local_rank, exit_code, term_signal, stderr_tail."""


class ControlServer:
    """The master's side. Threads: one accepting, one reading per connection, one heartbeat."""

    def __init__(self, bind: str, port: int, token: str, log: Callable[[str], None]) -> None:
        self.token = token
        self._log = log
        self._listener = socket.create_server((bind, port), reuse_port=False, backlog=256)
        self.port = self._listener.getsockname()[1]
        self._lock = threading.Condition()
        self._workers: dict[str, socket.socket] = {}
        self._lost: list[tuple[float, str]] = []
        self._reports: list[RankReport] = []
        self._ended = False
        self._closed = False
        threading.Thread(target=self._accept, name="control-accept", daemon=True).start()

    # -- queries -------------------------------------------------------------------------------
    def wait_for_workers(self, hosts: list[str], deadline: float) -> list[str]:
        """Wait until every host in `hosts` said hello; return those that did not by `deadline`."""
        with self._lock:
            while True:
                missing = [h for h in hosts if h not in self._workers]
                remaining = deadline - time.monotonic()
                if not missing or remaining <= 0:
                    return missing
                self._lock.wait(remaining)

    def first_report(self, quiet_s: float = 0.3, max_wait_s: float = 2.0) -> Optional[RankReport]:
        """The root cause among the failed ranks' reports. Waits until no report came for `quiet_s`
        (at most `max_wait_s`): mpirun may end while reports are in flight. Then, leaving out the
        consequences (`is_consequence`: Horovod says it was shut down by another rank's exception,
        or the rank showed no error of its own before mpirun's abort ended it):
        - final reports (the rank ended non-zero), earliest traceback first (each rank's wall clock);
        - else early reports (a traceback appeared, then the launcher was killed by mpirun's abort),
          the latest first: an earlier one may be a traceback the program handled and went on from;
        - else whatever there is, earliest first."""
        deadline = time.monotonic() + max_wait_s
        with self._lock:
            while time.monotonic() < deadline:
                count = len(self._reports)
                self._lock.wait(min(quiet_s, max(0.0, deadline - time.monotonic())))
                if len(self._reports) == count:
                    break
            reports = list(self._reports)
        return root_cause(reports)

    def lost_hosts(self) -> list[str]:
        with self._lock:
            return [host for _, host in sorted(self._lost)]

    # -- messages to workers -------------------------------------------------------------------
    def broadcast(self, message: dict[str, Any]) -> None:
        data = encode(message)
        with self._lock:
            peers = list(self._workers.items())
        for host, sock in peers:
            try:
                sock.sendall(data)
            except OSError:
                pass  # its reader thread notices the loss

    def start_heartbeat(self) -> None:
        def beat() -> None:
            while not self._closed:
                self.broadcast({"type": "heartbeat"})
                time.sleep(HEARTBEAT_S)

        threading.Thread(target=beat, name="control-heartbeat", daemon=True).start()

    def end(self, status: int, reason: str, linger_s: float = 2.0) -> None:
        """Tell every worker the job is over; wait (bounded) until they have hung up."""
        with self._lock:
            self._ended = True
        self.broadcast({"type": "end", "status": status, "reason": reason})
        deadline = time.monotonic() + linger_s
        with self._lock:
            while self._workers and time.monotonic() < deadline:
                self._lock.wait(deadline - time.monotonic())

    def close(self) -> None:
        self._closed = True
        self._listener.close()
        with self._lock:
            for sock in self._workers.values():
                sock.close()

    # -- threads -------------------------------------------------------------------------------
    def _accept(self) -> None:
        while not self._closed:
            try:
                sock, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(sock,), name="control-peer", daemon=True).start()

    def _serve(self, sock: socket.socket) -> None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        reader = LineReader(sock)
        try:
            first = reader.read(timeout=30)
        except (TimeoutError, ValueError):
            sock.close()
            return
        if first and first.get("type") == "rank-exit" and first.get("token") == self.token:
            with self._lock:
                self._reports.append(RankReport(first))
                self._lock.notify_all()
            sock.close()
            return
        if not first or first.get("type") != "hello" or not isinstance(first.get("host"), str):
            sock.close()
            return
        host = first["host"]
        with self._lock:
            self._workers[host] = sock
            self._lock.notify_all()
        self._log(f"worker {host} is ready")
        while True:  # workers send nothing more; this only notices when one goes away
            try:
                if reader.read(timeout=None) is None:
                    break
            except (TimeoutError, ValueError):
                break
        with self._lock:
            if self._workers.get(host) is sock:
                del self._workers[host]
            if not self._ended:
                self._lost.append((time.monotonic(), host))
                self._log(f"lost the connection to worker {host}")
            self._lock.notify_all()
        sock.close()


def connect(host: str, port: int, deadline: float, message: dict[str, Any]) -> Optional[socket.socket]:
    """Connect to host:port, retrying until `deadline`; send `message`. None if never reachable."""
    delay = 0.05
    while True:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            return None
        try:
            sock = socket.create_connection((host, port), timeout=min(2.0, remaining))
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            sock.sendall(encode(message))
            return sock
        except OSError:
            time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
            delay = min(delay * 2, 1.0)
