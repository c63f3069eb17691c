"""Which step profiling a job asks for: profilerconfig.json as SageMaker writes it for
`ProfilerConfig(framework_profile_params=FrameworkProfile(start_step, num_steps))`, and the
hyperparameters and variables that work without the file (and win over it):

    sagemaker_framework_metrics / SM_FRAMEWORK_METRICS     on (default) | off: every rank's steps
    sagemaker_detailed_profiling / SM_DETAILED_PROFILING   START:NUM | off (default): a TensorFlow
                                                           profiler trace of those training steps
    sagemaker_python_profiling / SM_PYTHON_PROFILING       START:NUM | off (default): cProfile of them
    sagemaker_profiler_min_free_mb / SM_PROFILER_MIN_FREE_MB   MiB (default 1024): step events stop
                                                           before the volume has less free

profilerconfig.json's `ProfilingParameters` hold `DetailedProfilingConfig` and `PythonProfilingConfig`
as strings of a Python dict (`"{\"StartStep\": 5, \"NumSteps\": 1, }"`: smdebug reads them with eval;
here `ast.literal_eval`); keys in any case, as smdebug reads them. `DisableProfiler: true` switches
step metrics off.
"""
from __future__ import annotations

from typing import Any, Mapping, NamedTuple, Optional

from ..errors import ConfigError
from ..wire.profiler_settings import DEFAULT_MIN_FREE_MB, Window
from .setting_values import whole_number

__all__ = ["Profiling", "profiling_of"]

OFF = ("off", "false", "0", "no", "none", "")


class Profiling(NamedTuple):
    """Step profiling as the job asks for it."""

    steps: bool = True  # every rank's steps as framework events
    detailed: Optional[Window] = None  # a TensorFlow profiler trace of these training steps
    python: Optional[Window] = None  # cProfile of these training steps
    min_free_mb: int = DEFAULT_MIN_FREE_MB  # the free space on the volume the step events never take


def _lower_keys(value: Any) -> Any:
    return {str(k).lower(): v for k, v in value.items()} if isinstance(value, dict) else value


def _file_window(parameters: Mapping[str, Any], field: str, where: str) -> Optional[Window]:
    raw = parameters.get(field.lower())
    if raw in (None, "", {}):
        return None
    import ast  # only for a profilerconfig.json that asks for a window

    try:
        value = _lower_keys(ast.literal_eval(raw) if isinstance(raw, str) else raw)
    except (ValueError, SyntaxError):
        raise ConfigError(f"{where}: ProfilingParameters.{field} must be a dict such as "
                          f"'{{\"StartStep\": 5, \"NumSteps\": 2}}', got {raw!r}") from None
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: ProfilingParameters.{field} must be a dict, got {raw!r}")
    if not value:
        return None
    if "startstep" not in value and ("starttimeinsecsinceepoch" in value or "durationinseconds" in value):
        raise ConfigError(f"{where}: ProfilingParameters.{field}: only step windows (StartStep, NumSteps) are "
                          f"supported, not time windows; got {raw!r}")
    return _window(value.get("startstep", 0), value.get("numsteps", 1), f"{where}: ProfilingParameters.{field}")


def _window(start: Any, num: Any, where: str) -> Window:
    try:
        window = Window(int(start), int(num))
    except (TypeError, ValueError):
        window = Window(-1, 0)
    if window.start_step < 0 or window.num_steps < 1:
        raise ConfigError(f"{where}: expected StartStep >= 0 and NumSteps >= 1, got {start!r} and {num!r}")
    return window


def _setting_window(raw: Any, name: str, where: str) -> Optional[Window]:
    text = str(raw).strip().lower()
    if text in OFF:
        return None
    start, sep, num = text.partition(":")
    if not sep or not start.strip().isdigit() or not num.strip().isdigit():
        raise ConfigError(f"{where}: {name} must be START:NUM (e.g. 5:2, steps 5 and 6) or off, got {raw!r}")
    return _window(start, num, f"{where}: {name}")


def profiling_of(decoded: Mapping[str, Any], environ: Mapping[str, str], profiler_config: Mapping[str, Any],
                 hp_where: str, file_where: str) -> Profiling:
    """The profiling settings from hyperparameters, variables and profilerconfig.json (the first two win)."""
    config = _lower_keys(dict(profiler_config))
    parameters = _lower_keys(config.get("profilingparameters") or {})
    if not isinstance(parameters, dict):
        raise ConfigError(f"{file_where}: ProfilingParameters must be an object, got {parameters!r}")
    steps = not bool(config.get("disableprofiler", False))
    detailed = _file_window(parameters, "DetailedProfilingConfig", file_where)
    python = _file_window(parameters, "PythonProfilingConfig", file_where)

    switch = environ.get("SM_FRAMEWORK_METRICS", decoded.get("sagemaker_framework_metrics"))
    if switch is not None:
        steps = str(switch).strip().lower() not in OFF
    for hp, env, current in (("sagemaker_detailed_profiling", "SM_DETAILED_PROFILING", "detailed"),
                             ("sagemaker_python_profiling", "SM_PYTHON_PROFILING", "python")):
        raw = environ.get(env, decoded.get(hp))
        if raw is not None:
            window = _setting_window(raw, f"{hp} (or {env})", hp_where)
            if current == "detailed":
                detailed = window
            else:
                python = window
    min_free_mb = whole_number(decoded, environ, "sagemaker_profiler_min_free_mb", "SM_PROFILER_MIN_FREE_MB",
                               DEFAULT_MIN_FREE_MB, hp_where, "MiB")
    return Profiling(steps, detailed, python, min_free_mb)
