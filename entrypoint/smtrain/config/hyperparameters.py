"""Hyperparameters as SageMaker writes them, decoded and split the way sagemaker-training does.

The SDK writes every value as a string, usually JSON-encoded (`"3"`, `"\\"adam\\""`, `"true"`); a
value that is not valid JSON is kept as the string itself. Keys starting with `sagemaker_` (and a few
fixed names) are the toolkit's; the rest become the program's `--key value` arguments.
"""
from __future__ import annotations

import json
from typing import Any, Mapping, Optional

from .settings import S3_OUTPUT

__all__ = ["SAGEMAKER_PREFIX", "TOOLKIT_NAMES", "TUNING_MARKER", "decode", "framework_parameters", "is_toolkit_name",
    "to_cmd_args", "truthy", "user_hyperparameters", "with_tuning_model_dir"]

SAGEMAKER_PREFIX = "sagemaker_"
# Names sagemaker-training treats as its own although some lack the prefix; they are neither user
# arguments nor "additional framework parameters".
TOOLKIT_NAMES = frozenset(
    {
        "sagemaker_program",
        "sagemaker_submit_directory",
        "sagemaker_enable_cloudwatch_metrics",
        "sagemaker_region",
        "sagemaker_container_log_level",
        "sagemaker_job_name",
        "default_user_module_name",
        "_tuning_objective_metric",
        S3_OUTPUT.hyperparameter,
    }
)


def truthy(value: Any) -> bool:
    """A flag as the SDK writes it: JSON true/false, or the strings 'true'/'false' in any case."""
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1", "yes")
    return bool(value)


def decode(raw: Mapping[str, Any]) -> dict[str, Any]:
    """JSON-decode each value where it is valid JSON (as sagemaker-training does), else keep it."""
    decoded = {}
    for key, value in raw.items():
        try:
            decoded[key] = json.loads(value)
        except (ValueError, TypeError):
            decoded[key] = value
    return decoded


def is_toolkit_name(key: str) -> bool:
    """A hyperparameter meant for the toolkit (`sagemaker_*` and the SDK's own), not the program."""
    return key in TOOLKIT_NAMES or key.startswith(SAGEMAKER_PREFIX)


def user_hyperparameters(decoded: Mapping[str, Any]) -> dict[str, Any]:
    """The hyperparameters that become the program's arguments."""
    return {k: v for k, v in decoded.items() if not is_toolkit_name(k)}


def framework_parameters(decoded: Mapping[str, Any]) -> dict[str, Any]:
    """`sagemaker_*` hyperparameters other than the fixed toolkit names (SM_FRAMEWORK_PARAMS)."""
    return {k: v for k, v in decoded.items() if is_toolkit_name(k) and k not in TOOLKIT_NAMES}


def _as_text(value: Any) -> str:
    return "" if value is None else str(value)


def to_cmd_args(user_hps: Mapping[str, Any]) -> list[str]:
    """`--key value` pairs sorted by key; one-letter keys get a single dash; dicts become `k=v,k=v`;
    each value is one argument, whatever characters it holds."""
    args: list[str] = []
    for key in sorted(user_hps):
        name = _as_text(key)
        value = user_hps[key]
        args.append(("--" if len(name) > 1 else "-") + name if name else "")
        if hasattr(value, "items"):
            args.append(",".join(f"{k}={v}" for k, v in sorted(value.items())))
        else:
            args.append(_as_text(value))
    return args


TUNING_MARKER = "_tuning_objective_metric"


def with_tuning_model_dir(decoded: Mapping[str, Any], job_name: Optional[str]) -> dict[str, Any]:
    """As SageMaker's TensorFlow container: in a tuning job's training jobs (the SDK adds
    `_tuning_objective_metric`), `model_dir` outside /opt/ml gets `/<job name>/model` appended, so
    that the tuning job's parallel training jobs do not write into one folder. Unlike the container,
    a missing `model_dir` stays missing (it made `None/<job>/model`), and without a job name
    (TRAINING_JOB_NAME) nothing changes (it made `<model_dir>/None/model`)."""
    result = dict(decoded)
    model_dir = result.get("model_dir")
    if TUNING_MARKER not in result or model_dir is None or not job_name:
        return result
    if not str(model_dir).startswith("/opt/ml"):
        result["model_dir"] = f"{model_dir}/{job_name}/model"
    return result
