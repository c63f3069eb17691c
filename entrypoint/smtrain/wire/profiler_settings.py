"""What `train` tells every rank's program about step profiling (smtrain.profiler.steps), as one
typed value in one environment variable the program keeps (`FRAMEWORK_PROFILER_ENV`): the rank's
start-up hook reads it. Absent: nothing is measured."""
from __future__ import annotations

import json
from typing import Mapping, NamedTuple, Optional

FRAMEWORK_PROFILER_ENV = "SM_FRAMEWORK_PROFILER"
DEFAULT_MIN_FREE_MB = 1024

__all__ = ["DEFAULT_MIN_FREE_MB", "FRAMEWORK_PROFILER_ENV", "ProfilerSettings", "Window"]


class Window(NamedTuple):
    """Training steps [start_step, start_step + num_steps), counted from 0 on each rank."""

    start_step: int
    num_steps: int

    def covers(self, step: int) -> bool:
        """Whether step `step` lies in the window."""
        return self.start_step <= step < self.start_step + self.num_steps

    @property
    def last_step(self) -> int:
        """The window's last step."""
        return self.start_step + self.num_steps - 1

    def to_list(self) -> list[int]:
        return [self.start_step, self.num_steps]

    @classmethod
    def from_list(cls, raw: Optional[list]) -> "Optional[Window]":
        return cls(int(raw[0]), int(raw[1])) if raw else None


class ProfilerSettings(NamedTuple):
    """What each rank's start-up hook needs to record its steps."""
    out: str  # the host's profiler folder (output/profiler): framework/ goes under it
    host: str  # the host's name, part of each rank's node id (`<rank>-<host>`, as smdebug names it)
    steps: bool = True  # step metrics (framework events)
    detailed: Optional[Window] = None  # a TensorFlow profiler trace of these steps
    python: Optional[Window] = None  # cProfile of these steps
    min_free_mb: int = DEFAULT_MIN_FREE_MB  # step events stop before the volume has less free

    def to_json(self) -> str:
        return json.dumps({"out": self.out, "host": self.host, "steps": self.steps,
                           "detailed": self.detailed.to_list() if self.detailed else None,
                           "python": self.python.to_list() if self.python else None,
                           "min_free_mb": self.min_free_mb}, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str) -> "ProfilerSettings":
        raw = json.loads(text)
        return cls(out=str(raw["out"]), host=str(raw["host"]), steps=bool(raw.get("steps", True)),
                   detailed=Window.from_list(raw.get("detailed")), python=Window.from_list(raw.get("python")),
                   min_free_mb=int(raw.get("min_free_mb", DEFAULT_MIN_FREE_MB)))

    @classmethod
    def from_environ(cls, environ: Mapping[str, str]) -> "Optional[ProfilerSettings]":
        text = environ.get(FRAMEWORK_PROFILER_ENV)
        try:
            return cls.from_json(text) if text else None
        except (ValueError, KeyError, TypeError, IndexError):
            return None
