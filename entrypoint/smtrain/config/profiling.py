"""Which step profiling a job asks for: profilerconfig.json as SageMaker writes it for
`ProfilerConfig(framework_profile_params=FrameworkProfile(start_step, num_steps))`, and the
settings that work without the file and win over it (FRAMEWORK_METRICS, DETAILED_PROFILING,
PYTHON_PROFILING, MIN_FREE_MB in config.settings). The file gives those settings their defaults
(`profiler_context`).

profilerconfig.json's `ProfilingParameters` hold `DetailedProfilingConfig` and `PythonProfilingConfig`
as strings of a Python dict (`"{\"StartStep\": 5, \"NumSteps\": 1, }"`: smdebug reads them with eval;
here `ast.literal_eval`); keys in any case, as smdebug reads them. `DisableProfiler: true` switches
step metrics off.
"""
from __future__ import annotations

from typing import Any, Mapping, NamedTuple, Optional

from ..errors import ConfigError
from ..wire.profiler_settings import DEFAULT_MIN_FREE_MB, Window
from .setting_types import SettingContext
from .settings import DETAILED_PROFILING, FRAMEWORK_METRICS, MIN_FREE_MB, PYTHON_PROFILING, load_settings

__all__ = ["Profiling", "profiler_context", "profiling_from", "profiling_of"]


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


def profiler_context(profiler_config: Mapping[str, Any], file_where: str, num_hosts: int) -> SettingContext:
    """What profilerconfig.json (`profiler_config`, read from `file_where`) gives the settings' defaults."""
    config = _lower_keys(dict(profiler_config))
    parameters = _lower_keys(config.get("profilingparameters") or {})
    if not isinstance(parameters, dict):
        raise ConfigError(f"{file_where}: ProfilingParameters must be an object, got {parameters!r}")
    interval = config.get("profilingintervalinmilliseconds")
    if interval is not None and (isinstance(interval, bool) or not isinstance(interval, (int, float))):
        raise ConfigError(f"{file_where}: ProfilingIntervalInMilliseconds must be a number, got {interval!r}")
    return SettingContext(num_hosts, float(interval) if interval is not None else None,
                          not bool(config.get("disableprofiler", False)),
                          _file_window(parameters, "DetailedProfilingConfig", file_where),
                          _file_window(parameters, "PythonProfilingConfig", file_where))


def profiling_from(settings: Mapping[Any, Any]) -> Profiling:
    """The step profiling `settings` (config.settings, loaded) ask for."""
    return Profiling(settings[FRAMEWORK_METRICS], settings[DETAILED_PROFILING], settings[PYTHON_PROFILING],
                     settings[MIN_FREE_MB])


def profiling_of(decoded: Mapping[str, Any], environ: Mapping[str, str], profiler_config: Mapping[str, Any],
                 hp_where: str, file_where: str) -> Profiling:
    """The profiling settings from hyperparameters, variables and profilerconfig.json (the first two win)."""
    rows = (FRAMEWORK_METRICS, DETAILED_PROFILING, PYTHON_PROFILING, MIN_FREE_MB)
    return profiling_from(load_settings(decoded, environ, profiler_context(profiler_config, file_where, 1), hp_where,
                                        rows))
