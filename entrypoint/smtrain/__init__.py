"""smtrain: the entry point of a TensorFlow + Horovod training container for Amazon SageMaker.

What training scripts import (each loaded on first use, so `import smtrain` costs nothing):

    from smtrain import pipes          # Pipe-mode channels as records or a tf.data.Dataset
    from smtrain import checkpoints    # durable checkpoints that resume after spot restarts
    from smtrain import metrics        # metric lines SageMaker's metric definitions match
    from smtrain import callbacks      # tf_keras callbacks: CheckpointCallback, MetricsCallback
    from smtrain import progress       # progress.step(): the stall watchdog knows this rank trains

The container's entry point is the `train` command (also `python -m smtrain`).
"""
from __future__ import annotations

import importlib
from typing import Any

__version__ = "0.4.0"
_USER_MODULES = ("pipes", "checkpoints", "metrics", "callbacks", "progress")
__all__ = ["__version__", "callbacks", "checkpoints", "metrics", "pipes", "progress"]  # _USER_MODULES


def __getattr__(name: str) -> Any:
    if name in _USER_MODULES:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module 'smtrain' has no attribute {name!r}")
