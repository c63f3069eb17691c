"""What the training program is running with, looked up without importing anything new."""
from __future__ import annotations

import sys
from typing import Any, Optional

__all__ = ["running_horovod"]


def running_horovod() -> Optional[Any]:
    """horovod.tensorflow when the program initialised it with more than one rank, else None."""
    module = sys.modules.get("horovod.tensorflow")
    try:
        return module if module is not None and module.is_initialized() and module.size() > 1 else None
    except Exception:  # horovod raises ValueError before init
        return None
