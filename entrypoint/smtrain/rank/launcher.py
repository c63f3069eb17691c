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
import sys
import time
from pathlib import Path
from typing import Callable, Mapping, Optional, Sequence

from ..common import console
from ..common.signals import SHUTDOWN_SIGNALS, SignalWaker
from ..config.defaults import DEFAULT_BASE_DIR, STALL_EXIT_HOLD_S
from ..config.settings import CURRENT_HOST, GRACE_PERIOD, NUM_GPUS
from ..config.secrets import Redactor
from ..proc.rank_progress import ProgressFile
from ..proc.supervise import supervise
from ..wire.contract import RankContract, without_internals
from ..wire.pipe_assignment import PipeMode, pipe_env, rank_ended_marker
from .collectives import check_interval_s
from .output import send_output_to_master
from .reporter import ProgressReporter, Reporter, task_host, task_rank
from .startup_hook import with_startup_hook
from .watch import REPORT_TAIL_BYTES, FailureWatch

__all__ = ["THREAD_VARIABLES", "cpu_share", "main", "rank_env"]

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
    for ours, theirs in contract.identity if contract is not None else ():  # who this rank is, as its starter says
        if theirs in environ:
            env[ours] = environ[theirs]
    host = local_host(environ)
    if host:
        env[CURRENT_HOST.variable] = env["CURRENT_HOST"] = host
    if contract is not None:
        env.update(pipe_env(contract.pipes, int(env.get("SM_LOCAL_RANK", "0")), int(env.get("SM_RANK", "0"))))
        if contract.stall_timeout_s > 0:  # the user's own setting wins
            env.setdefault(STALL_CHECK_ENV, str(check_interval_s(contract.stall_timeout_s)))
    env.update(cpu_share(env, os.cpu_count() or 1, contract.waiting_yields if contract is not None else ()))
    return env


THREAD_VARIABLES = ("OMP_NUM_THREADS", "TF_NUM_INTRAOP_THREADS", "TF_NUM_INTEROP_THREADS")


def cpu_share(env: Mapping[str, str], cores: int, waiting_yields: Sequence[tuple[str, str]] = ()) -> dict[str, str]:
    """On a host without GPUs, P ranks each get cores/P threads for OpenMP and for TensorFlow's
    intra- and inter-op pools, so that P ranks do not each start one thread per core and
    oversubscribe the host; and `waiting_yields` (the starter's: a rank waiting in its transport yields
    the core - Horovod's background thread waits in MPI every cycle, and spinning there takes a core from
    the ranks' compute). Variables the user set are left alone; with GPUs nothing is set."""
    local_size = int(env.get("SM_LOCAL_SIZE", "1") or 1)
    if env.get(NUM_GPUS.variable, "0") not in ("", "0") or local_size < 2:
        return {}
    threads = str(max(1, cores // local_size))
    wanted = {**{name: threads for name in THREAD_VARIABLES}, **dict(waiting_yields)}
    return {name: value for name, value in wanted.items() if name not in env}


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
    if contract is not None and contract.output:
        send_output_to_master(contract, task_host(env), task_rank(env, contract))
    console.set_prefix(f"[train rank {task_rank(env, contract)}@{task_host(env)}] ")
    console.set_redactor(Redactor.of(env))
    grace = contract.grace_period_s if contract else GRACE_PERIOD.default
    reporter = Reporter(contract, env, args[-1] if len(args) == 1 else args[1])
    progress = ProgressFile()
    watch = FailureWatch(reporter, uncaught=progress.uncaught)
    progress.export(env)
    with_startup_hook(env)
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
            killed_after_grace=result.killed_after_grace, oom_killed=result.oom_killed,
        ))
    if progress_reporter is not None and progress_reporter.stall_dumped.is_set():
        hold_exit(waker, STALL_EXIT_HOLD_S)
    return result.exit_code


def hold_exit(waker: SignalWaker, hold_s: float) -> None:
    """Stay up to `hold_s` (less after a shutdown signal: none): after a stall, this rank's exit
    would make mpirun end the others before their faulthandlers have logged their stacks."""
    deadline = time.monotonic() + hold_s
    while (left := deadline - time.monotonic()) > 0:
        if any(signum in SHUTDOWN_SIGNALS for signum in waker.wait(left)):
            return
