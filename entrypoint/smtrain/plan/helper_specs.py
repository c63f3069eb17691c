"""Every helper process a host runs beside its program, each declared once here from the plan: what runs and
how it ends (proc.helpers.HelperSpec). run/ starts them all through the job's one HelperGroup:
- `before_program`: as the job starts - the intermediate output's syncer (it sweeps from the first file on);
- `beside_program`: with the role's helpers - the Pipe helpers first (the ranks read what they feed; the
  specs serve a restart in place: run.pipe_rewind starts them again), the system monitor, the warm report;
- a parameter server's companions once the job has its token (`companion`).
A new helper process: its Program (wire.programs), its spec here, its own module."""
from __future__ import annotations

from typing import Mapping, Sequence

from ..proc.helpers import HelperSpec
from ..wire.programs import FEEDER, INTERMEDIATE_SYNC, MONITOR, REPORT
from .coordination import Companion
from .launch import LaunchPlan

__all__ = ["REPORT_NICE", "before_program", "beside_program", "cold_report", "companion", "pipe_helpers"]

REPORT_NICE = 10  # the warm report loads its interpreter, matplotlib and fonts without slowing the job's start-up


def before_program(plan: LaunchPlan, python: str) -> tuple[HelperSpec, ...]:
    """The intermediate output's syncer, where the plan has one: it outlives the program and makes its last pass
    once the outcome is written (run.job: config.defaults.SYNC_LAST_PASS_S); the job goes on without it where it
    cannot start."""
    sync = plan.intermediate
    if sync is None:
        return ()
    return (HelperSpec(INTERMEDIATE_SYNC.name, sync.argv(python), outlives_program=True, parent_death=True,
                       optional=True),)


def pipe_helpers(plan: LaunchPlan) -> tuple[HelperSpec, ...]:
    """The local feeder (emulated Pipe mode) and the demultiplexers."""
    feeder = (HelperSpec(FEEDER.name, plan.feeder),) if plan.feeder else ()
    return feeder + tuple(HelperSpec(spec.name, spec.argv) for spec in plan.demux)


def beside_program(plan: LaunchPlan) -> tuple[HelperSpec, ...]:
    """The Pipe helpers, the system monitor (should `train` be killed, it gets SIGTERM: it writes its last samples,
    then goes) and the warm profiler report (its argv waits for what to report on its stdin; it outlives the
    program, and where it cannot start early, it starts at the end: run.report)."""
    monitor = (HelperSpec(MONITOR.name, plan.monitor, parent_death=True),) if plan.monitor else ()
    report = (HelperSpec(REPORT.name, (*plan.report, "--wait"), outlives_program=True, nice=REPORT_NICE, told=True,
                         optional=True),) if plan.report else ()
    return pipe_helpers(plan) + monitor + report


def cold_report(plan: LaunchPlan, given: Sequence[str]) -> HelperSpec:
    """The profiler report started at the job's end, told what to report (`given`) on its command line: where the
    warm one could not start or is gone."""
    return HelperSpec(REPORT.name, (*plan.report, *given), outlives_program=True, optional=True)


def companion(spec: Companion, env: Mapping[str, str]) -> HelperSpec:
    """What runs beside a host's program once the job started (a parameter server), with its environment `env`."""
    return HelperSpec(spec.name, spec.argv, parent_death=True, env=env)
