"""The rank launcher: what mpirun starts for every rank on every host (standard library only).

    python -m entrypoint.rank -- PROGRAM [ARGS...]

It adds the rank's own facts to the environment, runs the program under the same supervisor as
`train` (own process group, signals forwarded, grace period, nothing left behind, stderr tail
kept), and when the program ends non-zero it reports who failed and how to the master's `train`,
which names that rank in the job's failure reason.
"""
from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path
from typing import Callable, Mapping, Optional, Sequence

from . import console, control
from .pipeplan import from_json, pipe_env
from .supervise import ProcessResult, SignalWaker, supervise

REPORT_TAIL_BYTES = 2048
MAX_TRACEBACK_BYTES = 65536  # an early report goes once this much traceback came without its exception line


def local_host(environ: Mapping[str, str]) -> Optional[str]:
    """This host's name as SageMaker knows it (its own resourceconfig.json), not the container's hostname."""
    path = Path(environ.get("SAGEMAKER_BASE_DIR") or "/opt/ml") / "input" / "config" / "resourceconfig.json"
    try:
        host = json.loads(path.read_text()).get("current_host")
    except (OSError, ValueError, AttributeError):
        return None
    return host if isinstance(host, str) else None


def rank_env(environ: Mapping[str, str]) -> dict[str, str]:
    env = dict(environ)
    for ours, theirs in (("SM_RANK", "OMPI_COMM_WORLD_RANK"), ("SM_SIZE", "OMPI_COMM_WORLD_SIZE"),
                         ("SM_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK"), ("SM_LOCAL_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE")):
        if theirs in environ:
            env[ours] = environ[theirs]
    host = local_host(environ)
    if host:
        env["SM_CURRENT_HOST"] = env["CURRENT_HOST"] = host
    if environ.get("SMTRAIN_PIPES"):
        env.update(pipe_env(from_json(environ["SMTRAIN_PIPES"]), int(env.get("SM_LOCAL_RANK", "0"))))
    return env


TRACEBACK = b"Traceback (most recent call last):"


def send_report(environ: Mapping[str, str], env: Mapping[str, str], fields: Mapping[str, object]) -> None:
    """Tell the master's control server about this rank (best effort, bounded to 3 s)."""
    address = environ.get("SMTRAIN_CONTROL")
    if not address:
        return
    host, _, port = address.rpartition(":")
    message = {
        "type": "rank-exit",
        "token": environ.get("SMTRAIN_CONTROL_TOKEN", ""),
        "host": env.get("SM_CURRENT_HOST", "?"),
        "rank": int(env.get("SM_RANK", "-1")),
        "local_rank": int(env.get("SM_LOCAL_RANK", "-1")),
        **fields,
    }
    sock = control.connect(host, int(port), time.monotonic() + 3.0, message)
    if sock is not None:
        sock.close()


def exception_line_seen(traceback: bytes) -> bool:
    """Whether a traceback (from its header on) has reached its exception line: the first whole line
    after the frames that is not indented, e.g. `RuntimeError: boom`."""
    lines = traceback.split(b"\n")[1:-1]  # the header, then whole lines only
    return any(line and not line[:1].isspace() for line in lines)


class FailureWatch:
    """Notes when the program's first Python traceback appears on stderr, and tells the master soon
    (an "early" report): when a rank fails, the others soon fail too and mpirun's abort may kill this
    rank's launcher before its program has finished tearing down. The report waits for the
    exception line (at most `wait_s`), which says whether this rank failed because another did
    (Horovod's "has been shut down"). The moment a traceback appears is also the best clock for
    which rank failed first."""

    def __init__(self, environ: Mapping[str, str], env: Mapping[str, str], program: str, wait_s: float = 0.5,
                 send: Callable[[Mapping[str, str], Mapping[str, str], Mapping[str, object]], None] = send_report) -> None:
        self.first_error_at: Optional[float] = None
        self._environ, self._env, self._program, self._wait_s, self._send = environ, env, program, wait_s, send
        self._traceback = bytearray()
        self._lock = threading.Lock()
        self._sent = False
        self._timer: Optional[threading.Timer] = None

    def __call__(self, data: bytes) -> None:
        with self._lock:
            if self._sent:
                return
            if self.first_error_at is None:
                if TRACEBACK not in data:
                    return
                self.first_error_at = time.time()
                data = data[data.index(TRACEBACK):]
                self._timer = threading.Timer(self._wait_s, self._report)
                self._timer.daemon = True
                self._timer.start()
            self._traceback += data
            complete = len(self._traceback) > MAX_TRACEBACK_BYTES or exception_line_seen(bytes(self._traceback))
        if complete:
            self._report()

    def _report(self) -> None:
        with self._lock:
            if self._sent:
                return
            self._sent = True
            if self._timer is not None:
                self._timer.cancel()
            tail = bytes(self._traceback)[-REPORT_TAIL_BYTES:].decode("utf-8", "replace")
        fields = {"final": False, "program": self._program, "error_at": self.first_error_at, "stderr_tail": tail}
        threading.Thread(target=self._send, args=(self._environ, self._env, fields), daemon=True).start()


def main(argv: Optional[Sequence[str]] = None) -> int:
    waker = SignalWaker()
    args = list(sys.argv[1:] if argv is None else argv)
    if "--" in args:
        args = args[args.index("--") + 1:]
    if not args:
        sys.stderr.write("usage: python -m entrypoint.rank -- PROGRAM [ARGS...]\n")
        return 2
    env = rank_env(os.environ)
    console.set_prefix(f"[train rank {env.get('SM_RANK', '?')}@{env.get('SM_CURRENT_HOST', '?')}] ")
    grace = float(os.environ.get("SMTRAIN_GRACE_PERIOD_S", "110"))
    program = args[-1] if len(args) == 1 else args[1]
    watch = FailureWatch(os.environ, env, program)
    result = supervise(args, env, Path.cwd(), grace, waker, on_stderr=watch)
    ended_at = time.time()  # wall clock: comparable across the job's hosts (NTP), unlike monotonic time
    if result.exit_code != 0:
        send_report(os.environ, env, {
            "final": True, "program": program, "error_at": watch.first_error_at or ended_at,
            "traceback_seen": watch.first_error_at is not None,
            "exit_code": result.exit_code, "term_signal": result.term_signal,
            "shutdown_signal": result.shutdown_signal, "killed_after_grace": result.killed_after_grace,
            "stderr_tail": result.stderr_tail[-REPORT_TAIL_BYTES:].decode("utf-8", "replace"),
        })
    return result.exit_code


if __name__ == "__main__":
    sys.exit(main())
