"""The typed values that configuration hands to planning: one immutable `TrainingConfig` per job,
and the facts about this host and the code that are gathered once at the edge."""
from __future__ import annotations

import enum
from pathlib import Path
from typing import Any, Mapping, NamedTuple, Optional

from . import hyperparameters as hps
from ..wire.record_format import RecordFormat
from .profiling import Profiling, profiling_from
from .settings import MONITOR, MONITOR_INTERVAL, Settings

__all__ = [
    "Channel", "CodeFacts", "HostFacts", "InputMode", "InstanceGroup", "ModelTrainerJob", "MpiSettings", "NetworkFacts",
    "Paths",
    "ProgramSpec", "Resources", "TrainingConfig",
]


class InputMode(enum.Enum):
    """A channel's input mode, as inputdataconfig.json's TrainingInputMode names it."""
    FILE = "File"
    PIPE = "Pipe"
    FASTFILE = "FastFile"


class Paths(NamedTuple):
    """The job's folders under the base folder (/opt/ml, or $SAGEMAKER_BASE_DIR)."""
    base: Path

    @property
    def input_dir(self) -> Path:
        """input/: the config files and the channels"""
        return self.base / "input"

    @property
    def input_config_dir(self) -> Path:
        """input/config/: SageMaker's JSON files"""
        return self.base / "input" / "config"

    @property
    def input_data_dir(self) -> Path:
        """input/data/: a folder (File) or FIFOs (Pipe) per channel"""
        return self.base / "input" / "data"

    @property
    def model_dir(self) -> Path:
        """model/: what SageMaker packs into model.tar.gz"""
        return self.base / "model"

    @property
    def code_dir(self) -> Path:
        """code/: the program, unpacked where it came as a tarball"""
        return self.base / "code"

    @property
    def output_dir(self) -> Path:
        """output/"""
        return self.base / "output"

    @property
    def output_data_dir(self) -> Path:
        """output/data/: what SageMaker packs into output.tar.gz"""
        return self.base / "output" / "data"

    @property
    def output_intermediate_dir(self) -> Path:
        """output/intermediate/: uploaded while the job runs"""
        return self.base / "output" / "intermediate"

    @property
    def failure_file(self) -> Path:
        """output/failure: the failure reason SageMaker shows"""
        return self.base / "output" / "failure"

    @property
    def success_file(self) -> Path:
        """output/success: left by a job that succeeded"""
        return self.base / "output" / "success"

    def config_file(self, name: str) -> Path:
        """input/config/`name`."""
        return self.input_config_dir / name


class Channel(NamedTuple):
    """One input channel of inputdataconfig.json, with its Pipe-mode record format."""
    name: str
    mode: InputMode
    content_type: Optional[str]
    s3_distribution_type: Optional[str]
    shuffle_seed: Optional[int]
    record_format: RecordFormat  # how Pipe-mode data is framed


class InstanceGroup(NamedTuple):
    """One instance group of a heterogeneous cluster (resourceconfig.json)."""
    name: str
    instance_type: Optional[str]
    hosts: tuple[str, ...]


class Resources(NamedTuple):
    """resourceconfig.json's facts, with the SM_* stand-ins a local user may set."""
    current_host: str
    hosts: tuple[str, ...]
    network_interface_name: Optional[str]  # None when the file does not say
    current_instance_type: str
    current_group_name: str
    instance_groups: tuple[InstanceGroup, ...]


class MpiSettings(NamedTuple):
    """MPI's settings, as the SDK's `distribution={"mpi": ...}` (its `sagemaker_mpi_*` hyperparameters) or
    ModelTrainer's `MPI(...)` give them; whether MPI runs is its kind's business (plan.kinds.mpi)."""
    processes_per_host: Optional[int]  # None: one per GPU, else 1
    num_processes: Optional[int]
    custom_options: tuple[str, ...]


class ProgramSpec(NamedTuple):
    """Which program to run and where its code comes from."""
    entry_point: str  # as given: SAGEMAKER_PROGRAM or sagemaker_program (a command line if shell_command)
    submit_dir: str  # as given (SM_MODULE_DIR); the local folder is `local_dir`
    local_dir: Optional[Path]  # None for an s3:// submit directory
    shell_command: bool = False  # ModelTrainer's SourceCode(command=...): run by bash, no arguments added


class ModelTrainerJob(NamedTuple):
    """What SDK v3's ModelTrainer driver files ask for: the program and MPI, and the files as written."""
    program: Optional[ProgramSpec]  # None: SourceCode(command="train"), the program then from sagemaker_* hyperparameters
    mpi: Optional[MpiSettings]  # distributed=MPI(...); None without `distributed`
    source: Mapping[str, Any]  # sourcecode.json: SourceCode's fields (entry_script, requirements, ...)
    distributed: Mapping[str, Any]  # distributed.json; {} without `distributed`
    requirements: Optional[str] = None  # SourceCode(requirements=...): the file v3 installs (none without it)


class TrainingConfig(NamedTuple):
    """Every input of the job, read and checked once (config files, variables, ModelTrainer's files)."""
    paths: Paths
    resources: Resources
    channels: tuple[Channel, ...]
    hyperparameters: Mapping[str, Any]  # decoded, all of them
    hyperparameters_as_written: Mapping[str, Any]  # hyperparameters.json's content (SDK v3's drivers decode it their way)
    resource_config: Mapping[str, Any]  # the file's content, for SM_RESOURCE_CONFIG
    input_data_config: Mapping[str, Any]  # the file's content, for SM_INPUT_DATA_CONFIG
    program: Optional[ProgramSpec]
    mpi: MpiSettings  # the `sagemaker_mpi_*` hyperparameters' settings
    model_trainer_mpi: Optional[MpiSettings]  # SDK v3 ModelTrainer's distributed=MPI(...), which asks for MPI
    model_trainer: Optional[ModelTrainerJob]  # what SDK v3's ModelTrainer wrote (its driver files), if it started the job
    checkpoint_dir: Path
    tensorboard_dir: Optional[Path]  # tensorboardoutputconfig.json LocalPath (SageMaker uploads it to S3)
    settings: Settings  # every setting `train` reads, by its declaration: config.settings[GRACE_PERIOD] ...
    environ: Mapping[str, str]  # the environment `train` was started with

    @property
    def monitor_interval_ms(self) -> Optional[float]:
        """The system monitor's sampling interval; None where it is switched off."""
        return self.settings[MONITOR_INTERVAL] if self.settings[MONITOR] else None

    @property
    def profiling(self) -> Profiling:
        """Step metrics and the detailed / Python profiling windows (config.profiling)."""
        return profiling_from(self.settings)

    @property
    def user_hyperparameters(self) -> dict[str, Any]:
        """The hyperparameters that become the program's arguments (config.hyperparameters)."""
        return hps.user_hyperparameters(self.hyperparameters)

    @property
    def framework_parameters(self) -> dict[str, Any]:
        """`sagemaker_*` hyperparameters other than the fixed toolkit names (SM_FRAMEWORK_PARAMS)."""
        return hps.framework_parameters(self.hyperparameters)


class NetworkFacts(NamedTuple):
    """This host's network interfaces, whether an EFA device is present, and whether the image has
    NCCL's network plugin for it (aws-ofi-nccl's libnccl-net.so on the library path)."""
    interfaces: tuple[str, ...]
    default_route_interface: Optional[str]
    efa_present: bool
    nccl_net_plugin: bool = False


class CodeFacts(NamedTuple):
    """What the file system says about the program's code, read once before planning."""

    submit_is_file: bool  # the submit directory is a tarball on this host
    has_requirements: bool  # a requirements.txt lies beside a local program


class HostFacts(NamedTuple):
    """What this host has (CPUs, GPUs, network) and what the code folder holds, measured once."""
    num_cpus: int
    num_gpus: int
    num_neurons: int
    smddprun_installed: bool
    smddpmprun_installed: bool
    network: NetworkFacts
    code: CodeFacts = CodeFacts(False, False)
    bindable_cpus: int = 0  # CPUs this process may run on (its affinity); 0: unknown, ranks are not bound
    intermediate_exists: bool = False  # output/intermediate is there before the job (SageMaker syncs it itself)
