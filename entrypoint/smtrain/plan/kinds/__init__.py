"""The distribution kinds' table (`KINDS`, the only list of them) and the choice of the one a job
runs: each kind is one module here (plan.kind.Kind), and `run` carries out the `Coordination` its
planner decides without knowing the kind.

A new kind: its module here (its flag, how messages name it, where it runs, its environment, its planner) and its
row in `KINDS`; nothing else names it."""
from __future__ import annotations

from typing import Any, Mapping, Optional

from ...config.hyperparameters import truthy
from ...config.model import TrainingConfig
from ...errors import ConfigError
from ..kind import Kind
from ..shape import JobShape, Role, job_shape
from .mpi import MPI
from .multi_worker_mirrored import MULTI_WORKER_MIRRORED
from .parameter_server import PARAMETER_SERVER
from .single import SINGLE

__all__ = ["KINDS", "UNSERVED", "asked_kind", "choose", "distribution_flags"]

# Asked for first to last; the last row runs where the kind asked for does not (no flag asks for it).
KINDS: tuple[Kind, ...] = (MPI, MULTI_WORKER_MIRRORED, PARAMETER_SERVER, SINGLE)

# Distribution hyperparameters the SDK writes that this image cannot serve, and what each asks for.
# Running the program anyway would train independent copies, and the user pays for each.
UNSERVED = {
    "sagemaker_distributed_dataparallel_enabled": "SageMaker's data-parallel library (smdistributed)",
    "sagemaker_pytorch_ddp_enabled": "PyTorch DDP",
    "sagemaker_torch_distributed_enabled": "PyTorch's torch.distributed launcher",
    "sagemaker_pytorch_xla_multi_worker_enabled": "PyTorch/XLA",
    "mp_parameters": "SageMaker's model-parallel library (smdistributed modelparallel)",
}
MODEL_PARALLEL = "mp_parameters"  # the SDK's hyperparameter for it holds the library's settings, not a flag


def distribution_flags(kinds: tuple[Kind, ...]) -> tuple[str, ...]:
    """The flags with which sagemaker-training puts the current instance group in the distribution:
    each kind's, and those of the libraries this image does not serve."""
    return (*(k.flag for k in kinds if k.flag), *(f for f in UNSERVED if f != MODEL_PARALLEL))


def asked_kind(config: TrainingConfig, kinds: tuple[Kind, ...]) -> Optional[Kind]:
    """The kind the job asks for (None: none), after refusing a distribution this image does not
    serve and more than one flag turned on (ConfigError naming hyperparameters.json)."""
    hyperparameters: Mapping[str, Any] = config.hyperparameters
    where = str(config.paths.config_file("hyperparameters.json"))
    for name, what in UNSERVED.items():
        if truthy(hyperparameters.get(name, False)) or (name == MODEL_PARALLEL and name in hyperparameters):
            offers = [k.offer for k in kinds]
            raise ConfigError(f"{where}: hyperparameter '{name}' asks for {what}, which this image does not serve; "
                              f"it serves {', '.join(offers[:-1])} and {offers[-1]}")
    chosen = [k.flag for k in kinds if k.flag_on(hyperparameters)]
    if len(chosen) > 1:
        raise ConfigError(f"{where}: hyperparameters {' and '.join(repr(c) for c in chosen)} each turn on a "
                          "distribution; a job runs one (set only one of them)")
    return next((k for k in kinds if k.asked(config)), None)


def choose(config: TrainingConfig) -> tuple[Optional[Kind], Kind, JobShape]:
    """The kind asked for, the kind this host runs (the table's last where the asked one does not run
    here) and the job's shape."""
    kinds = KINDS
    asked = asked_kind(config, kinds)
    shape = job_shape(config, asked, distribution_flags(kinds))
    runs = asked if asked is not None and shape.role is not Role.SINGLE else kinds[-1]
    return asked, runs, shape
