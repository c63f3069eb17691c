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
from typing import Mapping, Optional, Sequence

from ..common import console
from ..common.signals import SignalWaker
from ..config.defaults import DEFAULT_BASE_DIR, DEFAULT_GRACE_PERIOD_S
from ..config.secrets import Redactor
from ..plan.pipes import pipe_env
from ..run import control
from ..run.supervise import supervise
from .contract import RankContract, without_internals
from .report import RankFailure
from .watch import REPORT_TAIL_BYTES, FailureWatch

__all__ = ["main", "rank_env"]


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
        env.update(pipe_env(contract.pipes, int(env.get("SM_LOCAL_RANK", "0"))))
    return env


class Reporter:
    """Sends this rank's failure reports to the master's control server (best effort, 3 s each)."""

    def __init__(self, contract: Optional[RankContract], env: Mapping[str, str], program: str) -> None:
        self._contract = contract
        self._host = env.get("SM_CURRENT_HOST", "?")
        self._rank = int(env.get("SM_RANK", "-1"))
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
    console.set_prefix(f"[train rank {env.get('SM_RANK', '?')}@{env.get('SM_CURRENT_HOST', '?')}] ")
    console.set_redactor(Redactor.of(env))
    grace = contract.grace_period_s if contract else DEFAULT_GRACE_PERIOD_S
    reporter = Reporter(contract, env, args[-1] if len(args) == 1 else args[1])
    watch = FailureWatch(reporter)
    result = supervise(args, env, Path.cwd(), grace, waker, on_stderr=watch)
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
