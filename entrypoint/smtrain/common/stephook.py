"""Where `smtrain.progress.step()` tells the step profiler about a step, without either importing the
other: the rank's start-up hook sets `listener` when step profiling is on."""
from __future__ import annotations

from typing import Callable, Optional

__all__ = ["listener"]

listener: Optional[Callable[[int], None]] = None
