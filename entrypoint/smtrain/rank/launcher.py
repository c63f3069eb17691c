"""The rank launcher: what mpirun starts for every rank on every host (standard library only).

    python -m smtrain.rank -- PROGRAM [ARGS...]

It takes its `RankContract` from the environment, gives the program the rank's own facts and no
toolkit internals, runs it under the same supervisor as `train` (own process group, signals
forwarded, grace period, nothing left behind, stderr tail kept), and when the program fails it
reports who failed and how to the master's `train`, which names that rank in the job's failure.
"""
from __future__ import annotations

import json
import os
import select
import sys
import threading
import time
from pathlib import Path
from typing import Callable, Mapping, Optional, Sequence

from ..common import console
from ..common.signals import SignalWaker
from ..config.defaults import DEFAULT_BASE_DIR, DEFAULT_GRACE_PERIOD_S
from ..config.secrets import Redactor
from ..progress import Counts
from ..plan.pipes import PipeMode, pipe_env, rank_ended_marker
from ..run import control
from ..run.supervise import supervise
from ..run.watchdog import ProgressFile, dump_stacks
from .collectives import CollectiveWaits, StallInspectorLines, check_interval_s
from .contract import RankContract, without_internals
from .report import RankFailure
from .watch import REPORT_TAIL_BYTES, FailureWatch

__all__ = ["cpu_threads", "main", "rank_env"]

# Tells the stall watchdog when the rank calls Horovod's init and returns from it (startup/sitecustomize.py).
STARTUP_HOOK = str(Path(__file__).resolve().parent / "startup")
# Horovod's stall inspector interval, set for the ranks when the stall watchdog is on (rank.collectives).
STALL_CHECK_ENV = "HOROVOD_STALL_CHECK_TIME_SECONDS"


def local_host(environ: Mapping[str, str]) -> Optional[str]:
    """This host's name as SageMaker knows it (its own resourceconfig.json), not the container's hostname."""
    path = Path(environ.get("SAGEMAKER_BASE_DIR") or DEFAULT_BASE_DIR) / "input" / "config" / "resourceconfig.json"
    try:
        host = json.loads(path.read_text()).get("current_host")
    except (OSError, ValueError, AttributeError):
        return None
    return host if isinstance(host, str) else None


def rank_env(environ: Mapping[str, str], contract: Optional[RankContract]) -> dict[str, str]:
    """The program's environment: the inherited one without the toolkit's internals, plus this rank's facts."""
    env = without_internals(environ)
    for ours, theirs in (("SM_RANK", "OMPI_COMM_WORLD_RANK"), ("SM_SIZE", "OMPI_COMM_WORLD_SIZE"),
                         ("SM_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK"), ("SM_LOCAL_SIZE", "OMPI_COMM_WORLD_LOCAL_SIZE")):
        if theirs in environ:
            env[ours] = environ[theirs]
    host = local_host(environ)
    if host:
        env["SM_CURRENT_HOST"] = env["CURRENT_HOST"] = host
    if contract is not None:
        env.update(pipe_env(contract.pipes, int(env.get("SM_LOCAL_RANK", "0")), int(env.get("SM_RANK", "0"))))
        if contract.stall_timeout_s > 0:  # the user's own setting wins
            env.setdefault(STALL_CHECK_ENV, str(check_interval_s(contract.stall_timeout_s)))
    env.update(cpu_threads(env, os.cpu_count() or 1))
    return env


THREAD_VARIABLES = ("OMP_NUM_THREADS", "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS")


def cpu_threads(env: Mapping[str, str], cores: int) -> dict[str, str]:
    """On a host without GPUs, P ranks each get cores/P threads for OpenMP and for TensorFlow's
    intra- and inter-op pools, so that P ranks do not each start one thread per core and
    oversubscribe the host. Variables the user set are left alone; with GPUs nothing is set."""
    local_size = int(env.get("SM_LOCAL_SIZE", "1") or 1)
    if env.get("SM_NUM_GPUS", "0") not in ("", "0") or local_size < 2:
        return {}
    threads = str(max(1, cores // local_size))
    return {name: threads for name in THREAD_VARIABLES if name not in env}


def task_rank(env: Mapping[str, str], contract: Optional[RankContract]) -> int:
    """The rank mpirun gave, else the contract's task number (TF strategy jobs), else -1."""
    return int(env.get("SM_RANK", contract.rank if contract else -1))


class Reporter:
    """Sends this rank's failure reports to the master's control server (best effort, 3 s each)."""

    def __init__(self, contract: Optional[RankContract], env: Mapping[str, str], program: str) -> None:
        self._contract = contract
        self._host = env.get("SM_CURRENT_HOST", "?")
        self._rank = task_rank(env, contract)
        self._local_rank = int(env.get("SM_LOCAL_RANK", "-1"))
        self.program = program

    def failure(self, final: bool, error_at: float, stderr_tail: str, **ending: object) -> RankFailure:
        return RankFailure(host=self._host, rank=self._rank, local_rank=self._local_rank, final=final,
                           program=self.program, error_at=error_at, stderr_tail=stderr_tail, **ending)  # type: ignore[arg-type]

    def send(self, report: RankFailure) -> None:
        if self._contract is None:
            return
        message = control.encode(control.MessageType.RANK_EXIT, token=self._contract.token, **report.to_fields())
        sock = control.connect(self._contract.control_host, self._contract.control_port, time.monotonic() + 3.0, message)
        if sock is not None:
            sock.close()


class ProgressReporter:
    """Tells the master this rank's progress whenever it grew (checked every second), and what
    Horovod's stall inspector says on this rank's stderr (rank 0's), over one lasting connection;
    when the master says the job stalled, SIGABRT to the program, whose faulthandler
    (PYTHONFAULTHANDLER) writes every thread's Python stack to the log."""

    def __init__(self, contract: RankContract, env: Mapping[str, str], progress: ProgressFile) -> None:
        self._contract, self._progress = contract, progress
        self._host, self._rank = env.get("SM_CURRENT_HOST", "?"), task_rank(env, contract)
        self._stopped = threading.Event()
        self._waits = CollectiveWaits()
        self._waited: dict[int, float] = {}  # rank -> how long the others have waited for it, not yet sent
        self._check_s = 0.0  # the stall inspector's interval
        self._lock = threading.Lock()
        self._reported = Counts()
        self.inspector_lines = StallInspectorLines(self._named)

    def start(self) -> "ProgressReporter":
        threading.Thread(target=self._run, name="progress", daemon=True).start()
        return self

    def stop(self) -> None:
        self._stopped.set()

    def _named(self, rank: int, check_s: float) -> None:
        """Horovod's stall inspector named `rank` (called from the stderr relay's thread)."""
        with self._lock:
            self._waited[rank] = self._waits.named(rank, check_s, time.monotonic())
            self._check_s = check_s

    def _messages(self) -> list[bytes]:
        counts = self._progress.read()
        messages = []
        if counts != self._reported:
            self._reported = counts
            messages.append(self._progress_message(counts))
        with self._lock:
            waited, self._waited = self._waited, {}
        if waited:
            messages.append(control.encode(control.MessageType.WAITING, waits=sorted(waited.items()),
                                           check_s=self._check_s))
        return messages

    def _progress_message(self, counts: Counts) -> bytes:
        return control.encode(control.MessageType.PROGRESS, token=self._contract.token, host=self._host,
                              rank=self._rank, steps=counts.steps, beats=counts.beats, init=int(counts.init))

    def _run(self) -> None:
        sock = control.connect(self._contract.control_host, self._contract.control_port, time.monotonic() + 30,
                               self._progress_message(self._reported))
        if sock is None:
            return
        reader = control.LineReader(sock)
        with sock:
            while not self._stopped.is_set():
                readable, _, _ = select.select([sock], [], [], 1.0)
                if readable or reader.has_buffered():
                    if not self._handle(reader):
                        return
                try:
                    for message in self._messages():
                        sock.sendall(message)
                except OSError:
                    return

    def _handle(self, reader: control.LineReader) -> bool:
        try:
            message = reader.read(timeout=1.0)
        except (TimeoutError, ValueError):
            return True
        if message is None:
            return False
        if message.type is control.MessageType.STALL:
            console.log("the job stalled: SIGABRT to the program, whose faulthandler logs its stack")
            dump_stacks()
        return True


def mark_ended(contract: RankContract, local_rank: int) -> None:
    """Tell this host's demultiplexers that this rank's program has ended: it reads no more FIFOs."""
    folders = {Path(a.for_rank(local_rank)).parent for a in contract.pipes if a.mode is PipeMode.DEMUX}
    for marker in {rank_ended_marker(folder, local_rank) for folder in folders}:
        try:
            marker.parent.mkdir(parents=True, exist_ok=True)
            marker.touch()
        except OSError as e:
            console.log(f"cannot mark this rank's end for the demultiplexers ({marker}): {e.strerror}")


def _both(first: Callable[[bytes], None], second: Callable[[bytes], None]) -> Callable[[bytes], None]:
    def call(data: bytes) -> None:
        first(data)
        second(data)

    return call


def main(argv: Optional[Sequence[str]] = None) -> int:
    waker = SignalWaker()
    args = list(sys.argv[1:] if argv is None else argv)
    if "--" in args:
        args = args[args.index("--") + 1:]
    if not args:
        sys.stderr.write("usage: python -m smtrain.rank -- PROGRAM [ARGS...]\n")
        return 2
    contract = RankContract.from_environ(os.environ)
    env = rank_env(os.environ, contract)
    console.set_prefix(f"[train rank {task_rank(env, contract)}@{env.get('SM_CURRENT_HOST', '?')}] ")
    console.set_redactor(Redactor.of(env))
    grace = contract.grace_period_s if contract else DEFAULT_GRACE_PERIOD_S
    reporter = Reporter(contract, env, args[-1] if len(args) == 1 else args[1])
    watch = FailureWatch(reporter)
    progress = ProgressFile()
    progress.export(env)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [STARTUP_HOOK, env.get("PYTHONPATH")]))
    progress_reporter = ProgressReporter(contract, env, progress).start() if contract else None
    on_stderr = watch if progress_reporter is None else _both(watch, progress_reporter.inspector_lines)
    try:
        result = supervise(args, env, Path.cwd(), grace, waker, on_stderr=on_stderr)
    finally:
        if progress_reporter is not None:
            progress_reporter.stop()
        progress.remove()
        if contract is not None:
            mark_ended(contract, int(env.get("SM_LOCAL_RANK", "0")))
    ended_at = time.time()  # wall clock: comparable across the job's hosts (NTP), unlike monotonic time
    if result.exit_code != 0:
        reporter.send(reporter.failure(
            final=True, error_at=watch.first_error_at or ended_at,
            stderr_tail=result.stderr_tail[-REPORT_TAIL_BYTES:].decode("utf-8", "replace"),
            traceback_seen=watch.first_error_at is not None, exit_code=result.exit_code,
            term_signal=result.term_signal, shutdown_signal=result.shutdown_signal,
            killed_after_grace=result.killed_after_grace,
        ))
    return result.exit_code
