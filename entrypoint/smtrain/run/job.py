"""One host's part of a job, whatever its distribution kind and role: the skeleton every role runs.

    prepare        folders, code, requirements, the program's checks
    helpers        the system monitor and demultiplexers (`start_helpers`), stopped on every path
    role body      single: the program under its watchdog (run.single); master: the control server,
                   the workers' hellos, the watchdog, the program, the job's end (run.master);
                   worker: the master's link and this host's part (run.worker). What differs between
                   kinds (MPI, MultiWorkerMirroredStrategy, parameter servers) is in the plan's
                   `Coordination` (plan.coordination): run/ never asks which kind it runs
    finish         anything left running ended; the profiler report (master, single host; also after a
                   failure); the `JobOutcome` rendered once (run.outcome.render)
"""
from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import time
from typing import Callable, Mapping, Optional, Sequence

from ..common import linux
from ..common.console import log, redact
from ..common.signals import SignalWaker
from ..wire.contract import RANK_CONTRACT_ENV
from ..plan.localmode import describe as describe_emulation
from ..plan.launch import DemuxSpec, LaunchPlan, Role
from ..plan.program import check_program
from ..config.defaults import DEMUX_RESTART_WAIT_S, REPORT_TIMEOUT_S
from ..proc.helpers import HelperGroup, spawn_helper, stop_all
from ..proc.rank_progress import newest_progress_age
from ..wire.pipe_assignment import restart_ack
from ..proc.supervise import end_descendants, parent_death_signal
from .carry import keep_checkpoints, restore_checkpoints, written_since
from .codesetup import fetch_code
from .intermediate_sync import FINISH_WAIT_S, STOPPING_WAIT_S, finish_syncer, start_syncer
from .pip_install import install_requirements
from .outcome import FileState, JobOutcome, render, warn_if_no_model

__all__ = ["HostJob", "prepare", "restart_kept_demultiplexers", "start_helpers", "start_pipe_helpers", "write_report"]


def prepare(plan: LaunchPlan, python: str) -> None:
    """Everything before the program can start on this host: folders, code, requirements, checks."""
    for folder in plan.folders:
        folder.mkdir(parents=True, exist_ok=True)
    if plan.cleared:
        import shutil  # here: a job that clears nothing starts its program without it

        for stale in plan.cleared:
            shutil.rmtree(stale, ignore_errors=True)
    if plan.program.fetch_from:
        fetch_code(plan.program.fetch_from, plan.program.program_dir)
    install_requirements(python, plan.requirements)
    check_program(plan.program)
    restore_checkpoints(plan.restore_checkpoints_from, plan.checkpoint_dir)


def start_pipe_helpers(plan: LaunchPlan, helpers: HelperGroup, demux: Optional[Sequence[DemuxSpec]] = None) -> None:
    """The local feeder (emulated Pipe mode) and the demultiplexers (`demux`: the plan's), as the plan
    says, into `helpers`."""
    if plan.feeder:
        log(describe_emulation(plan.emulated))
        helpers.start("feeder", plan.feeder)
    for spec in plan.demux if demux is None else demux:
        log(f"starting the demultiplexer: {shlex.join(spec.argv)}")
        helpers.start(spec.name, spec.argv)


def restart_kept_demultiplexers(helpers: HelperGroup, demux: Sequence[DemuxSpec], wait_s: float) -> Optional[str]:
    """Ask the demultiplexers of SageMaker's own FIFOs (`demux`) to serve a restart in place (SIGUSR1)
    and wait, up to `wait_s`, until each says the old attempt's FIFOs are gone
    (smtrain.data.demux_restarts); why not, where one did not."""
    asked = []
    for spec in demux:
        channel = spec.channel
        ack = restart_ack(spec.data_dir, channel)
        ack.unlink(missing_ok=True)
        helper = next((h for h in helpers.helpers if h.name == spec.name), None)
        if helper is None or helper.process.poll() is not None:
            return f"the demultiplexer of Pipe channel {channel} has ended"
        os.kill(helper.process.pid, signal.SIGUSR1)
        asked.append((channel, ack, helper))
    deadline = time.monotonic() + wait_s
    for channel, ack, helper in asked:
        while not ack.exists():
            if helper.process.poll() is not None:
                return f"the demultiplexer of Pipe channel {channel} has ended"
            if time.monotonic() >= deadline:
                return f"the demultiplexer of Pipe channel {channel} was not ready for a restart within {wait_s:g} s"
            time.sleep(0.02)
    return None


def start_helpers(plan: LaunchPlan, helpers: HelperGroup) -> None:
    """The local feeder (emulated Pipe mode), the demultiplexers and the system monitor, as the plan
    says, into `helpers`."""
    start_pipe_helpers(plan, helpers)
    if plan.monitor:
        # should train be killed, the monitor gets SIGTERM: it writes the last samples, then goes
        helpers.start("system monitor", plan.monitor, preexec_fn=parent_death_signal(signal.SIGTERM))


def start_report(argv: tuple[str, ...]) -> Optional[subprocess.Popen]:
    """The profiler report's process, started with the job so that its interpreter, matplotlib and
    fonts are loaded before the job ends (`--wait`: it reads what to report from stdin), niced so as
    not to slow the job's start-up; None when it could not start (the report then starts at the end)."""
    try:
        return spawn_helper([*argv, "--wait"], preexec_fn=lambda: os.nice(10), stdin=subprocess.PIPE)
    except OSError as e:
        log(f"the profiler report could not start early: {e}")
        return None


def write_report(argv: tuple[str, ...], since: float, stopping: bool, notes: Sequence[str] = (),
                 timeout_s: float = REPORT_TIMEOUT_S, warm: Optional[subprocess.Popen] = None) -> None:
    """The profiler report over what this job measured (smtrain.profiler.job_report), by the `warm`
    process started with the job where it is still there; bounded, and whatever it does, the job's
    outcome stays as it was. `stopping` (a shutdown signal came: a spot interruption, `docker stop`):
    its tables only, in a fraction of a second, without the plots."""
    given = ["--since", f"{since:.3f}", *(("--no-plots",) if stopping else ()),
             *(a for note in notes for a in ("--note", note))]
    process = warm if warm is not None and warm.poll() is None and _tell(warm, given) else None
    if process is None:
        try:
            process = spawn_helper([*argv, *given])
        except OSError as e:
            log(f"the profiler report could not start: {e}")
            return
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        log(f"the profiler report took more than {timeout_s:g} s and was stopped")


def _tell(warm: subprocess.Popen, given: Sequence[str]) -> bool:
    """Hand the warm report its arguments (one JSON line); whether it took them."""
    try:
        assert warm.stdin is not None
        warm.stdin.write(json.dumps(list(given)).encode() + b"\n")
        warm.stdin.close()
        return True
    except (OSError, ValueError):
        warm.kill()
        warm.wait()
        return False


class HostJob:
    """What a role body works with: the plan, the inherited environment, the signal waker, the job's
    token (it authenticates rank reports) and the helpers started so far."""

    def __init__(self, plan: LaunchPlan, inherited_env: Mapping[str, str], python: str, waker: SignalWaker,
                 token: str) -> None:
        self.plan, self.inherited_env, self.python, self.waker, self.token = plan, inherited_env, python, waker, token
        self.helpers = HelperGroup()
        self.started_at = time.time()  # wall clock: the report reads events from this job only
        self.report_notes: list[str] = []  # for the report's top: hosts whose profiler data is missing (run.master)
        self.report_pids: list[int] = []  # the syncer and the warm profiler report, which outlive the program's end
        self.warm_report: Optional[subprocess.Popen] = None  # started with the helpers (start_report)

    @property
    def spared_pids(self) -> list[int]:
        """The toolkit's own processes, which the program's signals and its end leave alone: the helpers
        and the warm profiler report."""
        return self.helpers.pids + self.report_pids

    def start_helpers(self) -> None:
        """Starts the plan's helpers (feeder, demultiplexers, monitor), then the warm profiler report, once: after
        the program where the program starts first (a single host's), since the report waits for the job's end."""
        start_helpers(self.plan, self.helpers)
        if self.plan.report and self.warm_report is None:
            self.warm_report = start_report(self.plan.report)
            if self.warm_report is not None:
                self.report_pids.append(self.warm_report.pid)

    def rewind_pipes(self) -> Optional[str]:
        """Before a restart in place: the Pipe channels this host serves start again from FIFO 0, as after
        a spot restart - SageMaker's own from its next epoch FIFO (their demultiplexers keep running:
        smtrain.data.demux_restarts), those emulated from files from their first epoch (feeder and
        demultiplexers started again); the rest keeps running. Why not, where a channel could not."""
        plan = self.plan
        kept = [spec for spec in plan.demux if spec.restartable]
        again = [spec for spec in plan.demux if not spec.restartable]
        why_not = restart_kept_demultiplexers(self.helpers, kept, DEMUX_RESTART_WAIT_S) if kept else None
        if plan.feeder or again:
            stop_all(self.helpers.take(("feeder", *(spec.name for spec in again)), exact=True))
            start_pipe_helpers(plan, self.helpers, again)
        import shutil  # a restart's alone

        shutil.rmtree(plan.pipe_state, ignore_errors=True)  # PipeModeDataset's epoch counts: from FIFO 0 again
        return why_not

    def wrote_progress_since(self, since: float) -> bool:
        """Whether this host's program wrote a checkpoint or step events (the step profiler's Keras
        batches) since `since` (wall clock): a sign of progress where its ranks report none."""
        plan = self.plan
        folders = [plan.checkpoint_dir, *([plan.profiler_dir / "framework"] if plan.profiler_dir else [])]
        return any(written_since(folder, since) for folder in folders)

    def ranks_progress_age(self) -> Optional[float]:
        """Seconds since this host's ranks last trained: steps or signs of life in their progress files, or steps in
        their step recorders' open files (scripts that never import smtrain); None where none did. A silent peer
        whose ranks' collectives complete with these is alive (smtrain.wire.liveness)."""
        from ..profiler.events import open_files  # several hosts' alone: a single host's start never loads it

        folder = self.plan.profiler_dir
        return newest_progress_age(open_files(folder) if folder is not None else None)

    def _with_contract(self, env: dict[str, str], token: str, rank: int) -> dict[str, str]:
        coordination = self.plan.coordination
        if coordination is not None and coordination.contract is not None:
            env[RANK_CONTRACT_ENV] = coordination.contract._replace(token=token, rank=rank).to_json()
        return env

    def program_env(self, token: str) -> dict[str, str]:
        """This host's program's environment; with its rank contract where the plan has one (the
        token comes with the job's start; mpirun's environment carries its own)."""
        coordination = self.plan.coordination
        rank = coordination.program_rank if coordination is not None else 0
        return self._with_contract(self.plan.child_env(self.inherited_env), token, rank)

    def start_companions(self, token: str) -> None:
        """What runs beside this host's program once the job started (a parameter server), as helpers:
        they run until the job ends, each with its own rank contract."""
        coordination = self.plan.coordination
        if coordination is None:
            return
        for companion in coordination.companions:
            env = self._with_contract({**self.plan.child_env(self.inherited_env), **companion.env_set}, token,
                                      companion.rank)
            log(f"starting the {companion.name} ({companion.describe})")
            self.helpers.start(companion.name, companion.argv, preexec_fn=parent_death_signal(signal.SIGTERM), env=env)

    def run(self, body: Callable[["HostJob"], JobOutcome]) -> int:
        """The skeleton every role runs: prepare, the role's `body`, everything left ended, the report, the
        outcome rendered; the exit status."""
        at_start = FileState.of(self.plan.failure_file)
        for note in self.plan.notes:
            log(note)
        prepare(self.plan, self.python)
        # Everything the job starts re-parents to `train` when orphaned (orted daemonizes), and is ended here.
        linux.become_subreaper()
        syncer = start_syncer(self.plan.intermediate, self.python)
        self.report_pids = [syncer.pid] if syncer is not None else []
        try:
            with self.helpers:
                outcome = body(self)
        except BaseException:
            if self.warm_report is not None:
                self.warm_report.kill()
                self.warm_report.wait()
            finish_syncer(syncer, STOPPING_WAIT_S, tell=True)
            raise
        finally:
            end_descendants(self.waker, 2.0, self.report_pids)  # whatever the job left behind: nothing outlives train
            keep_checkpoints(self.plan.checkpoint_dir, self.plan.keep_checkpoints_in)
        stopping = self.waker.shutdown_seen is not None
        if self.plan.report:
            write_report(self.plan.report, self.started_at, stopping, self.report_notes, warm=self.warm_report)
        success = "the program succeeded" if self.plan.role is Role.SINGLE else "the job succeeded"
        if outcome.status == 0 and self.plan.role is not Role.WORKER:
            warn_if_no_model(self.plan.model_dir)
        status = render(outcome, self.plan.failure_file, at_start, self.plan.success_file, success, redact)
        finish_syncer(syncer, STOPPING_WAIT_S if stopping else FINISH_WAIT_S, tell=True)  # its last pass: the outcome is out
        return status
