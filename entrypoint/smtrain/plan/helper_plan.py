"""Every helper process a host runs beside its program, each declared once in `HELPERS`: its program (the name
the log gives it, the module `python -m` runs, who starts it), when it starts, how it ends, and how its command
is planned from the job's inputs. The plan holds what this host runs (`LaunchPlan.helpers`); run/ starts each
`Starts` group through the job's one HelperGroup (run.job) without naming one, except where a helper is also
asked something: the warm report told what to report (run.report), the Pipe helpers at a restart in place
(run.pipe_rewind). A parameter server's companions are the kind's (plan.coordination): `companion`.

A new helper process: one row here (its `Declared` and the function that plans its command), and its own
module; tests/static/test_run_skeleton.py holds the rest of the product to it."""
from __future__ import annotations

import enum
from pathlib import Path
from typing import Callable, Mapping, NamedTuple, Optional, Sequence

from ..config.model import TrainingConfig
from ..config.settings import LIVE_INTERVAL, LIVE_METRICS
from ..proc.helpers import HelperSpec
from ..wire.programs import Program
from .coordination import Companion, Coordination
from .fifo_plan import DemuxSpec
from .intermediate import IntermediateSync
from .localmode import feeder_args
from .shape import Role

__all__ = ["DEMUX", "FEEDER", "HELPERS", "INTERMEDIATE_SYNC", "MONITOR", "REPORT", "REPORT_NICE", "Declared",
           "HelperInputs", "Planned", "Starts", "cold_report", "companion", "plan_helpers", "profiler_folder"]

REPORT_NICE = 10  # the warm report loads its interpreter, matplotlib and fonts without slowing the job's start-up


class Starts(enum.Enum):
    """When the job starts a helper."""
    WITH_JOB = "as the job starts, before the program (it sees the job's first file)"
    WITH_PROGRAM = "with the role's helpers, beside the program"


class HelperInputs(NamedTuple):
    """What this host's helpers are planned from (plan.launch hands it over)."""
    config: TrainingConfig
    python: str
    role: Role
    gpus: int
    coordination: Optional[Coordination]
    demux: tuple[DemuxSpec, ...]  # this host's demultiplexers (plan.fifo_plan)
    emulated: tuple[str, ...]  # File channels streamed as Pipe mode (plan.localmode)
    intermediate: Optional[IntermediateSync]  # output/intermediate synced to S3 (plan.intermediate)
    timeline: Optional[Path]  # Horovod's timeline, for the report


class Planned(NamedTuple):
    """One helper this host runs: which declaration it comes from, when it starts, what runs."""
    program: Program
    starts: Starts
    spec: HelperSpec

    def to_json(self) -> dict[str, object]:
        return {"name": self.spec.name, "starts": self.starts.name.lower(), "argv": list(self.spec.argv)}


class Declared(NamedTuple):
    """A helper process, declared: its program, when it starts, how it ends, and its commands on this host
    (`plan`: name and argument pairs, none where it does not run here)."""
    program: Program
    starts: Starts
    plan: Callable[[HelperInputs], tuple[tuple[str, tuple[str, ...]], ...]]
    outlives_program: bool = False  # left running when the program ends; the job ends it after its outcome
    parent_death: bool = False  # SIGTERM should `train` die, however it dies
    nice: int = 0
    told: bool = False  # its stdin a pipe: told later what to do
    optional: bool = False  # where it cannot start, the job goes on without it (said in the log)

    def planned(self, given: HelperInputs) -> tuple[Planned, ...]:
        return tuple(Planned(self.program, self.starts, HelperSpec(
            name, self.program.argv(given.python, *args), outlives_program=self.outlives_program,
            parent_death=self.parent_death, nice=self.nice, told=self.told, optional=self.optional))
            for name, args in self.plan(given))


def profiler_folder(config: TrainingConfig) -> Optional[Path]:
    """This host's profiler folder, when the system monitor or step metrics are on."""
    if config.monitor_interval_ms is None and not config.profiling.steps:
        return None
    return config.paths.output_dir / "profiler"


def _syncer(given: HelperInputs) -> tuple[tuple[str, tuple[str, ...]], ...]:
    sync = given.intermediate
    return ((INTERMEDIATE_SYNC.name, sync.args),) if sync is not None else ()


def _feeder(given: HelperInputs) -> tuple[tuple[str, tuple[str, ...]], ...]:
    return ((FEEDER.name, feeder_args(given.config, given.emulated)),) if given.emulated else ()


def _demultiplexers(given: HelperInputs) -> tuple[tuple[str, tuple[str, ...]], ...]:
    return tuple((spec.name, spec.args) for spec in given.demux)


def _monitor(given: HelperInputs) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """Told this host's GPUs (none: it does not load NVML); with the live metrics, where it writes the TensorBoard
    scalars (the job's TensorBoard folder, else the profiler's) and, in a job the master's control server watches,
    where it sends the ranks' steps (smtrain.profiler.live)."""
    config = given.config
    profiler = profiler_folder(config)
    if config.monitor_interval_ms is None or profiler is None:
        return ()
    live: tuple[str, ...] = ()
    if config.settings[LIVE_METRICS]:
        live = ("--tensorboard", str(config.tensorboard_dir or profiler / "tensorboard"),
                "--live-s", f"{config.settings[LIVE_INTERVAL]:g}")
        coordination = given.coordination
        if coordination is not None:
            master = coordination.master if coordination.workers else "127.0.0.1"
            live += ("--control", f"{master}:{coordination.control_port}")
    return ((MONITOR.name, ("--out", str(profiler), "--host", config.resources.current_host, "--interval-ms",
                            f"{config.monitor_interval_ms:g}", "--gpus", str(given.gpus), *live)),)


def _report(given: HelperInputs) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """`train report` over this host's profiler folder into output/data (SageMaker packs it into output.tar.gz),
    with Horovod's timeline where the ranks write one; on the master or a host alone. Started with the job, it
    waits (`--wait`) to be told the rest (`--since`, the job's start) at the end: run.report."""
    config, timeline = given.config, given.timeline
    folder = profiler_folder(config)
    if folder is None or given.role not in (Role.SINGLE, Role.MASTER):
        return ()
    return ((REPORT.name, (str(folder), "--out", str(config.paths.output_data_dir / "profiler-report"), "--job",
                           *(("--horovod-timeline", str(timeline)) if timeline else ()), "--wait")),)


# Each row's program; its name is the helper's in the log (a demultiplexer's adds its channel).
INTERMEDIATE_SYNC = Program("intermediate output syncer", "smtrain.sync.intermediate_output",
                            "train on every host, where the job names an S3 output for its intermediate files")
FEEDER = Program("feeder", "smtrain.data.feeder", "train in local mode: File channels streamed as Pipe mode")
DEMUX = Program("demultiplexer", "smtrain.data.demux", "train, beside the ranks: one channel's FIFO dealt to its ranks")
MONITOR = Program("system monitor", "smtrain.profiler.monitor", "train on every host, for the whole job")
REPORT = Program("profiler report", "smtrain.profiler.job_report",
                 "train on the master (or alone) at the job's start; it writes the report at the end")

HELPERS: tuple[Declared, ...] = (
    # it sweeps from the first file on, makes its last pass once the outcome is written (run.job:
    # config.defaults.SYNC_LAST_PASS_S); the job goes on without it where it cannot start
    Declared(INTERMEDIATE_SYNC, Starts.WITH_JOB, _syncer, outlives_program=True, parent_death=True, optional=True),
    # the Pipe helpers first: the ranks read what they feed (run.pipe_rewind starts them again for a restart)
    Declared(FEEDER, Starts.WITH_PROGRAM, _feeder),
    Declared(DEMUX, Starts.WITH_PROGRAM, _demultiplexers),
    # should `train` be killed, it gets SIGTERM: it writes its last samples, then goes
    Declared(MONITOR, Starts.WITH_PROGRAM, _monitor, parent_death=True),
    # warm: its interpreter, matplotlib and fonts load while the job runs; where it cannot start early, it
    # starts at the end (cold_report)
    Declared(REPORT, Starts.WITH_PROGRAM, _report, outlives_program=True, nice=REPORT_NICE, told=True,
             optional=True),
)


def plan_helpers(given: HelperInputs) -> tuple[Planned, ...]:
    """The helpers this host runs, in the order they start."""
    return tuple(planned for declared in HELPERS for planned in declared.planned(given))


def cold_report(warm: HelperSpec, given: Sequence[str]) -> HelperSpec:
    """The profiler report started at the job's end, told what to report (`given`) on its command line: where the
    warm one (`warm`, its spec) could not start or is gone."""
    argv = tuple(a for a in warm.argv if a != "--wait")
    return warm._replace(argv=(*argv, *given), told=False, nice=0)


def companion(spec: Companion, env: Mapping[str, str]) -> HelperSpec:
    """What runs beside a host's program once the job started (a parameter server), with its environment `env`."""
    return HelperSpec(spec.name, spec.argv, parent_death=True, env=env)
