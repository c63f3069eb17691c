"""What the SDK's local mode lacks and `train` makes up for (pure): Pipe mode emulated from a channel's
files (which channels, and the feeder that streams them), and the checkpoint folder carried from one
local run to the next (smtrain.run.carry).

The SageMaker SDK's local mode (v2's estimators and v3's ModelTrainer alike) writes every channel as
`TrainingInputMode: File`, whatever the job asks for, so a script that reads a channel as a Pipe
(PipeModeDataset, smtrain.pipes) cannot be rehearsed there. Under local mode - resourceconfig.json's
`current_instance_type` is `local`, `local_cpu` or `local_gpu` - or when asked, `train` streams each
such channel's files through FIFOs as SageMaker would (smtrain.data.feeder: objects in key order, a new
FIFO `<channel>_<epoch>` per epoch, ShuffleConfig and ShardedByS3Key where the config has them), and
the channel is planned like a Pipe channel (one FIFO per rank under Horovod). Its folder stays as it
is: a script that reads the files still can. A channel that nobody opens costs a waiting thread.

Setting: hyperparameter `sagemaker_pipe_emulation` or env `SM_PIPE_EMULATION` = `auto` (default: on
under local mode), `on` (every File channel), `off`, or a comma-separated list of channels.
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import NamedTuple, Optional

from ..config.model import InputMode, TrainingConfig
from ..config.settings import PIPE_EMULATION
from ..errors import ConfigError

__all__ = ["CHECKPOINTS_CHANNEL", "NOT_EMULATED", "CheckpointCarry", "checkpoint_carry",
    "describe", "emulated_channels", "feeder_args", "local_mode"]

CHECKPOINTS_CHANNEL = "checkpoints"  # a checkpoint folder carried into a local run (smtrain.run.carry)
# ModelTrainer's driver and code channels, and the checkpoint folder
NOT_EMULATED = frozenset({"sm_drivers", "code", CHECKPOINTS_CHANNEL})
_ON, _OFF, _AUTO = ("on", "all", "true", "1", "yes"), ("off", "false", "0", "no", "none"), "auto"


def local_mode(config: TrainingConfig) -> bool:
    """The job runs under the SDK's local mode (the instance type it writes)."""
    return str(config.resource_config.get("current_instance_type", "")).startswith("local")


def _setting(config: TrainingConfig) -> tuple[str, str]:
    variable, hyperparameter = PIPE_EMULATION.variable, PIPE_EMULATION.hyperparameter
    if variable in config.environ:
        return str(config.environ[variable]).strip(), f"environment variable {variable}"
    return str(config.hyperparameters.get(hyperparameter, PIPE_EMULATION.default)).strip(), f"hyperparameter '{hyperparameter}'"


def emulated_channels(config: TrainingConfig) -> tuple[str, ...]:
    """The File channels whose files are streamed as Pipe-mode FIFOs on this host."""
    setting, where = _setting(config)
    files = [c.name for c in config.channels if c.mode is not InputMode.PIPE and c.name not in NOT_EMULATED]
    lowered = setting.lower()
    if lowered == _AUTO:
        chosen = files if local_mode(config) else []
    elif lowered in _ON:
        chosen = files
    elif lowered in _OFF:
        chosen = []
    else:
        chosen = [name.strip() for name in setting.split(",") if name.strip()]
        unknown = [name for name in chosen if name not in files]
        if unknown:
            raise ConfigError(f"{where} names {unknown}, which {'is' if len(unknown) == 1 else 'are'} not File "
                              f"channels of inputdataconfig.json (File channels: {files}); expected auto, on, off "
                              "or channel names separated by commas")
    names = {c.name for c in config.channels}
    # `C_<epoch>` is where the FIFOs go: not where another channel's folder is (AWS's `train` beside `train_0`)
    return tuple(c for c in chosen if not any(re.fullmatch(re.escape(c) + r"_[0-9]+", n) for n in names))


def feeder_args(config: TrainingConfig, channels: tuple[str, ...]) -> tuple[str, ...]:
    """The local feeder's arguments for `channels`, from their folders (plan.helper_plan runs it)."""
    data = config.paths.input_data_dir
    sources = [arg for name in channels for arg in ("--source", f"{name}={data / name}")]
    return ("--base", str(config.paths.base), "--emulate", *sources)


def describe(channels: tuple[str, ...]) -> str:
    """The log line that says Pipe mode is emulated for `channels`."""
    return (f"Pipe mode emulated for channel{'s' if len(channels) > 1 else ''} {', '.join(channels)}: their files "
            "are streamed through FIFOs as SageMaker's Pipe mode would (local mode delivers File mode)")


class CheckpointCarry(NamedTuple):
    """Where a local run restores its checkpoint folder from, and where it keeps it at the end."""
    restore_from: Optional[Path]  # the `checkpoints` channel's folder, copied into an empty checkpoint folder
    keep_in: Optional[Path]  # local mode: where the checkpoint folder is copied when the job ends


def checkpoint_carry(config: TrainingConfig) -> CheckpointCarry:
    """A channel named `checkpoints` is restored (SageMaker restores from S3; local mode cannot); under
    local mode the folder is kept in `output/data/checkpoints`, which the SDK packs into output.tar.gz."""
    has_channel = any(c.name == CHECKPOINTS_CHANNEL for c in config.channels)
    return CheckpointCarry(
        restore_from=config.paths.input_data_dir / CHECKPOINTS_CHANNEL if has_channel else None,
        keep_in=config.paths.output_data_dir / CHECKPOINTS_CHANNEL if local_mode(config) else None,
    )
