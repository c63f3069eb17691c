"""How a setting's raw value (a variable's string, a hyperparameter as decoded) is read, what is expected of
it (the words a ConfigError uses) and the reference's word for its type; and what a default may depend on."""
from __future__ import annotations

import math
from typing import Any, NamedTuple, Optional

from ..wire.profiler_settings import Window

__all__ = ["ABSOLUTE_PATH", "CHOICE_0_1", "Choice", "OFF_WORDS", "ON_WORDS", "PORT", "SWITCH", "Seconds", "SecondsList",
           "SettingContext", "SettingType", "StepWindow", "TEXT", "WholeNumber"]

ON_WORDS = ("on", "true", "1", "yes")
OFF_WORDS = ("off", "false", "0", "no", "none", "")


class SettingContext(NamedTuple):
    """What a default may depend on: the job's size and what profilerconfig.json asks for."""

    num_hosts: int = 1
    profiler_interval_ms: Optional[float] = None  # ProfilingIntervalInMilliseconds
    steps_profiled: bool = True  # not DisableProfiler
    detailed_window: Optional[Window] = None  # DetailedProfilingConfig's window
    python_window: Optional[Window] = None  # PythonProfilingConfig's window


class SettingType:
    """How a raw value (a variable's string, a hyperparameter as decoded) is read, and what is expected."""

    expected = "a value"
    shown = "text"  # the reference's word for the type

    def parse(self, raw: Any) -> Any:
        """The value; ValueError where `raw` is not what `expected` says."""
        return str(raw)


class Seconds(SettingType):
    """A number of seconds (or another unit) >= `minimum`; `why` says why the minimum where it is not 0."""

    shown = "seconds"

    def __init__(self, minimum: float = 0.0, unit: str = "seconds", why: str = "") -> None:
        self.minimum, self.unit = minimum, unit
        self.expected = f"a number of {unit} >= {minimum:g}" + (f" ({why})" if why else "")
        self.shown = unit

    def parse(self, raw: Any) -> float:
        try:
            value = float(raw)
        except (TypeError, ValueError):
            raise ValueError(self.expected) from None
        if not math.isfinite(value) or value < self.minimum:
            raise ValueError(self.expected)
        return value


class WholeNumber(SettingType):
    """A whole number >= 0 (of `unit`), or within `bounds` (and then `expected` says what it is)."""

    shown = "whole number"

    def __init__(self, unit: str = "", bounds: tuple[int, int] = (0, 1 << 63), expected: str = "") -> None:
        self.bounds = bounds
        self.expected = expected or f"a whole number{f' of {unit}' if unit else ''} >= 0"
        self.shown = unit or "whole number"

    def parse(self, raw: Any) -> int:
        text = str(raw).strip()
        if not text.isdigit() or not self.bounds[0] <= int(text) <= self.bounds[1]:
            raise ValueError(self.expected)
        return int(text)


class _Switch(SettingType):
    expected = f"on or off ({', '.join(ON_WORDS)} / {', '.join(w for w in OFF_WORDS if w)}, any case)"
    shown = "on / off"

    def parse(self, raw: Any) -> bool:
        word = str(raw).strip().lower()
        if word not in ON_WORDS + OFF_WORDS:
            raise ValueError(self.expected)
        return word in ON_WORDS


class Choice(SettingType):
    """One of `values`, as written."""

    def __init__(self, *values: str) -> None:
        self.values = values
        self.expected = " or ".join(values)
        self.shown = " / ".join(values)

    def parse(self, raw: Any) -> str:
        text = str(raw).strip()
        if text not in self.values:
            raise ValueError(self.expected)
        return text


class SecondsList(SettingType):
    """Numbers of seconds >= 0, comma-separated (at least one)."""

    expected = "numbers of seconds >= 0, comma-separated (e.g. 1,3,9)"
    shown = "seconds, ..."

    def parse(self, raw: Any) -> tuple[float, ...]:
        try:
            values = tuple(float(part) for part in str(raw).split(","))
        except ValueError:
            raise ValueError(self.expected) from None
        if not all(math.isfinite(v) and v >= 0 for v in values):
            raise ValueError(self.expected)
        return values


class _AbsolutePath(SettingType):
    expected = "an absolute path"
    shown = "path"

    def parse(self, raw: Any) -> str:
        text = str(raw)
        if not text.startswith("/"):
            raise ValueError(self.expected)
        return text


class _Choice01(SettingType):
    expected = "0 or 1"
    shown = "0 / 1"

    def parse(self, raw: Any) -> str:
        if str(raw).strip() not in ("0", "1"):
            raise ValueError(self.expected)
        return str(raw).strip()


class StepWindow(SettingType):
    """START:NUM (training steps START .. START+NUM-1), or off (None)."""

    expected = "START:NUM, NUM >= 1 (e.g. 5:2, steps 5 and 6), or off"
    shown = "START:NUM / off"

    def parse(self, raw: Any) -> Optional[Window]:
        text = str(raw).strip().lower()
        if text in OFF_WORDS:
            return None
        start, sep, num = text.partition(":")
        if not sep or not start.strip().isdigit() or not num.strip().isdigit() or int(num) < 1:
            raise ValueError(self.expected)
        return Window(int(start), int(num))


TEXT = SettingType()
PORT = WholeNumber("TCP port", (1, 65535), "a TCP port 1-65535")
SWITCH = _Switch()
ABSOLUTE_PATH = _AbsolutePath()
CHOICE_0_1 = _Choice01()
