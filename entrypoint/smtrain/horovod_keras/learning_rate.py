"""An optimizer's learning rate read and set as Horovod's learning-rate callbacks need it, for Keras 3 and
tf_keras alike: tf_keras keeps it in `optimizer.lr`, a variable its backend reads and sets; Keras 3 has no
`lr` and keeps it behind the `learning_rate` property (a variable the compiled step reads each time)."""
from __future__ import annotations

from typing import Any

from .keras3 import is_keras3

__all__ = ["learning_rate", "set_learning_rate"]


def learning_rate(optimizer: Any, backend: Any) -> float:
    """The learning rate now (`backend`: tf_keras's, for a tf_keras optimizer)."""
    if is_keras3(optimizer):
        import numpy as np

        return float(np.asarray(optimizer.learning_rate))
    return float(backend.get_value(optimizer.lr))


def set_learning_rate(optimizer: Any, backend: Any, value: float) -> None:
    """The learning rate from the next step on."""
    if is_keras3(optimizer):
        optimizer.learning_rate = value
    else:
        backend.set_value(optimizer.lr, value)
