"""One host's part of a job, whatever its distribution kind and role: the skeleton every role runs.

    prepare        folders, code, requirements, the program's checks
    helpers        every helper process in the job's one group, each declared in plan.helper_plan: those that
                   start with the job before the program (the syncer), those with the role's (`start_helpers`:
                   the Pipe helpers, monitor, warm report), a parameter server's companions once the job has its
                   token; those that end with the program stopped on every path
    role body      single: the program under its watchdog (run.single); master: the control server,
                   the workers' hellos, the watchdog, the program, the job's end (run.master);
                   worker: the master's link and this host's part (run.worker). What differs between
                   kinds (MPI, MultiWorkerMirroredStrategy, parameter servers) is in the plan's
                   `Coordination` (plan.coordination): run/ never asks which kind it runs
    finish         anything left running ended; the profiler report (master, single host; also after a
                   failure: run.report); the `JobOutcome` rendered once (run.outcome.render); the helpers
                   that outlive the program ended along the group's one stop path (the syncer's last pass)

What the modules below the job are given is values and functions, never the job: they do not call back up.
"""
from __future__ import annotations

import os
import time
from typing import Callable, Mapping, Optional

from ..common import linux
from ..common.console import log, redact
from ..common.signals import SignalWaker
from ..config.defaults import SYNC_LAST_PASS_S, SYNC_LAST_PASS_STOPPING_S
from ..wire.contract import RANK_CONTRACT_ENV
from ..plan.helper_plan import REPORT, Starts, companion
from ..plan.launch import LaunchPlan, Role
from ..plan.program import check_program
from ..proc.helpers import HelperGroup, stop_all
from ..proc.rank_progress import newest_progress_age
from ..proc.supervise import end_descendants
from .carry import keep_checkpoints, restore_checkpoints, written_since
from .codesetup import fetch_code
from .pip_install import install_requirements
from .outcome import FileState, JobOutcome, render, warn_if_no_model

__all__ = ["HostJob", "prepare"]


def prepare(plan: LaunchPlan, python: str) -> None:
    """Everything before the program can start on this host: folders, code, requirements, checks."""
    for folder in (*plan.folders, *([plan.intermediate.folder] if plan.intermediate else [])):
        folder.mkdir(parents=True, exist_ok=True)  # the syncer sweeps what it finds there from its start
    stale = [path for path in plan.cleared if os.path.lexists(path)]
    if stale:
        import shutil  # here: a host with nothing stale (the usual start) starts its program without it

        for path in stale:
            shutil.rmtree(path, ignore_errors=True)
    if plan.program.fetch_from:
        fetch_code(plan.program.fetch_from, plan.program.program_dir)
    install_requirements(python, plan.requirements)
    check_program(plan.program)
    restore_checkpoints(plan.restore_checkpoints_from, plan.checkpoint_dir)


class HostJob:
    """What a role body works with: the plan, the inherited environment, the signal waker, the job's
    token (it authenticates rank reports) and the job's one group of helper processes (plan.helper_plan)."""

    def __init__(self, plan: LaunchPlan, inherited_env: Mapping[str, str], python: str, waker: SignalWaker,
                 token: str) -> None:
        self.plan, self.inherited_env, self.python, self.waker, self.token = plan, inherited_env, python, waker, token
        self.helpers = HelperGroup()
        self.started_at = time.time()  # wall clock: the report reads events from this job only
        self.report_notes: list[str] = []  # for the report's top: hosts whose profiler data is missing (run.master)
        self._beside_started = False

    @property
    def spared_pids(self) -> list[int]:
        """The toolkit's own processes, which the program's signals and its end leave alone: the helpers."""
        return self.helpers.pids

    def start_helpers(self) -> None:
        """Starts the helpers beside the program (Pipe helpers, monitor, warm report), once: after the program
        where the program starts first (a single host's), since the report waits for the job's end."""
        if not self._beside_started:
            self._beside_started = True
            for spec in self.plan.helper_specs(Starts.WITH_PROGRAM):
                self.helpers.start(spec)

    def rewind_pipes(self) -> Optional[str]:
        """Before a restart in place: this host's Pipe channels from FIFO 0 again (run.pipe_rewind)."""
        from .pipe_rewind import rewind_pipes  # a restart's alone

        return rewind_pipes(self.plan, self.helpers)

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
        for spec in coordination.companions:
            env = self._with_contract({**self.plan.child_env(self.inherited_env), **spec.env_set}, token, spec.rank)
            log(f"starting the {spec.name} ({spec.describe})")
            self.helpers.start(companion(spec, env))

    def run(self, body: Callable[["HostJob"], JobOutcome]) -> int:
        """The skeleton every role runs: prepare, the role's `body`, everything left ended, the report, the
        outcome rendered, the helpers that outlive the program finished; the exit status."""
        plan = self.plan
        at_start = FileState.of(plan.failure_file)
        for note in plan.notes:
            log(note)
        prepare(plan, self.python)
        # Everything the job starts re-parents to `train` when orphaned (orted daemonizes), and is ended here.
        linux.become_subreaper()
        for spec in plan.helper_specs(Starts.WITH_JOB):
            self.helpers.start(spec)
        try:
            with self.helpers:
                outcome = body(self)
        except BaseException:
            self._finish_outliving(stopping=True)
            raise
        finally:
            end_descendants(2.0, self.helpers.pids)  # whatever the job left behind: nothing outlives train
            keep_checkpoints(plan.checkpoint_dir, plan.keep_checkpoints_in)
        stopping = self.waker.shutdown_seen is not None
        report = plan.helper(REPORT)
        if report is not None:
            from .report import write_report  # the job's end: not loaded before the program starts

            write_report(report, self.helpers, self.started_at, stopping, self.report_notes)
        success = "the program succeeded" if plan.role is Role.SINGLE else "the job succeeded"
        if outcome.status == 0 and plan.role is not Role.WORKER:
            warn_if_no_model(plan.model_dir)
        status = render(outcome, plan.failure_file, at_start, plan.success_file, success, redact)
        self._finish_outliving(stopping)  # the syncer's last pass: the outcome is out
        return status

    def _finish_outliving(self, stopping: bool) -> None:
        """The helpers that outlive the program ended along the group's one stop path: SIGTERM (the syncer makes
        its last pass; a report not told what to report goes), SIGKILL once the bound is over (shorter after a
        shutdown signal)."""
        stop_all(self.helpers.outliving(), SYNC_LAST_PASS_STOPPING_S if stopping else SYNC_LAST_PASS_S)
