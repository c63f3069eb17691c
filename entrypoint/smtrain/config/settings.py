"""Every setting of the toolkit, declared once (`SETTINGS`): its name, the hyperparameter and/or environment
variable that set it (the variable wins where both are given, as for the program: SAGEMAKER_PROGRAM over
sagemaker_program), its type (how a value is read, and what is expected), its default, which jobs read it,
and one line of help. From this table alone come the loading and checking of the settings `train` reads
(`load_settings`: a ConfigError names the setting, what was expected and what was given), the dry-run's
`settings`, `train --help-settings` and the reference's Settings table (docs/reference.md, `markdown_table`; a static test holds
the page to it). A new setting is one row here, read where it is used as `config.settings[ROW]`.

Rows whose `read_by` is not TRAIN are read where they act (the s3:// file system, the image's shell hook, the
distribution's kind ...); `load_settings` checks the value of each that names one variable of a type other than
text when `train` starts, so that a bad one ends the job before anything starts, not silently where it acts."""
from __future__ import annotations

from typing import Any, Callable, Generic, Iterator, Mapping, NamedTuple, Optional, Sequence, TypeVar, Union

from ..errors import ConfigError
from ..wire.profiler_settings import DEFAULT_MIN_FREE_MB
from .defaults import HEARTBEAT_S
from .setting_types import (ABSOLUTE_PATH, CHOICE_0_1, PORT, SWITCH, TEXT, Choice, Seconds, SecondsList, SettingContext,
                            SettingType, StepWindow, WholeNumber)

__all__ = [
    "CHECKPOINT_DIR", "CODEARTIFACT", "CONTROL_PORT", "CURRENT_HOST", "DETAILED_PROFILING", "DISTRIBUTION_GROUPS",
    "FRAMEWORK_METRICS", "GRACE_PERIOD", "HEARTBEAT_TIMEOUT", "HOSTS", "INTERMEDIATE_RETRY", "LIVE_INTERVAL",
    "LIVE_METRICS", "MAX_RESTARTS", "MIN_FREE_MB", "MONITOR", "MONITOR_INTERVAL", "MPI_ENABLED", "MPI_NUM_PROCESSES",
    "MPI_OPTIONS",
    "MPI_PROCESSES_PER_HOST", "MULTI_WORKER_MIRRORED", "NATIVE_PIPES", "NETWORK_INTERFACE", "NUM_CPUS", "NUM_GPUS",
    "PARAMETER_SERVER", "PEER_WAIT", "PIPE_DEALING", "PIPE_EMULATION", "PIPE_RECORD_FORMAT", "PYTHON_PROFILING",
    "S3_OUTPUT", "SETTINGS", "SKIP_TEARDOWN", "SSHD_CONFIG", "SSHD_PORT", "STALL_TIMEOUT", "STRAGGLER_WINDOW", "TRAIN",
    "WARM_POOL_CACHE", "Setting", "Settings", "help_text", "load_settings", "markdown_table",
]

T = TypeVar("T")
TRAIN = "train"  # read_by: loaded and checked when `train` reads its config


Default = Union[T, Callable[[SettingContext], T]]


class Setting(NamedTuple, Generic[T]):
    """One setting (see the module's docstring). `default` may be a function of the job (SettingContext);
    `default_text` is how the reference shows it where it is not the value itself. (A NamedTuple, not a
    dataclass: dataclasses loads inspect, 5 ms of every `train`'s start.)"""

    name: str
    hyperparameter: Optional[str]
    variable: Optional[str]
    type: SettingType
    default: Any
    help: str
    jobs: str = "every job"
    default_text: str = ""
    read_by: str = TRAIN

    def default_for(self, context: SettingContext) -> T:
        """The default for this job."""
        return self.default(context) if callable(self.default) else self.default

    def names(self) -> str:
        """How an error names it."""
        if self.hyperparameter and self.variable:
            return f"{self.hyperparameter} (or {self.variable})"
        return self.hyperparameter or f"environment variable {self.variable}"

    def raw(self, decoded: Mapping[str, Any], environ: Mapping[str, str]) -> Any:
        """The value given for it (the variable, else the hyperparameter), None where none is."""
        if self.variable and self.variable in environ:
            return environ[self.variable]
        return decoded.get(self.hyperparameter) if self.hyperparameter else None


S3_PLUGIN = "the s3:// file system (native/s3/)"
S3_PART = WholeNumber("bytes", (5 << 20, 5 << 30), "a whole number of bytes from 5242880 to 5368709120 (S3's part sizes)")

INTERMEDIATE_RETRY = Setting("intermediate_retry_s", None, "SMTRAIN_INTERMEDIATE_RETRY_S", SecondsList(), (1.0, 3.0, 9.0),
                             "the waits (seconds, comma-separated) between an intermediate file's upload attempts",
                             "SageMaker jobs", default_text="`1,3,9`",
                             read_by="the intermediate output's syncer (smtrain.sync.intermediate_output)")
GRACE_PERIOD = Setting("grace_period_s", "sagemaker_grace_period_seconds", "SM_GRACE_PERIOD_SECONDS", Seconds(), 110.0,
                       "from SIGTERM to SIGKILL of the program (SageMaker kills 120 s after SIGTERM)")
PEER_WAIT = Setting("peer_wait_s", "sagemaker_peer_wait_seconds", "SM_PEER_WAIT_SECONDS", Seconds(),
                    lambda context: 240.0 + 5.0 * context.num_hosts,
                    "how long the master waits for the workers, and they for it", "several hosts", "240 + 5 a host")
HEARTBEAT_TIMEOUT = Setting("heartbeat_timeout_s", "sagemaker_heartbeat_timeout_seconds", "SM_HEARTBEAT_TIMEOUT_SECONDS",
                            Seconds(3 * HEARTBEAT_S, why=f"heartbeats go every {HEARTBEAT_S:g} s"), 10.0,
                            "silence after which a host counts as lost", "several hosts")
STALL_TIMEOUT = Setting("stall_timeout_s", "sagemaker_stall_timeout_seconds", "SM_STALL_TIMEOUT_SECONDS", Seconds(),
                        1800.0, "the stall watchdog: how long the ranks may make no progress; 0 switches it off")
MAX_RESTARTS = Setting("max_restarts", "sagemaker_max_restarts", "SMTRAIN_MAX_RESTARTS", WholeNumber(), 0,
                       "restarts in place after a transient failure")
CONTROL_PORT = Setting("control_port", None, "SM_CONTROL_PORT", PORT, 7077, "the master's control port", "several hosts")
SSHD_CONFIG = Setting("sshd_config", None, "SMTRAIN_SSHD_CONFIG", ABSOLUTE_PATH, "/etc/ssh/sshd_config",
                      "the sshd configuration the workers start (their keys are the job's own)", "MPI on several hosts")
SSHD_PORT = Setting("sshd_port", None, "SMTRAIN_SSHD_PORT", PORT, 22, "the port the workers' sshd listens on",
                    "MPI on several hosts")
MONITOR = Setting("system_monitor", "sagemaker_system_monitor", "SM_SYSTEM_MONITOR", SWITCH, True,
                  "the system monitor (CPU, memory, I/O, network, GPUs) and its report")
MONITOR_INTERVAL = Setting("system_monitor_interval_ms", "sagemaker_system_monitor_interval_ms",
                           "SM_SYSTEM_MONITOR_INTERVAL_MS", Seconds(10.0, "milliseconds"),
                           lambda context: context.profiler_interval_ms or 500.0,
                           "the system monitor's sampling interval", default_text="500, or profilerconfig.json's")
FRAMEWORK_METRICS = Setting("framework_metrics", "sagemaker_framework_metrics", "SM_FRAMEWORK_METRICS", SWITCH,
                            lambda context: context.steps_profiled, "every rank's step events",
                            default_text="on, unless profilerconfig.json disables the profiler")
DETAILED_PROFILING = Setting("detailed_profiling", "sagemaker_detailed_profiling", "SM_DETAILED_PROFILING",
                             StepWindow(), lambda context: context.detailed_window,
                             "a TensorFlow profiler trace of those training steps",
                             default_text="off, or profilerconfig.json's")
PYTHON_PROFILING = Setting("python_profiling", "sagemaker_python_profiling", "SM_PYTHON_PROFILING", StepWindow(),
                           lambda context: context.python_window, "cProfile of those training steps",
                           default_text="off, or profilerconfig.json's")
LIVE_METRICS = Setting("live_metrics", "sagemaker_live_metrics", "SMTRAIN_LIVE_METRICS", SWITCH, True,
                       "while the job runs: every host's and rank's metrics as TensorBoard scalars, and a rank the "
                       "others wait for named in the log (needs the system monitor)")
LIVE_INTERVAL = Setting("live_metrics_interval_s", "sagemaker_live_metrics_interval_seconds",
                        "SMTRAIN_LIVE_METRICS_INTERVAL_S", Seconds(0.5), 5.0, "how often each host's live metrics are "
                        "written and its ranks' steps sent to the master")
STRAGGLER_WINDOW = Setting("straggler_window_s", "sagemaker_straggler_window_seconds", "SMTRAIN_STRAGGLER_WINDOW_S",
                           Seconds(), 60.0, "the live straggler verdict judges each rank's training steps of this "
                           "many seconds, and says a verdict once it held for a quarter of it", "several ranks")
MIN_FREE_MB = Setting("profiler_min_free_mb", "sagemaker_profiler_min_free_mb", "SM_PROFILER_MIN_FREE_MB",
                      WholeNumber("MiB"), DEFAULT_MIN_FREE_MB, "the free space (MiB) step events never take")
PIPE_DEALING = Setting("pipe_dealing", "sagemaker_pipe_dealing", "SMTRAIN_PIPE_DEALING", Choice("job", "host"), "job",
                       "a FullyReplicated Pipe channel of an MPI job on several hosts: job - each record reaches one rank "
                       "of the job an epoch; host - every host's ranks share the whole channel", "Pipe mode")
SKIP_TEARDOWN = Setting("skip_teardown_on_failure", None, "SM_SKIP_TEARDOWN_ON_FAILURE", CHOICE_0_1,
                        lambda context: "", "1: a program dying of an uncaught exception skips the interpreter's "
                        "teardown (its threads and atexit handlers still run); 0 keeps it",
                        default_text="1 where restarts are asked for", read_by="the program's start-up hook")

MPI_ENABLED = Setting("mpi_enabled", "sagemaker_mpi_enabled", None, TEXT, "",
                      "true: the program runs under mpirun (what the SDK's distribution={'mpi': ...} writes)", "MPI",
                      read_by="the MPI kind (smtrain.plan.kinds.mpi)")
MPI_PROCESSES_PER_HOST = Setting("mpi_processes_per_host", "sagemaker_mpi_num_of_processes_per_host", None, TEXT, "",
                                 "ranks on each host", "MPI", "the host's GPUs, else 1", read_by="config.load")
MPI_NUM_PROCESSES = Setting("mpi_num_processes", "sagemaker_mpi_num_processes", None, TEXT, "",
                            "ranks in all", "MPI", "hosts x ranks on each", read_by="config.load")
MPI_OPTIONS = Setting("mpi_options", "sagemaker_mpi_custom_mpi_options", None, TEXT, "",
                      "more mpirun options (shell rules), replacing the defaults they contradict (see MPI, NCCL and EFA)",
                      "MPI", read_by="config.load and smtrain.plan.mpirun_command")
MULTI_WORKER_MIRRORED = Setting("multi_worker_mirrored_strategy", "sagemaker_multi_worker_mirrored_strategy_enabled",
                                None, TEXT, "", "true: TensorFlow's MultiWorkerMirroredStrategy (the SDK's distribution=)",
                                "TF strategies", read_by="the strategy kinds (smtrain.plan.kinds)")
PARAMETER_SERVER = Setting("parameter_server", "sagemaker_parameter_server_enabled", None, TEXT, "",
                           "true: TensorFlow's parameter servers (the SDK's distribution=)", "TF strategies",
                           read_by="the strategy kinds (smtrain.plan.kinds)")
DISTRIBUTION_GROUPS = Setting("distribution_instance_groups", "sagemaker_distribution_instance_groups", None, TEXT, "",
                              "the instance groups that run the distribution (a JSON list, as the SDK writes it); the "
                              "others' hosts run the program on their own", "heterogeneous clusters",
                              "the current instance group", read_by="config.load and plan.shape")
PIPE_RECORD_FORMAT = Setting("pipe_record_format", "sagemaker_pipe_record_format", None, TEXT, "",
                             "tfrecord, recordio, lines, or {\"channel\": \"format\"}", "Pipe mode",
                             "RecordIO where SageMaker wraps the records, else from ContentType", read_by="config.channels")
PIPE_EMULATION = Setting("pipe_emulation", "sagemaker_pipe_emulation", "SM_PIPE_EMULATION", TEXT, "auto",
                         "File channels streamed as Pipe mode: auto (in SDK local mode), on, off, or channel names",
                         "Pipe mode", read_by="plan.localmode")
S3_OUTPUT = Setting("s3_output", "sagemaker_s3_output", None, TEXT, "",
                    "where output/intermediate is synced while the job runs (s3://..., as sagemaker-training)",
                    "SageMaker jobs", read_by="plan.intermediate")
CODEARTIFACT = Setting("codeartifact", None, "CA_REPOSITORY_ARN", TEXT, "",
                       "an AWS CodeArtifact repository's ARN: requirements are installed from it", "with requirements",
                       read_by="plan.requirements")
WARM_POOL_CACHE = Setting("warm_pool_cache", None, "SAGEMAKER_MANAGED_WARMPOOL_CACHE_DIRECTORY", TEXT, "",
                          "set by SageMaker on a warm pool: the requirements' wheels are kept there for its next jobs",
                          "with requirements", read_by="plan.requirements")
CHECKPOINT_DIR = Setting("checkpoint_dir", None, "SM_CHECKPOINT_DIR", TEXT, "/opt/ml/checkpoints",
                         "the checkpoint folder when checkpointconfig.json names none (the program gets the folder here)",
                         read_by="config.load")
CURRENT_HOST = Setting("current_host", None, "SM_CURRENT_HOST", TEXT, "", "stands in for resourceconfig.json's "
                       "current_host (the program and its ranks get their own host here)", default_text="from the config",
                       read_by="config.load")
HOSTS = Setting("hosts", None, "SM_HOSTS", TEXT, "", "a JSON list: stands in for resourceconfig.json's hosts",
                default_text="from the config", read_by="config.load")
NETWORK_INTERFACE = Setting("network_interface_name", None, "SM_NETWORK_INTERFACE_NAME", TEXT, "",
                            "stands in for resourceconfig.json's network_interface_name", default_text="from the config",
                            read_by="config.load")
NUM_CPUS = Setting("num_cpus", None, "SM_NUM_CPUS", WholeNumber("CPUs"), 0, "stands in for the CPUs counted",
                   default_text="the host's", read_by="config.hostfacts")
NUM_GPUS = Setting("num_gpus", None, "SM_NUM_GPUS", WholeNumber("GPUs"), 0, "stands in for the GPUs counted (the "
                   "program and its ranks get the count here)", default_text="the host's", read_by="config.hostfacts")
NATIVE_PIPES = Setting("native_pipes", None, "SMTRAIN_NATIVE_PIPES", CHOICE_0_1, "1",
                       "0: read Pipe mode through Python instead of the native op", "Pipe mode",
                       read_by="smtrain.data.native")

SETTINGS: tuple[Setting[Any], ...] = (
    GRACE_PERIOD, PEER_WAIT, HEARTBEAT_TIMEOUT, STALL_TIMEOUT, MAX_RESTARTS, SKIP_TEARDOWN,
    MPI_ENABLED, MPI_PROCESSES_PER_HOST, MPI_NUM_PROCESSES, MPI_OPTIONS, MULTI_WORKER_MIRRORED, PARAMETER_SERVER,
    DISTRIBUTION_GROUPS, PIPE_RECORD_FORMAT, PIPE_EMULATION, PIPE_DEALING,
    MONITOR, MONITOR_INTERVAL, LIVE_METRICS, LIVE_INTERVAL, STRAGGLER_WINDOW, FRAMEWORK_METRICS, DETAILED_PROFILING, PYTHON_PROFILING, MIN_FREE_MB,
    S3_OUTPUT, INTERMEDIATE_RETRY, CODEARTIFACT, WARM_POOL_CACHE, CHECKPOINT_DIR,
    CURRENT_HOST, HOSTS, NETWORK_INTERFACE, NUM_CPUS, NUM_GPUS,
    CONTROL_PORT, SSHD_CONFIG, SSHD_PORT,
    Setting("modeltrainer_drivers", None, "SMTRAIN_MODELTRAINER_DRIVERS", Choice("train", "sdk"), "train",
            "sdk: SDK v3's own drivers run instead of train", "ModelTrainer jobs", read_by="the image's shell hook (docker/modeltrainer-hook.sh)"),
    Setting("s3_filesystem", None, "SMTRAIN_S3_FILESYSTEM", Choice("on", "off"), "on",
            "the s3:// file system (off: leave s3:// to another plugin)", read_by=S3_PLUGIN),
    Setting("s3_readahead_bytes", None, "SMTRAIN_S3_READAHEAD_BYTES", WholeNumber("bytes", (64 << 10, 1 << 40),
            "a whole number of bytes >= 65536"), 8 << 20, "how much of an object one read fetches ahead",
            default_text="8388608 (8 MiB)", read_by=S3_PLUGIN),
    Setting("s3_multipart_threshold_bytes", None, "SMTRAIN_S3_MULTIPART_THRESHOLD_BYTES", S3_PART, 32 << 20,
            "a file written larger than this is uploaded in parts", default_text="33554432 (32 MiB)", read_by=S3_PLUGIN),
    Setting("s3_part_bytes", None, "SMTRAIN_S3_PART_BYTES", S3_PART, 8 << 20, "the size of each uploaded part",
            default_text="8388608 (8 MiB)", read_by=S3_PLUGIN),
    Setting("s3_uploads_in_flight", None, "SMTRAIN_S3_UPLOADS_IN_FLIGHT", WholeNumber("parts", (1, 1024),
            "a whole number 1-1024"), 8, "parts of one file uploaded at once", read_by=S3_PLUGIN),
    NATIVE_PIPES,
)


class Settings(Mapping[str, Any]):
    """The settings `train` read, by name (a row, or its name, as the key)."""

    def __init__(self, values: Mapping[str, Any]) -> None:
        self._values = dict(values)

    def __getitem__(self, key: Union[str, Setting[Any]]) -> Any:
        return self._values[key.name if isinstance(key, Setting) else key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._values)

    def __len__(self) -> int:
        return len(self._values)

    def to_json(self) -> dict[str, Any]:
        """As `train --dry-run` shows them."""
        return {name: value._asdict() if hasattr(value, "_asdict") else value for name, value in self._values.items()}


def load_settings(decoded: Mapping[str, Any], environ: Mapping[str, str], context: SettingContext, where: str,
                  table: Sequence[Setting[Any]] = SETTINGS) -> Settings:
    """Every TRAIN row of `table`: the value given, else its default; ConfigError at `where` (the hyperparameters'
    file) naming the first that is not what its type expects."""
    values = {}
    for setting in table:
        loaded = setting.read_by == TRAIN
        if not loaded and setting.type is TEXT:
            continue  # read, and checked, where it acts
        raw = setting.raw(decoded, environ)
        if raw is None:
            if loaded:
                values[setting.name] = setting.default_for(context)
            continue
        try:
            value = setting.type.parse(raw)
        except ValueError as e:
            place = f"{where}: " if setting.hyperparameter else ""  # a variable alone: its name says where
            raise ConfigError(f"{place}{setting.names()} must be {e}, got {raw!r}") from None
        if loaded:
            values[setting.name] = value
    return Settings(values)


def _given_by(setting: Setting[Any]) -> str:
    """`hyperparameter` / `VARIABLE`."""
    return " / ".join(f"`{name}`" for name in (setting.hyperparameter, setting.variable) if name)


def _default_shown(setting: Setting[Any]) -> str:
    if setting.default_text:
        return setting.default_text
    value = setting.default
    if isinstance(value, bool):
        return "on" if value else "off"
    if isinstance(value, float):
        return f"{value:g}"
    if value in ("", None):
        return ""
    return f"`{value}`" if isinstance(value, str) else str(value)


def markdown_table(table: Sequence[Setting[Any]] = SETTINGS) -> str:
    """The reference's Settings table (docs/reference.md)."""
    rows = ["| hyperparameter / variable | type | default | jobs | meaning |", "| --- | --- | --- | --- | --- |"]
    rows += [f"| {_given_by(s)} | {s.type.shown} | {_default_shown(s)} | {s.jobs} | {s.help} |" for s in table]
    return "\n".join(rows) + "\n"


def help_text(table: Sequence[Setting[Any]] = SETTINGS) -> str:
    """What `train --help-settings` prints: each setting, how it is given, its default and what it does."""
    lines = []
    for s in table:
        default = _default_shown(s).replace("`", "") or "-"
        lines.append(f"{_given_by(s).replace('`', '')}\n    {s.help}\n    {s.type.expected}; default {default}; "
                     f"{s.jobs}; read by {s.read_by}")
    return "\n".join(lines) + "\n"
